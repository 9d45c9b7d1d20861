"""Fan-out: N environments deployed by one parent flow, at most C deploy flows at a time.

The parent flow maps a task over the environment names on a `ThreadPoolTaskRunner(max_workers=C)`;
each task runs the real `deploy` flow (a subflow, with its own stack tasks, concurrency slots,
fingerprints and artifact). Every stack takes the same simulated latency L, so one environment's
critical path is `GRAPH.critical_path` (3 L: networking -> database -> app) and the ideal wall time
is `ceil(N / C) * critical path`. Reported: wall / ideal, and the peak RSS of the process that ran
the flows (each N runs in a fresh child process with a fresh state folder, so peaks do not carry
over; the Prefect server is a separate process and is not included), and how often Prefect's API
client backed off (503 from a server on SQLite) during the run.

For N = 4 the child also runs the hand-written script (bench/sequential_baseline.py) over 4 other
environments with the same latencies, one after another: `sequential_speedup_fanout` = its wall
time / ours - the case where the work really is parallel.

    .venv/bin/python bench/fanout.py [--sizes 1,4,16,32] [--concurrency 8] [--latency 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchkit import (
    PYTHON,
    ROOT,
    count_client_retries,
    env_names,
    environ,
    peak_rss_mb,
    prefect_session,
    say,
    stackflow_env,
    workdir,
    write_out,
)

SIZES = (1, 4, 16, 32)
CONCURRENCY = 8
LATENCY_S = 3.0  # per stack: critical path 9 s; ideal for N=32 at C=8 is 36 s
COMPARE_AT = 4  # the N whose child also times the sequential script


def run_fanout(environments: Sequence[str], concurrency: int) -> list[dict[str, Any]]:
    """Deploy the environments from one parent flow, `concurrency` deploy flows at a time.

    Settings (state folder, latencies) come from the STACKFLOW_* variables of this process.

    Raises:
        RuntimeError: naming the environments whose deploy did not complete.
    """
    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.pipeline import deploy

    @task(
        name="deploy-environment",
        task_run_name="deploy-{environment}",
        cache_policy=NO_CACHE,
        persist_result=False,
    )
    def deploy_environment(environment: str) -> dict[str, Any]:
        return deploy(environment=environment)

    @flow(name="bench-fanout", persist_result=False, log_prints=False)
    def fanout(environments: list[str]) -> list[dict[str, Any]]:
        futures = deploy_environment.map(environments)
        return [f.result() for f in futures]

    # Typed as Any: TaskRunner is invariant in its future type, so mypy rejects the subclass here.
    runner: Any = ThreadPoolTaskRunner(max_workers=concurrency)
    summaries: list[dict[str, Any]] = fanout.with_options(task_runner=runner)(list(environments))
    failed = [s["environment"] for s in summaries if s.get("failed")]
    if failed:
        raise RuntimeError(f"fan-out deploys failed: {', '.join(failed)}")
    return summaries


def ideal_s(n: int, concurrency: int, critical_path_s: float) -> float:
    return math.ceil(n / concurrency) * critical_path_s


def measure_one(
    n: int, concurrency: int, latency_s: float, compare_sequential: bool = False
) -> dict[str, Any]:
    """One fan-out of N environments in this process, on a fresh state folder."""
    from sequential_baseline import run_sequential

    from stackflow.engine.simulated import read_journal
    from stackflow.graph import GRAPH

    weights = dict.fromkeys(GRAPH.stacks, latency_s)
    critical = GRAPH.critical_path(weights)
    with workdir(f"fanout-{n}") as tmp:
        with environ(stackflow_env(Path(tmp) / "warm-up", {"*": 0.0})):  # imports, untimed
            run_fanout(["bench-warm"], 1)
        retries = count_client_retries()
        before = (retries.sleeps, retries.seconds)
        with environ(stackflow_env(Path(tmp) / "state", weights)):
            started, cpu_started = time.perf_counter(), time.process_time()
            summaries = run_fanout(env_names(n), concurrency)
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            after = (retries.sleeps, retries.seconds)
            script = run_sequential(env_names(n, "seq")) if compare_sequential else None
            journal = read_journal(Path(tmp) / "state")
    ideal = ideal_s(n, concurrency, critical)
    calls = sum(len(s["engine_calls"]) for s in summaries)
    ours = set(env_names(n))  # not the sequential script's environments
    starts = [j for j in journal if j["phase"] == "start" and j["stack"].split("/")[0] in ours]
    result: dict[str, Any] = {
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal, 3),
        "ratio": round(wall / ideal, 3),
        "engine_calls": calls,
        # CPU seconds this one process spent (all threads): near wall_s means the fan-out is
        # bound by one interpreter's CPU (the GIL), not by waiting on the simulated cloud
        "process_cpu_s": round(cpu, 3),
        # the simulated engine runs every program under one mock runtime per process, one at a
        # time: their summed run time is a floor under the wall time that no orchestration beats
        "sim_program_s": round(sum(j.get("program_s", 0.0) for j in starts), 3),
        "sim_program_wait_s": round(sum(j.get("program_wait_s", 0.0) for j in starts), 3),
        "peak_rss_mb": peak_rss_mb()["self"],
        "client_retry_sleeps": after[0] - before[0],
        "client_retry_sleep_s": round(after[1] - before[1], 2),
    }
    if script is not None:
        result["sequential_wall_s"] = round(script, 3)
        result["sequential_speedup"] = round(script / wall, 3)
    return result


def measure(
    sizes: Sequence[int] = SIZES, concurrency: int = CONCURRENCY, latency_s: float = LATENCY_S
) -> dict[str, Any]:
    """Every N in its own child process (fresh memory peak); PREFECT_API_URL must be set."""
    runs: dict[str, Any] = {}
    for n in sizes:
        started = time.monotonic()
        child = [PYTHON, str(Path(__file__)), "--one", str(n), "--concurrency", str(concurrency)]
        if n == COMPARE_AT:
            child.append("--compare-sequential")
        done = subprocess.run(  # the child's log goes to our stderr; its result is its last line
            [*child, "--latency", str(latency_s)],
            cwd=ROOT,
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"fan-out N={n} failed (exit {done.returncode}; its log is above)")
        runs[str(n)] = json.loads(done.stdout.strip().splitlines()[-1])
        say(f"fan-out N={n}: {runs[str(n)]} ({time.monotonic() - started:.0f}s with start-up)")
    compared = runs.get(str(COMPARE_AT), {})
    return {
        "sequential_speedup_fanout": compared.get("sequential_speedup"),
        "sequential_fanout_envs": COMPARE_AT if compared else None,
        "fanout": {
            "simulated": True,
            "concurrency": concurrency,
            "latency_per_stack_s": latency_s,
            "method": "one parent flow, ThreadPoolTaskRunner(max_workers=concurrency) mapping a "
            "task that runs the deploy flow; ideal = ceil(N/concurrency) * critical path",
            "runs": runs,
        },
        "fanout_ratio_max": max(r["ratio"] for r in runs.values()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--latency", type=float, default=LATENCY_S, help="seconds per stack")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: one N, JSON on stdout
    parser.add_argument("--compare-sequential", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help="write results here instead of bench/results.json")
    args = parser.parse_args(argv)
    if args.one is not None:
        result = measure_one(args.one, args.concurrency, args.latency, args.compare_sequential)
        print(json.dumps(result))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    with workdir("fanout") as tmp, prefect_session(Path(tmp), warm_up=args.out is None) as session:
        results = measure(sizes, args.concurrency, args.latency)
    write_out(results, args.out, warm=session.warm)


if __name__ == "__main__":
    main()
