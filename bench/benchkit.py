"""Shared pieces of the benchmarks: the servers a run needs, a project folder whose environment
files say what each benchmark environment deploys, this machine's settings for the processes it
measures, a /proc sampler for their memory, the critical path of the injected latencies, the
results file and its table.

Every pipeline figure comes from the **real engine** (the Pulumi CLI through the Automation API)
deploying to the **local cloud**: moto's AWS APIs on loopback behind the project's own provider
plugins, whose latency knobs stand in for the time AWS takes. Nothing reaches AWS, and no figure
here is an AWS figure.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from stackflow.localprefect import drain_prefect_queues
from stackflow.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
PYTHON = sys.executable
LOGS = Path(tempfile.gettempdir()) / "stackflow-bench-logs"  # kept after a run, for a failure
REGION = "eu-west-1"
TARGET = "local cloud"
TITLE = (
    "stackflow benchmarks - real Pulumi engine on the local cloud (moto on loopback, not AWS), "
    "each figure beside a plain Automation API script's"
)
SAMPLE_S = 0.1  # /proc sampling period of the process-tree sampler


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))])


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


def workdir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=f"stackflow-bench-{prefix}-")


# --- the project the benchmarks deploy: environment files, never variables ------------------------

KINDS = ("dev", "staging", "prod", "ephemeral")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))


def environment_toml(kind: str, sections: Mapping[str, Any]) -> str:
    """An environment file: its kind, the local cloud, the bench's region, then `sections`
    (top-level keys as values, sections as dicts; an empty section is left out)."""
    top: dict[str, Any] = {"kind": kind, "cloud": "local"}
    top |= {k: v for k, v in sections.items() if not isinstance(v, Mapping)}
    tables: dict[str, dict[str, Any]] = {"aws": {"region": REGION}}
    for name, values in sections.items():
        if isinstance(values, Mapping):
            tables[name] = {**tables.get(name, {}), **values}
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    for name, values in tables.items():
        if values:
            lines += [f"[{name}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]
    return "\n".join(lines) + "\n"


def bench_project(folder: Path) -> Path:
    """A project folder for the bench's runs, as tests/realenv.test_project makes one: the
    repository's stackflow.toml and migrations, and a template per kind (the local cloud, the
    bench's region), so any name (ours-a, plain-a, bench-task) deploys its kind's defaults.
    Session.template and Session.declare change what they deploy."""
    templates = folder / "environments" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        (templates / f"{kind}.toml").write_text(environment_toml(kind, {}))
    (folder / "stackflow.toml").write_text((ROOT / "stackflow.toml").read_text())
    if not (folder / "migrations").exists():
        (folder / "migrations").symlink_to(ROOT / "migrations")
    return folder


# --- the servers a run needs ----------------------------------------------------------------------


@dataclass
class Session:
    """A Prefect server and a local cloud server, both on free loopback ports, the project whose
    environment files say what the bench deploys, and this machine's settings every measured
    process gets (its own state folder comes on top)."""

    folder: Path
    prefect_api_url: str
    prefect_pid: int | None
    cloud_url: str
    cloud_root: Path
    cloud_port: int
    cloud_pid: int
    project: Path

    def template(self, kind: str, **sections: Any) -> Path:
        """What every environment of `kind` without a file of its own deploys, e.g.
        `template("dev", network={"nat_gateway": True})`."""
        path = self.project / "environments" / "templates" / f"{kind}.toml"
        path.write_text(environment_toml(kind, sections))
        return path

    def declare(self, environment: str, **sections: Any) -> Path:
        """Write (or rewrite) `environment`'s own file: what every later run of it deploys, e.g.
        `declare("ours-a", app={"desired_count": 2})`. Its kind follows the name."""
        from stackflow.settings import kind_of

        path = self.project / "environments" / f"{environment}.toml"
        path.write_text(environment_toml(kind_of(environment).value, sections))
        return path

    def env(self, state_dir: Path | None = None, **extra: str) -> dict[str, str]:
        """Environment of a measured process: the user's, minus any STACKFLOW_/PULUMI_/AWS_/
        PREFECT_ settings, plus the session's project and servers, a HOME of its own (the user's
        ~/.pulumi stays untouched) and the Pulumi CLI cache setup.sh filled. `extra` are more
        variables of this machine; what an environment deploys is its file's (`declare`)."""
        from stackflow.pulumi_cli import cache_root

        prefixes = ("STACKFLOW_", "PULUMI_", "AWS_", "PREFECT_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
        home = self.folder / "home"
        (home / ".pulumi").mkdir(parents=True, exist_ok=True)
        env.update(
            {
                "HOME": str(home),
                "STACKFLOW_CACHE_DIR": str(cache_root()),
                "STACKFLOW_PROJECT_DIR": str(self.project),
                "STACKFLOW_LOCALCLOUD_DIR": str(self.cloud_root),
                "STACKFLOW_LOCALCLOUD_PORT": str(self.cloud_port),
                "PREFECT_API_URL": self.prefect_api_url,
                "PREFECT_HOME": str(self.folder / "prefect-client"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if state_dir is not None:
            env["STACKFLOW_STATE_DIR"] = str(state_dir)
        env.update(extra)
        return env

    def set_latency(self, latency_s: Mapping[str, float]) -> None:
        """The local cloud's latency knobs, for every process that deploys on it."""
        from stackflow.localcloud.knobs import set_knobs

        set_knobs(self.cloud_url, {"latency_s": dict(latency_s)})


@contextlib.contextmanager
def session(folder: Path) -> Iterator[Session]:
    """Start a Prefect server (SQLite, no UI) and a local cloud server (with its data plane) on
    free ports under `folder`, make the bench's project there (see `bench_project`), and stop
    both servers (and the cloud's databases) afterwards.

    The cloud is started here, not by a measured process, so it is no descendant of one and its
    memory is never counted as theirs. PREFECT_API_URL in the environment is ignored: a fresh
    server keeps earlier runs' rows out of the figures.
    """
    from stackflow.localcloud.paths import cloud_root
    from stackflow.localcloud.server import ensure_cloud, stop_cloud
    from stackflow.localprefect import start_prefect_server, stop_prefect_server

    folder.mkdir(parents=True, exist_ok=True)
    project = bench_project(folder / "project")
    started = time.monotonic()
    prefect = start_prefect_server(folder / "prefect-server", free_port(), ui=False)
    say(f"Prefect server {prefect.url} healthy after {time.monotonic() - started:.1f}s")
    root = cloud_root(folder / "cloud-state")
    try:
        started = time.monotonic()
        cloud = ensure_cloud(root, free_port(), region=REGION, say=lambda _line: None)
        say(f"local cloud {cloud.url} ready after {time.monotonic() - started:.1f}s")
        try:
            yield Session(
                folder,
                prefect.api_url,
                prefect.pid,
                cloud.url,
                cloud.root,
                cloud.port,
                cloud.pid,
                project,
            )
        finally:
            stop_cloud(root)
    finally:
        drain_prefect_queues()
        stop_prefect_server(prefect.pid)


# --- measuring a process and its descendants ------------------------------------------------------


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process we may read."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)] = int(
                (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            )
        except (OSError, ValueError, IndexError):
            continue
    return parents


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB; (0, 0) if it is gone."""
    rss = hwm = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return rss, hwm


def process_kind(cmdline: str) -> str:
    """What a descendant of a measured process is, by its command line."""
    argv0 = os.path.basename(cmdline.split(" ", 1)[0]) if cmdline else ""
    if argv0 == "pulumi":
        return "pulumi CLI"
    if "stackflow.localcloud.plugin aws" in cmdline or "pulumi-resource-aws" in cmdline:
        return "aws plugin"
    if "stackflow.localcloud.plugin random" in cmdline or "pulumi-resource-random" in cmdline:
        return "random plugin"
    if argv0.startswith("pulumi-language"):
        return "language host"
    return "other"


@dataclass
class TreePeak:
    """Peak memory of a measured process and of its descendants (the CLI processes), from /proc.

    Attributes:
        root_mb: the process's own peak RSS (VmHWM).
        tree_mb: the largest sum of the descendants' RSS seen at one sample.
        largest_mb: the largest peak RSS (VmHWM) of one descendant.
        by_kind_mb: the largest peak RSS of one process of each kind (pulumi CLI, aws plugin...).
        most_processes: the most descendants alive at one sample.
        seen: how many processes of each kind were seen (a lower bound: one that lives less than
            SAMPLE_S may be missed).
        samples: how many samples were taken.
    """

    root_mb: float = 0.0
    tree_mb: float = 0.0
    largest_mb: float = 0.0
    by_kind_mb: dict[str, float] = field(default_factory=dict)
    most_processes: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    samples: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "process_peak_rss_mb": round(self.root_mb, 1),
            "cli_tree_peak_rss_mb": round(self.tree_mb, 1),
            "cli_largest_process_peak_rss_mb": round(self.largest_mb, 1),
            "cli_peak_rss_mb_by_kind": {k: round(v, 1) for k, v in sorted(self.by_kind_mb.items())},
            "cli_most_processes": self.most_processes,
            "cli_processes_seen": dict(sorted(self.seen.items())),
            "samples": self.samples,
        }


class TreeSampler:
    """Samples a process and its descendants every SAMPLE_S seconds from /proc, in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = TreePeak()
        self._kinds: dict[int, str] = {}  # kind of each process, from its command line once
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_S)

    def sample(self) -> None:
        children: dict[int, list[int]] = {}
        for pid, ppid in _parents().items():
            children.setdefault(ppid, []).append(pid)
        descendants: list[int] = []
        todo = list(children.get(self.pid, []))
        while todo:
            pid = todo.pop()
            descendants.append(pid)
            todo.extend(children.get(pid, []))
        _rss, hwm = _memory_kb(self.pid)
        peak = self.peak
        peak.samples += 1
        peak.root_mb = max(peak.root_mb, hwm / 1024)
        total = alive = 0
        for pid in descendants:
            rss, hwm = _memory_kb(pid)
            if not hwm:
                continue  # gone, or a zombie waiting to be reaped
            total += rss
            alive += 1
            kind = self._kinds.get(pid)
            if kind is None:
                kind = self._kinds[pid] = process_kind(_cmdline(pid))
                peak.seen[kind] = peak.seen.get(kind, 0) + 1
            peak.largest_mb = max(peak.largest_mb, hwm / 1024)
            peak.by_kind_mb[kind] = max(peak.by_kind_mb.get(kind, 0.0), hwm / 1024)
        peak.tree_mb = max(peak.tree_mb, total / 1024)
        peak.most_processes = max(peak.most_processes, alive)


@dataclass
class Run:
    """One measured process: wall time, exit code, its output's log, its memory."""

    argv: list[str]
    wall_s: float
    returncode: int
    log: Path
    memory: TreePeak
    cpu_s: float

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def check(self) -> Run:
        if self.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(self.argv)}` failed (exit {self.returncode}); log {self.log}:\n"
                f"{self.text()[-3000:]}"
            )
        return self


def run_measured(argv: Sequence[str], env: Mapping[str, str], log: Path) -> Run:
    """Run a command to the end, output to `log`; wall time, and its memory (TreeSampler).

    `cpu_s` is the user + system CPU of the process and every descendant it waited for.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        with TreeSampler(process.pid) as sampler:
            _pid, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return Run(
        list(argv),
        wall,
        process.returncode,
        log,
        sampler.peak,
        round(usage.ru_utime + usage.ru_stime, 2),
    )


# --- the critical path of the injected latencies ---------------------------------------------------


def critical_path_s(
    graph: Mapping[str, Sequence[Mapping[str, Any]]], latency_s: Mapping[str, float]
) -> dict[str, float]:
    """The longest chain of injected latency through each stack's resources, and their sum.

    `graph` is what `plain_automation.py --graph-out` writes: per stack, its resources with their
    type and dependencies, as Pulumi's state records them. A resource waits for its dependencies,
    then takes the latency the local cloud's knobs give its type (only aws resources get one: the
    knobs are applied by the aws plugin). The stacks form a chain (networking -> database -> app:
    each needs the outputs of the one before), so the environment's critical path is the sum.
    No orchestrator can deploy an environment faster than that on these knobs.
    """
    from stackflow.localcloud.knobs import KnobSpec

    spec = KnobSpec.parse({"latency_s": dict(latency_s)})
    out: dict[str, float] = {}
    for stack, resources in graph.items():
        by_urn = {r["urn"]: r for r in resources}
        finish: dict[str, float] = {}
        for urn in by_urn:
            _longest(urn, by_urn, finish, functools.partial(_latency, spec, stack))
        out[stack] = round(max(finish.values(), default=0.0), 3)
    out["environment"] = round(sum(out.values()), 3)
    return out


def _latency(spec: Any, node: str, resource: Mapping[str, Any]) -> float:
    from stackflow.localcloud.knobs import KnobCall, latency_for

    if not (resource["custom"] and resource["type"].startswith("aws:")):
        return 0.0
    environment = resource["urn"].split("::")[0].rsplit(":", 1)[-1]
    return latency_for(spec, KnobCall(node, environment, resource["type"], "create"))


def _longest(
    urn: str,
    by_urn: Mapping[str, Mapping[str, Any]],
    finish: dict[str, float],
    own: Callable[[Mapping[str, Any]], float],
) -> float:
    """When `urn` finishes: after its slowest dependency, plus its own latency (memoised)."""
    if urn not in finish:
        deps = [d for d in by_urn[urn]["dependencies"] if d in by_urn]
        start = max((_longest(d, by_urn, finish, own) for d in deps), default=0.0)
        finish[urn] = start + own(by_urn[urn])
    return finish[urn]


# --- results --------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    from stackflow.pulumi_cli import CLI_VERSION

    return {
        "pulumi-cli": CLI_VERSION,
        "pulumi-sdk": version("pulumi"),
        "prefect": version("prefect"),
        "moto": version("moto"),
        "python": platform.python_version(),
    }


def run_metadata() -> dict[str, Any]:
    """What every run records next to its figures."""
    return {
        "target": TARGET,
        "engine": "real Pulumi CLI through the Automation API, on the local cloud (moto on "
        "loopback behind the project's provider plugins); nothing reaches AWS",
        "versions": versions(),
        "cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine skews figures
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def merge_results(updates: Mapping[str, Any], path: Path = RESULTS) -> dict[str, Any]:
    """Read-modify-write the results file under a lock, keeping keys other scripts wrote."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        for key, value in updates.items():
            if key == "figures" and isinstance(value, Mapping):
                data["figures"] = {**data.get("figures", {}), **value}
            else:
                data[key] = value
        write_results(data, path)
    return data


def write_results(data: Mapping[str, Any], path: Path = RESULTS) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def figure(
    label: str,
    ours: float | int | None,
    plain: float | int | str | None,
    unit: str,
    how: str,
    *,
    note: str = "",
) -> dict[str, Any]:
    """One row of the table: stackflow's figure beside the plain script's, and how it was made."""
    row: dict[str, Any] = {"label": label, "stackflow": ours, "plain": plain, "unit": unit}
    row["how"] = how
    if isinstance(ours, int | float) and isinstance(plain, int | float) and plain:
        row["ratio"] = round(ours / plain, 3)
    if note:
        row["note"] = note
    return row


def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        text = f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def rows(results: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(figure, stackflow, plain script, stackflow / plain, how) for every figure."""
    out = []
    for row in results.get("figures", {}).values():
        ratio = row.get("ratio")
        label = row["label"] + (f" ({row['note']})" if row.get("note") else "")
        out.append(
            (
                label,
                _fmt(row["stackflow"], row["unit"]),
                _fmt(row["plain"], row["unit"]),
                "" if ratio is None else f"{ratio:.2f}",
                row["how"],
            )
        )
    return out


def table(results: Mapping[str, Any]) -> str:
    body = rows(results)
    head = ("figure (local cloud)", "stackflow", "plain script", "ratio")
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(head)]
    lines = [TITLE, "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("-" * (sum(widths) + 6))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) for r in body]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """Markdown for a cell: a leading indent as an arrow, `*` outside code spans escaped."""
    indent = text.startswith("  ")
    parts = text.strip().split("`")
    parts[::2] = [p.replace("*", "\\*").replace("|", "\\|") for p in parts[::2]]
    return ("↳ " if indent else "") + "`".join(parts)


def markdown_table(results: Mapping[str, Any]) -> str:
    """The same rows as a Markdown table (for the README)."""
    lines = [
        "| figure (local cloud) | stackflow | plain Automation API script | stackflow / plain "
        "| measured with |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows(results)]
    return "\n".join(lines)
