"""The baseline: the hand-written Automation API script users have today, with no Prefect.

For each environment, one after another, for each stack in graph order: build the spec with
`GRAPH.spec` from the upstream outputs, call the engine's `up` directly, parse the outputs, go on.
No retries, no fingerprints (every run calls the engine), no concurrency, no run records. It uses
the same simulated engine and latencies as the orchestrated runs it is compared with.
`refresh_sequential` does the same for a refresh: each stack's `refresh`, one after another.

    .venv/bin/python bench/sequential_baseline.py [--envs 1] [--latency '{"networking":2,...}']
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from benchkit import env_names, environ, stackflow_env, workdir
from pydantic import BaseModel

from stackflow.engine import Listener, Operation
from stackflow.engine.simulated import SimulatedEngine
from stackflow.graph import GRAPH, bare_spec, parse_outputs
from stackflow.settings import get_settings


def deploy_environment(environment: str) -> dict[str, BaseModel]:
    """Bring one environment's stacks up in order; settings come from STACKFLOW_* variables."""
    settings = get_settings(environment=environment)
    engine = SimulatedEngine(settings)
    outputs: dict[str, BaseModel] = {}
    for name in GRAPH.stacks:  # graph order; steps (migrate, verify) are not part of the script
        spec, _args = GRAPH.spec(name, settings, outputs)
        result = engine.run(Operation.UP, spec, Listener())
        outputs[name] = parse_outputs(GRAPH[name], result.outputs)
    return outputs


def refresh_environment(environment: str) -> None:
    """Refresh one environment's stacks in graph order, one at a time."""
    settings = get_settings(environment=environment)
    engine = SimulatedEngine(settings)
    for name in GRAPH.stacks:
        engine.run(Operation.REFRESH, bare_spec(settings, name), Listener())


def refresh_sequential(environments: Sequence[str]) -> float:
    """Refresh the environments' stacks one after another; wall seconds."""
    started = time.perf_counter()
    for environment in environments:
        refresh_environment(environment)
    return time.perf_counter() - started


def run_sequential(environments: Sequence[str]) -> float:
    """Deploy the environments one after another; wall seconds."""
    started = time.perf_counter()
    for environment in environments:
        deploy_environment(environment)
    return time.perf_counter() - started


def measure(state_dir: Path, latency_s: dict[str, float], environments: Sequence[str]) -> float:
    """Wall seconds of the baseline on a fresh state folder with these latencies."""
    with environ(stackflow_env(state_dir, latency_s)):
        return run_sequential(environments)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=1, help="environments, deployed in turn")
    parser.add_argument(
        "--latency",
        default='{"networking": 2, "database": 4, "app": 3}',
        help="simulated seconds per stack (JSON)",
    )
    args = parser.parse_args(argv)
    latency = json.loads(args.latency)
    with workdir("sequential") as tmp:
        wall = measure(Path(tmp) / "state", latency, env_names(args.envs, "seq"))
    print(
        f"sequential baseline (simulated engine, no Prefect): {args.envs} environment(s), "
        f"latencies {latency}: {wall:.2f}s wall (pid {os.getpid()})"
    )


if __name__ == "__main__":
    main()
