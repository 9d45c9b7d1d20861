"""Fan-out: several environments deployed at once by one parent flow, through the real engine.

The parent flow maps a task over the environment names on a `ThreadPoolTaskRunner`; each task runs
the real `deploy` flow (a subflow with its own stack tasks, concurrency slots, fingerprints,
migrations and verification), so the environments' stacks deploy at the same time, each through
its own `pulumi` process on the local cloud. The plain Automation API script deploys the same
number of environments one after another (bench/compare.py runs both).

Settings (state folder, local cloud, Prefect server) come from the environment of the caller.

    .venv/bin/python bench/fanout.py ours-b1 ours-b2 [--concurrency 8] [--out FILE] [--profile]

--profile (with --out) adds where this process's own CPU went, by Python function and thread
(bench/cpuprofile.py: CPU-weighted stack samples of every thread), up to its exit.
"""

from __future__ import annotations

import argparse
import atexit
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import prefect.client.base as client_base
from cpuprofile import CpuProfile

ROOT = Path(__file__).resolve().parents[1]

CONCURRENCY = 8


class _Retries:
    """Back-off sleeps of Prefect's API clients in this process (503/429 answers), counted."""

    sleeps = 0
    seconds = 0.0


class _CountingTime:
    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        _Retries.sleeps += 1
        _Retries.seconds += seconds
        time.sleep(seconds)


class _CountingAnyio:
    def __getattr__(self, name: str) -> Any:
        import anyio

        return getattr(anyio, name)

    async def sleep(self, seconds: float) -> None:
        import anyio

        _Retries.sleeps += 1
        _Retries.seconds += seconds
        await anyio.sleep(seconds)


def count_client_retries() -> None:
    """Count the sync and async clients' retry sleeps (measurement only; behaviour unchanged):
    a Prefect server on SQLite answers 503 when writes collide, and the client then sleeps."""
    setattr(client_base, "time", _CountingTime())  # noqa: B010 (not a public attribute)
    setattr(client_base, "anyio", _CountingAnyio())  # noqa: B010 (not a public attribute)


def load_provider_modules() -> int:
    """Load the pulumi_aws submodules the programs use, before any flow runs; returns how many.

    pulumi_aws loads its submodules lazily (pulumi._utils' LazyLoader, on first attribute access),
    and that first load is not thread-safe: two deploy flows in one process whose programs first
    touch `aws.ec2` at the same moment fail with "module 'pulumi_aws.ec2' has no attribute 'Vpc'"
    (reproducible with four threads touching `pulumi_aws.ec2.Vpc` at once). Until stackflow loads
    them itself, the fan-out loads them here, single-threaded. Its time counts in the figures.
    """
    import pulumi_aws

    names = sorted(
        {
            match
            for source in (ROOT / "programs").glob("*.py")
            for match in re.findall(r"\baws\.([a-z0-9_]+)\.", source.read_text())
        }
    )
    for name in names:
        hasattr(getattr(pulumi_aws, name), "_stackflow_load")  # any attribute: loads the module
    return len(names)


def run_fanout(environments: Sequence[str], concurrency: int) -> list[dict[str, Any]]:
    """Deploy the environments from one parent flow, `concurrency` deploy flows at a time.

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


def add_profile(profile: CpuProfile, out: Path) -> None:
    """Stop the profile and add it to the figures in `out`."""
    result = json.loads(out.read_text()) if out.exists() else {}
    result["profile"] = profile.stop()
    out.write_text(json.dumps(result))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("environments", nargs="+")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--out", type=Path, help="write the figures here (JSON)")
    parser.add_argument(
        "--profile", action="store_true", help="also sample where this process's CPU goes"
    )
    args = parser.parse_args(argv)
    if args.profile and args.out is not None:
        # registered before Prefect registers its own exit handlers, so it runs after them: the
        # profile covers the queues Prefect drains at exit too
        atexit.register(add_profile, CpuProfile().start(), args.out)
    count_client_retries()
    load_provider_modules()
    started, cpu_started = time.perf_counter(), time.process_time()
    summaries = run_fanout(args.environments, args.concurrency)
    result = {
        "wall_s": round(time.perf_counter() - started, 3),
        # CPU of this process (all threads): the flows and the inline programs, not the CLIs
        "process_cpu_s": round(time.process_time() - cpu_started, 2),
        "engine_calls": sum(len(s["engine_calls"]) for s in summaries),
        "client_retry_sleeps": _Retries.sleeps,
        "client_retry_sleep_s": round(_Retries.seconds, 2),
        "stacks": {
            s["environment"]: {x["stack"]: x["duration_s"] for x in s["stacks"]} for s in summaries
        },
    }
    print(json.dumps(result))
    if args.out is not None:
        args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
