"""Pipeline benchmarks: the deploy flow against its critical path and against a plain script.

All on the **simulated** engine; its latency knob stands in for the time AWS takes per stack.

- `critical_path_ratio`: wall time of a first deploy (every stack created) whose stacks take the
  latencies `--latency`, divided by `GRAPH.critical_path(latencies)`. Median of `--repeat` runs,
  each on a fresh state folder, after one untimed zero-latency deploy and script run in the same
  process (so neither side pays the one-time imports of pulumi_aws and Prefect).
- `sequential_speedup`: the hand-written script (bench/sequential_baseline.py: the same engine
  called stack by stack, no Prefect) wall time / ours, same latencies, one environment. The deploy
  graph is a chain (networking -> database -> migrate -> app), so there is nothing to overlap:
  expect a little below 1.0 (what Prefect adds per flow and task).
- `sequential_speedup_refresh`: the same for a refresh, where the graph does have parallel work:
  the script refreshes the stacks in turn, the `refresh` flow runs them all at once.
- `noop_engine_calls`, `noop_wall_s`: a second deploy with nothing changed, the flow called
  in-process (median of the repeats); `noop_cli_wall_s`: the same through `python flows/run.py up`,
  end to end in a new process (interpreter start, imports, flow), with PREFECT_API_URL set
  (median of 3).
- `critical_path_client_retry_sleeps`: how often Prefect's API client backed off (a 503 from the
  server on SQLite, "database is locked") during the timed deploys, and for how long in total.

Migrations are off (`STACKFLOW_SIM_MYSQL=off`); bench/migrations.py measures them.

    .venv/bin/python bench/pipeline.py [--repeat 3] [--latency '{"networking": 2.5, ...}']
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchkit import (
    count_client_retries,
    environ,
    median,
    prefect_session,
    run_cli,
    say,
    stackflow_env,
    workdir,
    write_out,
)
from sequential_baseline import refresh_sequential, run_sequential

from stackflow.graph import GRAPH

# Seconds per stack (simulated), in the proportions AWS shows: RDS slowest, then ECS, then the VPC.
LATENCY_S = {"networking": 2.5, "database": 5.0, "app": 3.5}
ENV = "bench-cp"
CLI_RUNS = 3  # `python flows/run.py up` no-op runs (median)


def _flow(name: str, environment: str) -> tuple[float, dict[str, Any]]:
    import flows.pipeline as pipeline

    started = time.perf_counter()
    summary: dict[str, Any] = getattr(pipeline, name)(environment=environment)
    wall = time.perf_counter() - started
    if summary.get("failed"):
        raise RuntimeError(f"{name} of {environment} failed: {summary['failed']}")
    return wall, summary


def measure(tmp: Path, latency_s: Mapping[str, float], repeat: int = 3) -> dict[str, Any]:
    """Every figure of this script; PREFECT_API_URL must point at a running server."""
    default = latency_s.get("*", 0.0)  # the knob's "*" applies to stacks not named
    latency_s = {stack: float(latency_s.get(stack, default)) for stack in GRAPH.stacks}
    critical = GRAPH.critical_path(latency_s)
    refresh_critical = max(latency_s.get(s, 0.0) for s in GRAPH.stacks)
    ours: list[float] = []
    script: list[float] = []
    noop_walls: list[float] = []
    noop_calls: list[int] = []
    refresh_ours: list[float] = []
    refresh_script: list[float] = []
    with environ(stackflow_env(tmp / "warm-up", {"*": 0.0})):  # imports and first calls, untimed
        _flow("deploy", "bench-warm")
        _flow("refresh", "bench-warm")
        run_sequential(["bench-warm-seq"])
        refresh_sequential(["bench-warm-seq"])
    retries = count_client_retries()
    retry_sleeps, retry_s = 0, 0.0
    for i in range(repeat):  # alternate ours and the script so drift in the machine hits both
        with environ(stackflow_env(tmp / f"run-{i}", latency_s)):
            before = (retries.sleeps, retries.seconds)
            wall, _ = _flow("deploy", ENV)
            retry_sleeps += retries.sleeps - before[0]
            retry_s += retries.seconds - before[1]
            ours.append(wall)
            script.append(run_sequential(["bench-seq"]))
            again, summary = _flow("deploy", ENV)
            noop_walls.append(again)
            noop_calls.append(len(summary["engine_calls"]))
            refresh_ours.append(_flow("refresh", ENV)[0])
            refresh_script.append(refresh_sequential(["bench-seq"]))
        say(
            f"repeat {i + 1}: deploy ours {wall:.2f}s, script {script[-1]:.2f}s "
            f"(critical path {critical:.1f}s); no-op {again:.2f}s; refresh ours "
            f"{refresh_ours[-1]:.2f}s, script {refresh_script[-1]:.2f}s"
        )

    cli_walls: list[float] = []
    cli_calls: list[int] = []
    for _ in range(CLI_RUNS):
        wall, done = run_cli(["up", "--env", ENV], stackflow_env(tmp / "run-0", latency_s))
        if done.returncode != 0:
            raise RuntimeError(
                f"CLI no-op deploy failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
        found = re.search(r"engine operations: (\d+)", done.stdout)
        if found is None:
            raise RuntimeError(f"CLI output has no engine operation count:\n{done.stdout[-2000:]}")
        cli_walls.append(wall)
        cli_calls.append(int(found.group(1)))

    ours_s = median(ours)
    return {
        "critical_path_latencies_s": dict(latency_s),
        "critical_path_s": critical,
        "critical_path_deploy_wall_s": round(ours_s, 3),
        "critical_path_deploy_walls_s": [round(w, 3) for w in ours],
        "critical_path_ratio": round(ours_s / critical, 3),
        "critical_path_client_retry_sleeps": retry_sleeps,
        "critical_path_client_retry_sleep_s": round(retry_s, 2),
        "sequential_baseline_wall_s": round(median(script), 3),
        "sequential_speedup": round(median(script) / ours_s, 3),
        "refresh_critical_path_s": refresh_critical,
        "refresh_wall_s": round(median(refresh_ours), 3),
        "refresh_sequential_wall_s": round(median(refresh_script), 3),
        "sequential_speedup_refresh": round(median(refresh_script) / median(refresh_ours), 3),
        "noop_engine_calls": max(noop_calls),
        "noop_wall_s": round(median(noop_walls), 3),
        "noop_cli_wall_s": round(median(cli_walls), 3),
        "noop_cli_engine_calls": max(cli_calls),
        "pipeline_repeats": repeat,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument(
        "--latency", default=json.dumps(LATENCY_S), help="simulated seconds per stack (JSON)"
    )
    parser.add_argument("--out", type=Path, help="write results here instead of bench/results.json")
    args = parser.parse_args(argv)
    with (
        workdir("pipeline") as tmp,
        prefect_session(Path(tmp), warm_up=args.out is None) as session,
    ):
        results = measure(Path(tmp), json.loads(args.latency), args.repeat)
    write_out(results, args.out, warm=session.warm)


if __name__ == "__main__":
    main()
