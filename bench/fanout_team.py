"""Fan-out on PostgreSQL beside SQLite: N environments deployed at once by one parent flow
(bench/fanout.py), against a Prefect server on SQLite and against one on the project's own
PostgreSQL, for N = 1, 4, 16, 32, through the real engine on the local cloud (issue 21, point 6).

On PostgreSQL everything is as `flows/run.py server start --database postgres` sets it up: the
project's PostgreSQL (stackflow.postgres), Prefect's server on it with basic auth on, the Pulumi
state (the CLI's postgres:// backend) and stackflow's records on the same server, one passphrase.
On SQLite: the one-person default (Prefect on SQLite, a file backend in the state folder).

Each measurement starts from nothing and leaves nothing: a fresh state folder, local cloud (its
MariaDB servers), Prefect server (and PostgreSQL), started here, stopped and removed after it;
environment names carry a tag of their own (fan<tag>-01 ...). The latencies are bench/compare.py's
(AWS's proportions, scaled down; every environment has a NAT gateway).

Per N and database: the wall time of the whole `fanout.py` process; ideal = max(the critical path
of the injected latencies, the CPU seconds every process used / the cores); wall / ideal; the
Prefect client's back-offs on 503/429; peak memory of the Prefect server, the flow process, its CLI
processes, PostgreSQL and the local cloud; CPU by process kind; and the flow process's own profile
(bench/cpuprofile.py). CPU and memory are read from /proc (bench/proctree.py says how).

    .venv/bin/python bench/fanout_team.py                        # the full run, into results.json
    .venv/bin/python bench/fanout_team.py --sizes 1,2 --out FILE # a smoke run, written to FILE only
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchkit import LOGS, PYTHON, REGION, ROOT, median, merge_results, run_metadata, say, workdir
from compare import DEPLOY_LATENCY_S, ENVIRONMENT
from critical import critical_path_s
from fanout_report import KEY, TARGET, summary_row, text_table
from proctree import PERIOD_S, ProcessTrees, Tree, cloud_kind, flow_kind, one_kind
from sessions import Session, bench_project

from stackflow.backends import open_blobs
from stackflow.localcloud.paths import cloud_root
from stackflow.localcloud.server import ensure_cloud, stop_cloud
from stackflow.localprefect import auth_string, start_prefect_server, stop_prefect_server
from stackflow.postgres import create_database, ensure_postgres, stop_postgres
from stackflow.postgres.urls import (
    PREFECT_DATABASE,
    PULUMI_DATABASE,
    RECORDS_DATABASE,
    prefect_database_url,
    pulumi_backend_url,
)
from stackflow.processes import free_port
from stackflow.pulumi_cli import find_cli
from stackflow.state import StateLayout

SIZES = (1, 4, 16, 32)
DATABASES = ("sqlite", "postgres")
RUN_TIMEOUT_S = 3600  # one fan-out; a hung one is killed (its process group) and reported
MEMORY_HEADROOM = 0.8  # a size is skipped when its projected memory exceeds this of MemAvailable


@dataclass
class Servers:
    """What one measurement runs on: the session (project, cloud, Prefect), the process trees
    to watch, the flow process's environment and the Pulumi backend it deploys to."""

    session: Session
    trees: dict[str, Tree]
    env: dict[str, str]
    backend_url: str


@contextlib.contextmanager
def servers(folder: Path, database: str) -> Iterator[Servers]:
    """Start, for one measurement, PostgreSQL (for "postgres"), a Prefect server on the database,
    and a local cloud; stop them all (and the cloud's MariaDB servers) and remove their folders."""
    with contextlib.ExitStack() as stack:
        project = bench_project(folder / "project")
        state = folder / "state"
        extra: dict[str, str] = {}
        trees: dict[str, Tree] = {}
        database_url = auth = None
        backend = f"file://{StateLayout(state).file_backend('local')}"
        started = time.monotonic()
        if database == "postgres":
            # its own folder right under /tmp: the `postgres` OS user must pass through its parents
            pg_dir = Path(tempfile.mkdtemp(prefix="stackflow-bench-pg-"))
            stack.callback(shutil.rmtree, pg_dir, ignore_errors=True)
            stack.callback(stop_postgres, pg_dir)
            pg = ensure_postgres(pg_dir)
            for name in (PREFECT_DATABASE, PULUMI_DATABASE, RECORDS_DATABASE):
                create_database(pg, name)
            database_url = prefect_database_url(pg)
            backend = pulumi_backend_url(pg)  # the records: the `stackflow` database beside it
            open_backend(backend, folder / "backend-init")
            auth = auth_string(folder / "prefect-server")
            extra = {
                "STACKFLOW_BACKEND_URL": backend,
                "STACKFLOW_STATE_PASSPHRASE": f"bench-{secrets.token_hex(12)}",
                "PREFECT_API_AUTH_STRING": auth,
            }
            trees["postgres"] = Tree(pg.pid, one_kind("PostgreSQL"), "PostgreSQL")
        prefect = start_prefect_server(
            folder / "prefect-server", free_port(), ui=False, database_url=database_url, auth=auth
        )
        stack.callback(stop_prefect_server, prefect.pid)
        trees["prefect"] = Tree(prefect.pid, one_kind("Prefect server"), "Prefect server")
        root = cloud_root(folder / "cloud-state")
        cloud = ensure_cloud(root, free_port(), region=REGION, say=lambda _line: None)
        stack.callback(stop_cloud, root)
        trees["cloud"] = Tree(cloud.pid, cloud_kind, "local cloud server (moto)")
        say(f"{database}: servers ready after {time.monotonic() - started:.1f}s")
        s = Session(
            folder,
            prefect.api_url,
            prefect.pid,
            cloud.url,
            cloud.root,
            cloud.port,
            cloud.pid,
            project,
        )
        yield Servers(s, trees, s.env(state, **extra), backend)


def open_backend(backend_url: str, folder: Path) -> None:
    """Have the Pulumi CLI open a new backend once (it creates its table), as a team's first
    deploy ever did: `pulumi` processes opening a brand-new PostgreSQL backend at the same moment
    race on its CREATE TABLE, and all but one fail ("failed to create table pulumi_state: pq:
    duplicate key value violates unique constraint", not retried): found by this benchmark at
    N = 2, a first-use failure, not what N environments at once cost."""
    cli = find_cli()
    if cli is None:
        raise RuntimeError("no Pulumi CLI: run `bash scripts/setup.sh` first")
    home = folder / "home"
    home.mkdir(parents=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    env |= {"PULUMI_BACKEND_URL": backend_url, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    subprocess.run(
        [str(cli), "stack", "ls", "--all"],
        cwd=home,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


def resource_graph(backend_url: str, environment: str) -> dict[str, list[dict[str, Any]]]:
    """Each of the environment's stacks' resources (type, dependencies) as its checkpoint in the
    backend records them: what `benchkit.critical_path_s` reads."""
    prefix = ".pulumi/stacks/"
    blobs = open_blobs(backend_url)
    try:
        found: dict[str, list[dict[str, Any]]] = {}
        for key in blobs.names(prefix):
            project, _, name = key[len(prefix) :].partition("/")
            if name not in (f"{environment}.json", f"{environment}.json.gz"):
                continue
            blob = blobs.latest([key])
            data = blob.data if blob is not None else b"{}"
            data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
            latest = json.loads(data).get("checkpoint", {}).get("latest") or {}
            found[project.removeprefix("stackflow-")] = [
                {
                    "urn": r["urn"],
                    "type": r["type"],
                    "custom": bool(r.get("custom")),
                    "dependencies": list(r.get("dependencies") or []),
                }
                for r in latest.get("resources") or []
            ]
        return found
    finally:
        blobs.close()


def fan_out(
    servers_: Servers, names: list[str], folder: Path, log: Path, profile: bool
) -> dict[str, Any]:
    """Run bench/fanout.py on the names (all at once), watching every process tree."""
    out = folder / "fanout.json"
    argv = [PYTHON, "bench/fanout.py", *names, "--concurrency", str(len(names))]
    argv += ["--out", str(out), *(["--profile"] if profile else [])]
    with log.open("w") as handle, ProcessTrees(servers_.trees) as trees:
        started = time.perf_counter()
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=servers_.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its group: a hung run is ended whole, and only it
        )
        trees.add("flow", Tree(process.pid, flow_kind, "flow tree: not seen by the sampler"))
        timer = threading.Timer(RUN_TIMEOUT_S, _end_group, (process.pid,))
        timer.start()
        try:
            _pid, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - started
        finally:
            timer.cancel()
            _end_group(process.pid)  # what it left behind (nothing, when it ends well)
        trees.set_total("flow", usage.ru_utime + usage.ru_stime)
    code = os.waitstatus_to_exitcode(status)
    found: dict[str, Any] = json.loads(out.read_text()) if code == 0 and out.exists() else {}
    return {"wall_s": wall, "exit": code, "fanout": found, "trees": trees.report()}


def _end_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def measure(database: str, n: int, folder: Path, profile: bool) -> dict[str, Any]:
    """One fan-out of `n` environments on `database`, from fresh servers; its row."""
    tag = secrets.token_hex(2)
    names = [f"fan{tag}-{i:02d}" for i in range(1, n + 1)]
    log = LOGS / f"fanout-team-{database}-{n:02d}.log"
    with servers(folder, database) as s:
        s.session.template("dev", **ENVIRONMENT)
        s.session.set_latency(DEPLOY_LATENCY_S)
        say(f"{database}, N = {n}: fanout.py {names[0]} .. {names[-1]} (log {log})")
        run = fan_out(s, names, folder, log, profile)
        graph = resource_graph(s.backend_url, names[0])
    critical = critical_path_s(graph, DEPLOY_LATENCY_S)["environment"] if graph else None
    row = summary_row(database, n, names, run, critical, len(os.sched_getaffinity(0)))
    if run["exit"] != 0:
        row["error"] = f"fanout.py exit {run['exit']}: " + log.read_text(errors="replace")[-1500:]
    stacks = run["fanout"].get("stacks", {})
    row["stack_s_median"] = {
        stack: round(median([d[stack] for d in stacks.values() if stack in d]), 2)
        for stack in sorted({k for d in stacks.values() for k in d})
    }
    say(
        f"{database}, N = {n}: wall {row['wall_s']}s, ideal {row['ideal_s']}s "
        f"({row['ideal_bound']}), wall/ideal {row['wall_over_ideal']}, back-offs "
        f"{row['client_backoffs']} ({row['client_backoff_s']}s)"
    )
    return row


def meminfo_mb(field: str) -> float:
    """A line of /proc/meminfo (MemTotal, MemAvailable) in MiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def too_big(previous: dict[str, Any] | None, n: int) -> str | None:
    """Why `n` environments would not fit in memory, projected from the last size measured on
    the same database (everything but the Prefect server grows with N), or None."""
    if previous is None:
        return None
    peaks = previous["peak_rss_mb"]
    growing = sum(v or 0 for k, v in peaks.items() if k not in ("prefect_server", "flow_process"))
    need = growing / previous["environments"] * n + (peaks.get("prefect_server") or 0)
    available = meminfo_mb("MemAvailable")
    if need <= MEMORY_HEADROOM * available:
        return None
    return (
        f"skipped: {n} environments would need about {need:.0f} MiB (projected from N = "
        f"{previous['environments']}), more than {MEMORY_HEADROOM:.0%} of the "
        f"{available:.0f} MiB available"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="N, comma-separated")
    parser.add_argument("--databases", default=",".join(DATABASES), help="sqlite,postgres")
    parser.add_argument("--out", type=Path, help="write here instead of bench/results.json")
    parser.add_argument("--no-profile", action="store_true", help="skip the flow process's profile")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    databases = [d.strip() for d in args.databases.split(",") if d.strip()]
    if set(databases) - set(DATABASES):
        parser.error(f"--databases: {', '.join(DATABASES)}")
    LOGS.mkdir(exist_ok=True)
    started, load_before = time.monotonic(), round(os.getloadavg()[0], 2)
    rows: list[dict[str, Any]] = []
    previous: dict[str, dict[str, Any]] = {}  # the last good row of each database
    # sizes in increasing order; at each size both databases, which one first alternating, so
    # the machine's drift hits both
    for i, n in enumerate(sorted(sizes)):
        for database in databases if i % 2 == 0 else databases[::-1]:
            reason = too_big(previous.get(database), n)
            if reason is not None:
                say(f"{database}, N = {n}: {reason}")
                rows.append({"database": database, "environments": n, "ok": False, "error": reason})
                continue
            with workdir(f"fanout-{database}-{n}") as tmp:
                try:
                    row = measure(database, n, Path(tmp), profile=not args.no_profile)
                except Exception as exc:  # a server that would not start: say so, go on
                    row = {"database": database, "environments": n, "ok": False}
                    row["error"] = f"{type(exc).__name__}: {exc}"[:1500]
                    say(f"{database}, N = {n}: {row['error']}")
            rows.append(row)
            if row.get("ok"):
                previous[database] = row
    rows.sort(key=lambda r: (databases.index(r["database"]), r["environments"]))
    command = " ".join([".venv/bin/python bench/fanout_team.py", *(argv or sys.argv[1:])])
    section = {
        **run_metadata(),  # first: its `target` (the local cloud) gives way to the issue's
        "title": "fan-out: N environments at once from one parent flow, Prefect on SQLite "
        "beside Prefect on PostgreSQL (team mode), real engine on the local cloud",
        "target": TARGET,
        "sizes": sorted(sizes),
        "latency_s": DEPLOY_LATENCY_S,
        "environment_files": {"environments/templates/dev.toml": ENVIRONMENT},
        "sampling_period_s": PERIOD_S,
        "runs": rows,
        "command": command,
        "bench_wall_s": round(time.monotonic() - started, 1),
        "load_average_1m_at_start": load_before,
        "memory_total_mb": round(meminfo_mb("MemTotal")),
    }
    if args.out is not None:
        args.out.write_text(json.dumps(section, indent=2) + "\n")
    else:
        merge_results({KEY: section})
    print(text_table(section))
    print(f"written to {args.out or 'bench/results.json'} (key {KEY!r})")
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    raise SystemExit(main())
