"""Shared pieces of the benchmarks: settings for a run, a Prefect server, the results file, the table.

Every benchmark drives the **simulated** engine (Pulumi's mock runtime, nothing is deployed): its
latency knob (`STACKFLOW_SIM_LATENCY_S`) stands in for the time AWS takes, so the figures measure
what the orchestration adds around that time, not AWS itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from stackflow.localprefect import drain_prefect_queues, free_port

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "bench" / "results.json"
PYTHON = sys.executable
PASSPHRASE = "bench-passphrase"  # the simulated state of a throwaway folder; not a real secret

TITLE = "stackflow benchmarks - simulated engine (Pulumi mock runtime; nothing deployed to AWS)"
# key -> (comparison, bound): the targets of issue 8. Figures without one are context.
TARGETS: dict[str, tuple[str, float]] = {
    "critical_path_ratio": ("<=", 1.10),
    "noop_engine_calls": ("==", 0),
    "noop_wall_s": ("<=", 3.0),
    "noop_cli_wall_s": ("<=", 3.0),
    "fanout_ratio": ("<=", 1.2),
    "fanout_ratio_max": ("<=", 1.2),
    "task_overhead_ms_median": ("<=", 30.0),
    "migrations_noop_ms": ("<=", 50.0),
}


# --- settings for a run ---------------------------------------------------------------------------


def stackflow_env(
    state_dir: Path, latency_s: Mapping[str, float], *, mysql: str = "off"
) -> dict[str, str]:
    """STACKFLOW_* variables for a benchmark run: its own state folder, the simulated engine.

    `STACKFLOW_SIM_MYSQL=off`: migrations are measured on their own (bench/migrations.py).
    """
    return {
        "STACKFLOW_STATE_DIR": str(state_dir),
        "STACKFLOW_ENGINE": "simulated",
        "STACKFLOW_STATE_PASSPHRASE": PASSPHRASE,
        "STACKFLOW_SIM_MYSQL": mysql,
        "STACKFLOW_SIM_LATENCY_S": json.dumps(dict(latency_s)),
        "STACKFLOW_RETRY_DELAY_S": "0",
    }


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the block (settings are read from them at flow time)."""
    previous = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def env_names(n: int, prefix: str = "bench") -> list[str]:
    """`bench-01`, `bench-02`, ...: valid environment names of the dev kind."""
    return [f"{prefix}-{i:02d}" for i in range(1, n + 1)]


# --- a Prefect server -----------------------------------------------------------------------------


@dataclass
class Session:
    """The Prefect server the benchmarks talk to, and whether it was warmed up."""

    api_url: str
    started_here: bool
    warm: bool = False
    server_pid: int | None = None


@contextlib.contextmanager
def prefect_session(workdir: Path, *, warm_up: bool = True) -> Iterator[Session]:
    """Use PREFECT_API_URL if set, else start a Prefect server (SQLite, no UI) and stop it after.

    Must run before `prefect` is imported in this process: the client reads its settings then.
    """
    from stackflow.localprefect import start_prefect_server, stop_prefect_server

    existing = os.environ.get("PREFECT_API_URL")
    client_home = workdir / "prefect-client"
    client_home.mkdir(parents=True, exist_ok=True)
    if existing:
        session = Session(existing, started_here=False)
        with environ({"PREFECT_HOME": os.environ.get("PREFECT_HOME", str(client_home))}):
            if warm_up:
                session.warm = warm_up_server(workdir)
            yield session
        return
    say(f"starting a Prefect server in {workdir} ...")
    started = time.monotonic()
    server = start_prefect_server(workdir / "prefect-server", free_port(), ui=False)
    say(f"Prefect server {server.url} healthy after {time.monotonic() - started:.1f}s")
    try:
        with environ({"PREFECT_API_URL": server.api_url, "PREFECT_HOME": str(client_home)}):
            session = Session(server.api_url, started_here=True, server_pid=server.pid)
            if warm_up:
                session.warm = warm_up_server(workdir)
            yield session
            drain_prefect_queues()
    finally:
        stop_prefect_server(server.pid)


def warm_up_server(workdir: Path) -> bool:
    """One zero-latency deploy in a child process, so the server has created its tables, the
    `deploy` flow and the concurrency-limit rows before anything is timed."""
    state = workdir / "warm-up-state"
    code = "from flows.pipeline import deploy; deploy(environment='bench-warm')"
    env = {**os.environ, **stackflow_env(state, {"*": 0.0})}
    started = time.monotonic()
    done = subprocess.run(
        [PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        say(f"warm-up flow failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        return False
    say(f"warm-up flow done in {time.monotonic() - started:.1f}s")
    return True


# --- measuring ------------------------------------------------------------------------------------


@dataclass
class ClientRetries:
    """Back-off sleeps of Prefect's sync API client in this process (a 503, 429, ... answer)."""

    sleeps: int = 0
    seconds: float = 0.0


CLIENT_RETRIES = ClientRetries()


class _CountingTime:
    """The `time` module, with a `sleep` that also counts into CLIENT_RETRIES."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        CLIENT_RETRIES.sleeps += 1
        CLIENT_RETRIES.seconds += seconds
        time.sleep(seconds)


class _CountingAnyio:
    """The `anyio` module, with a `sleep` that also counts (the async client's retry sleeps)."""

    def __getattr__(self, name: str) -> Any:
        import anyio

        return getattr(anyio, name)

    async def sleep(self, seconds: float) -> None:
        import anyio

        CLIENT_RETRIES.sleeps += 1
        CLIENT_RETRIES.seconds += seconds
        await anyio.sleep(seconds)


def count_client_retries() -> ClientRetries:
    """Count the client's retry sleeps from now on (measurement only; behaviour unchanged).

    Both clients: the sync one (stack slots, flow and task runs) and the async one (subflow runs,
    logs and events), which sleeps with anyio.

    A Prefect server on SQLite answers 503 when a write collides with another ("database is
    locked"); the client then sleeps ~2 s (jittered) before trying again. Stack slots are taken with
    the sync client, so these sleeps land on the pipeline's critical path; counting them explains
    a slow run. The client's module-level `time` is swapped for one whose `sleep` also counts.
    """
    import prefect.client.base as client_base

    if not isinstance(getattr(client_base, "time", None), _CountingTime):
        setattr(client_base, "time", _CountingTime())  # noqa: B010 (not a public attribute)
    if not isinstance(getattr(client_base, "anyio", None), _CountingAnyio):
        setattr(client_base, "anyio", _CountingAnyio())  # noqa: B010 (not a public attribute)
    return CLIENT_RETRIES


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))])


def peak_rss_mb() -> dict[str, float]:
    """Peak resident memory of this process and of its waited-for children (MiB, Linux KiB units)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"self": round(own, 1), "children": round(children, 1)}


def process_group_rss_mb(pgid: int) -> float | None:
    """Current RSS of every process in a process group (the Prefect server), from /proc."""
    total_kb = 0
    found = False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # fields after the command: state, ppid, pgrp, ...
                continue
            status = (stat.parent / "status").read_text()
        except (OSError, IndexError, ValueError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total_kb += int(line.split()[1])
                found = True
    return round(total_kb / 1024, 1) if found else None


def run_cli(
    args: Sequence[str], env: Mapping[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run `python flows/run.py ...` end to end; (wall seconds, the finished process)."""
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, str(ROOT / "flows" / "run.py"), *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - started, done


def run_script(script: str, out: Path, log: Path, extra: Sequence[str] = ()) -> dict[str, Any]:
    """Run `bench/<script>` in a child process that writes its results to `out`; output to `log`."""
    started = time.monotonic()
    with log.open("w") as handle:
        done = subprocess.run(
            [PYTHON, str(ROOT / "bench" / script), "--out", str(out), *extra],
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0 or not out.exists():
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"bench/{script} failed (exit {done.returncode}); log {log}:\n{tail}")
    say(f"bench/{script} done in {time.monotonic() - started:.0f}s")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --- results --------------------------------------------------------------------------------------


def run_metadata(*, warm: bool) -> dict[str, Any]:
    """What every run records next to its figures."""
    return {
        "simulated": True,
        "engine": "simulated (Pulumi mock runtime; latency knob stands in for AWS)",
        "versions": {
            "prefect": version("prefect"),
            "pulumi": version("pulumi"),
            "pulumi-aws": version("pulumi-aws"),
            "python": platform.python_version(),
        },
        "cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine skews figures
        "prefect_server_warm": warm,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def merge_results(updates: Mapping[str, Any], path: Path = RESULTS) -> dict[str, Any]:
    """Read-modify-write the results file under a lock, keeping keys other scripts wrote."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        data.update(updates)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
    return data


def write_out(results: Mapping[str, Any], out: Path | None, *, warm: bool) -> None:
    """`--out FILE`: hand results to run_all; else merge them into bench/results.json and print."""
    if out is not None:
        out.write_text(json.dumps(results, indent=2, sort_keys=True))
        return
    merge_results({**results, **run_metadata(warm=warm)})
    print(table(results))
    print(f"\nmerged into {RESULTS.relative_to(ROOT)}")


def workdir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=f"stackflow-bench-{prefix}-")


# --- the table ------------------------------------------------------------------------------------


def _verdict(key: str, value: Any) -> str:
    if key not in TARGETS or value is None:
        return ""
    op, bound = TARGETS[key]
    ok = value <= bound if op == "<=" else value == bound
    return f"{op} {bound:g}  {'pass' if ok else 'MISS'}"


def _fmt(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


# The table's order: the figures first, each followed by what explains it.
ORDER = (
    "critical_path_ratio",
    "critical_path_deploy_wall_s",
    "critical_path_s",
    "critical_path_client_retry_sleeps",
    "critical_path_client_retry_sleep_s",
    "sequential_speedup",
    "sequential_baseline_wall_s",
    "sequential_speedup_refresh",
    "refresh_wall_s",
    "refresh_sequential_wall_s",
    "refresh_critical_path_s",
    "sequential_speedup_fanout",
    "noop_engine_calls",
    "noop_wall_s",
    "noop_cli_engine_calls",
    "noop_cli_wall_s",
    "fanout",
    "fanout_ratio_max",
    "task_overhead_ms_median",
    "task_overhead_ms_p95",
    "task_overhead_direct_ms_median",
    "task_overhead_trivial_ms_median",
    "task_overhead_first_ms",
    "task_body_skip_path_ms_median",
    "migrations_apply_200_s",
    "migrations_noop_ms",
    "cli_help_s",
    "prefect_server_rss_mb",
    "bench_wall_s",
)
# Run metadata, printed apart from the figures.
METADATA = {
    "simulated",
    "cores",
    "load_average_1m",
    "load_average_1m_at_start",
    "prefect_server_warm",
    "quick",
    "timestamp",
}


def rows(results: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(metric, value, target and verdict) for every scalar figure, fan-out expanded per N."""
    out: list[tuple[str, str, str]] = []
    rank = {key: i for i, key in enumerate(ORDER)}
    ordered = sorted(
        ((k, v) for k, v in results.items() if k not in METADATA),
        key=lambda item: rank.get(item[0], len(ORDER)),
    )
    for key, value in ordered:
        if key == "fanout" and isinstance(value, Mapping):
            runs = value.get("runs", {})
            for n, entry in sorted(
                runs.items(), key=lambda item: int(item[0])
            ):  # JSON sorts "16" < "4"
                ratio = entry["ratio"]
                out.append(
                    (
                        f"fanout N={n} (concurrency {value['concurrency']}): wall/ideal",
                        f"{ratio:.3f} ({entry['wall_s']:.1f}s / {entry['ideal_s']:.1f}s)",
                        _verdict("fanout_ratio", ratio),
                    )
                )
                out.append((f"fanout N={n}: peak RSS MiB", f"{entry['peak_rss_mb']:.0f}", ""))
                out.append(
                    (
                        f"fanout N={n}: client back-offs (503)",
                        f"{entry['client_retry_sleeps']} ({entry['client_retry_sleep_s']:.1f}s)",
                        "",
                    )
                )
            continue
        if isinstance(value, bool | int | float) or value is None:
            out.append((key, _fmt(value), _verdict(key, value)))
    return out


def table(results: Mapping[str, Any]) -> str:
    body = rows(results)
    width = max([len(r[0]) for r in body] + [6])
    vwidth = max([len(r[1]) for r in body] + [5])
    lines = [
        TITLE,
        f"{'metric':<{width}}  {'value':>{vwidth}}  target",
        "-" * (width + vwidth + 20),
    ]
    lines += [f"{m:<{width}}  {v:>{vwidth}}  {t}" for m, v, t in body]
    return "\n".join(lines)


def markdown_table(results: Mapping[str, Any]) -> str:
    """The same rows as a Markdown table (for the README)."""
    lines = ["| metric (simulated engine) | value | target |", "|---|---|---|"]
    lines += [f"| {m} | {v} | {t} |" for m, v, t in rows(results)]
    return "\n".join(lines)
