"""Per-task overhead of Prefect around a stack task, and how fast the CLI answers `--help`.

Method (task overhead). It needs an environment deployed through the real engine (on the local
cloud), so every stack has a fingerprint: bench/compare.py runs it on the one it deployed; alone,
it starts a Prefect server and a local cloud and deploys one with no injected latency first. One
flow then runs 50 stack tasks on `networking` with operation `up`: each one takes the task's skip
path (fingerprint matches -> no engine call), which is the real body of
`tasks.stacks.stack_operation` doing real work (fingerprint of the program source and arguments,
reading the stored fingerprint and outputs). The task is a copy of `stack_operation` with the very
same options the pipeline runs it with (name, run name, the retry policy built from settings:
retries and delays, the retry condition, no cache, results not persisted, no print logging) whose function wraps `stack_operation.fn` and records how long the
body took. Per call: overhead = wall time seen by the caller - body time recorded inside. Calls
are made one at a time, after 5 untimed warm-up calls, in three ways:

- `task_overhead_ms_*`: `.submit(...)` then `.result()`, as the pipeline runs its stack tasks
  (thread pool task runner, futures) - the headline figure;
- `task_overhead_direct_ms_*`: the task called directly inside the flow (same thread);
- `task_overhead_trivial_ms_*`: submitted, but with a body that does nothing (`pass`), same options:
  Prefect's own share, without argument handling that depends on what the body receives.

Prefect 3 reports task run states to the server as events sent in the background, so the
server's own work is not on this path; what is measured is what a flow waits for per task.
The first call of each kind (one-time costs: registering the task, first API calls) is reported as
`task_overhead_first_ms`. `cli_help_s`: wall time of `python flows/run.py --help`, median of 5.

    .venv/bin/python bench/overhead.py                      # alone: its own servers and deploy
    .venv/bin/python bench/overhead.py --env ours-a --out F  # on a deployed environment (its
                                                             # file in the caller's project)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit import (
    LOGS,
    PYTHON,
    ROOT,
    median,
    merge_results,
    p95,
    run_metadata,
    workdir,
)
from sampling import run_measured
from sessions import session

WARM_UP = 5


def _copy_options(task: Any, fn: Callable[..., Any]) -> Any:
    """A task running `fn` with the options of `task` (as the pipeline configures them)."""
    from prefect import Task

    return Task(
        fn=fn,
        name=task.name,
        task_run_name=task.task_run_name,
        retries=task.retries,
        retry_delay_seconds=task.retry_delay_seconds,
        retry_jitter_factor=task.retry_jitter_factor,
        retry_condition_fn=task.retry_condition_fn,
        cache_policy=task.cache_policy,
        persist_result=task.persist_result,
        log_prints=task.log_prints,
    )


def measure_tasks(n: int, environment: str) -> dict[str, Any]:
    """Task overhead figures on a deployed environment: what it deploys is its file in the
    project STACKFLOW_PROJECT_DIR names; this machine's settings come from STACKFLOW_* variables."""
    from prefect import flow

    from flows.pipeline import build_context, deploy
    from stackflow.engine import Operation
    from stackflow.outcome import NodeOutcome
    from stackflow.retry import stack_policy
    from stackflow.settings import get_settings
    from tasks.context import RunContext
    from tasks.stacks import stack_operation

    # A no-op deploy: every stack has a fingerprint, so the skip path is taken.
    summary = deploy(environment=environment)
    if summary["engine_calls"]:
        raise RuntimeError(f"{environment} was not deployed and unchanged: {summary}")
    bodies: list[float] = []

    def timed_stack_operation(
        ctx: RunContext,
        node: str,
        operation: Operation,
        upstream: dict[str, NodeOutcome],
        force: bool = False,
    ) -> NodeOutcome:
        started = time.perf_counter()
        try:
            return stack_operation.fn(ctx, node, operation, upstream, force)
        finally:
            bodies.append(time.perf_counter() - started)

    def trivial(
        ctx: RunContext,
        node: str,
        operation: Operation,
        upstream: dict[str, NodeOutcome],
        force: bool = False,
    ) -> None:
        started = time.perf_counter()
        bodies.append(time.perf_counter() - started)

    settings = get_settings(environment)
    policy = stack_policy(settings.stack_retries, settings.retry_delay_s)
    configured = stack_operation.with_options(**policy.task_options())  # as flows/walk.py runs it
    timed = _copy_options(configured, timed_stack_operation)
    empty = _copy_options(configured, trivial)

    @flow(name="bench-task-overhead", persist_result=False, log_prints=False)
    def overhead_flow() -> dict[str, list[float]]:
        ctx = build_context(settings)
        out: dict[str, list[float]] = {}
        calls: dict[str, Callable[[], Any]] = {
            "submit": lambda: timed.submit(ctx, "networking", Operation.UP, {}).result(),
            "direct": lambda: timed(ctx, "networking", Operation.UP, {}),
            "trivial": lambda: empty.submit(ctx, "networking", Operation.UP, {}).result(),
        }
        for kind, call in calls.items():
            overheads: list[float] = []
            for _ in range(WARM_UP + n):
                started = time.perf_counter()
                outcome = call()
                wall = time.perf_counter() - started
                overheads.append(wall - bodies[-1])
                if kind != "trivial" and outcome.status != "unchanged":
                    raise RuntimeError(f"expected the skip path, got {outcome.status}")
            assert not ctx.engine_calls, "the skip path must not call the engine"
            out[kind] = overheads
        return out

    measured = overhead_flow()
    ms = {k: [v * 1000 for v in vals[WARM_UP:]] for k, vals in measured.items()}
    body_ms = [b * 1000 for b in bodies]
    return {
        "task_overhead_tasks": n,
        "task_overhead_ms_median": round(median(ms["submit"]), 2),
        "task_overhead_ms_p95": round(p95(ms["submit"]), 2),
        "task_overhead_direct_ms_median": round(median(ms["direct"]), 2),
        "task_overhead_direct_ms_p95": round(p95(ms["direct"]), 2),
        "task_overhead_trivial_ms_median": round(median(ms["trivial"]), 2),
        "task_overhead_trivial_ms_p95": round(p95(ms["trivial"]), 2),
        "task_overhead_first_ms": round(measured["submit"][0] * 1000, 2),
        "task_body_skip_path_ms_median": round(median(body_ms[WARM_UP : WARM_UP + n]), 2),
    }


def measure_cli_help(times: int = 5) -> float:
    walls = []
    for _ in range(times):
        started = time.perf_counter()
        done = subprocess.run(
            [PYTHON, str(ROOT / "flows" / "run.py"), "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f"`python flows/run.py --help` failed:\n{done.stderr[-2000:]}")
    return round(median(walls), 3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50, help="timed stack tasks per kind")
    parser.add_argument("--env", help="a deployed environment (its file in STACKFLOW_PROJECT_DIR)")
    parser.add_argument("--out", type=Path, help="write results here instead of bench/results.json")
    args = parser.parse_args(argv)
    if args.env:
        results = measure_tasks(args.tasks, args.env)
        results["cli_help_s"] = measure_cli_help()
        if args.out is not None:
            args.out.write_text(json.dumps(results, indent=2))
        else:
            print(json.dumps(results, indent=2))
        return
    LOGS.mkdir(exist_ok=True)
    with workdir("overhead") as tmp, session(Path(tmp)) as s:
        env = s.env(Path(tmp) / "state")
        deploy = [PYTHON, "flows/run.py", "up", "--env", "bench-task"]
        run_measured(deploy, env, LOGS / "overhead-deploy.log").check()
        out = Path(tmp) / "overhead.json"
        child = [PYTHON, __file__, "--env", "bench-task", "--tasks", str(args.tasks)]
        run_measured([*child, "--out", str(out)], env, LOGS / "overhead.log").check()
        results = json.loads(out.read_text())
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))
        return
    merge_results({"task_overhead": results, **run_metadata()})
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
