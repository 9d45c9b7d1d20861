"""A measured process and its descendants: wall time, CPU (rusage of everything it waited for),
and memory and processes sampled from /proc (the `pulumi` CLI, the provider plugins)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit import ROOT, SAMPLE_S

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


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU of a process so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


@dataclass
class ProcessSeen:
    """One descendant as the samples saw it: its kind, when it was first and last seen (seconds
    since sampling began), and the CPU it had used when last seen (a lower bound)."""

    kind: str
    first_s: float
    last_s: float
    cpu_s: float = 0.0


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

    def __init__(self, pid: int, period_s: float = SAMPLE_S) -> None:
        self.pid = pid
        self.period_s = period_s
        self.peak = TreePeak()
        self.processes: dict[int, ProcessSeen] = {}  # every descendant seen, by pid
        self._began = time.perf_counter()
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
            self._stop.wait(self.period_s)

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
            now = time.perf_counter() - self._began
            seen = self.processes.setdefault(pid, ProcessSeen(kind, now, now))
            seen.last_s, seen.cpu_s = now, max(seen.cpu_s, _cpu_s(pid))
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
    processes: list[ProcessSeen] = field(default_factory=list)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def check(self) -> Run:
        if self.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(self.argv)}` failed (exit {self.returncode}); log {self.log}:\n"
                f"{self.text()[-3000:]}"
            )
        return self


def run_measured(
    argv: Sequence[str], env: Mapping[str, str], log: Path, period_s: float = SAMPLE_S
) -> Run:
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
        with TreeSampler(process.pid, period_s) as sampler:
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
        list(sampler.processes.values()),
    )
