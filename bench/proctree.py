"""CPU time and memory of every process a benchmark involves, read from /proc by a sampler thread.

A tree is a named root process (the flow process, the Prefect server, the PostgreSQL postmaster,
the local cloud server) and everything below it. How the figures are made:

- Every `period_s` the sampler lists /proc. A process it has not placed yet has its
  /proc/<pid>/stat read once (parent, start time) and joins the tree its parent is in. For every
  process of a tree it keeps the last values seen: its own CPU (utime + stime) and the CPU of the
  children it waited for (cutime + cstime), and its memory (/proc/<pid>/statm).
- A tree's CPU over the measurement is the sum, over the tree's live processes, of own + waited-for
  children's CPU at the end, minus the same sum at the start. That is exact for every process a
  parent waits for (Python's subprocess, Go's os/exec and the postmaster all do), however short it
  lived: its CPU lands in its parent's children fields when it is reaped. For a root that is reaped
  by the caller (the flow process), the caller passes the exact figure from wait4's rusage
  (`set_total`).
- A kind's CPU (pulumi, aws plugin, MariaDB...) is the sum of its processes' own CPU at their last
  sample, plus each one's tail: what it used after its last sample, read from how much its
  parent's children fields grew when it was reaped (shared by own CPU when several children of one
  parent ended in the same period). A process that lived less than a period and was never seen,
  or whose parent ended in the same period, is not attributed: what a tree's total has beyond its
  kinds is reported under the tree's `residual` kind.
- Memory per tree, at each sample: the anonymous RSS of its processes summed (resident - shared,
  from statm) plus the largest shared RSS of one of them (the binaries, libraries and shared
  memory that all of them map are counted once); the peak over the samples. A root's own peak is
  its VmHWM.

A pid is placed once: a pid that left the listing is forgotten, so a recycled pid (the kernel hands
pids out in turn, so one comes back only after the counter wraps, never within a period) is a new
process.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PERIOD_S = 0.2
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def read_stat(pid: int) -> tuple[int, int, float, float] | None:
    """(parent pid, start time in ticks, own CPU s, waited-for children's CPU s), or None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is field 3 of proc(5): ppid 4, utime 14, stime 15, cutime 16, cstime 17, start 22
    own = (int(fields[11]) + int(fields[12])) * _TICK_S
    children = (int(fields[13]) + int(fields[14])) * _TICK_S
    return int(fields[1]), int(fields[19]), own, children


def read_statm(pid: int) -> tuple[int, int]:
    """(anonymous RSS, shared RSS) in KiB; (0, 0) if gone."""
    try:
        values = Path(f"/proc/{pid}/statm").read_text().split()
        resident, shared = int(values[1]), int(values[2])
    except (OSError, IndexError, ValueError):
        return 0, 0
    return (resident - shared) * _PAGE_KB, shared * _PAGE_KB


def read_hwm_kb(pid: int) -> int:
    """VmHWM (peak RSS) in KiB; 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (every CPU, any process), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) * _TICK_S


def cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


@dataclass
class Tree:
    """One root and how its processes are named.

    Attributes:
        root: the root's pid.
        classify: the kind of a process of this tree from its command line (and whether it is
            the root).
        residual: the kind its CPU beyond its processes' sampled own CPU is reported under.
    """

    root: int
    classify: Callable[[str, bool], str]
    residual: str
    total_s: float | None = None  # exact total given by the caller (wait4), if any
    peak_kb: int = 0
    root_hwm_kb: int = 0


@dataclass
class _Proc:
    tree: str
    kind: str
    base: float  # own + children CPU at the start (0 for a process born since)
    base_own: float
    pid: int
    ppid: int
    own: float = 0.0
    children: float = 0.0
    tail: float = 0.0  # its CPU after its last sample, from its parent's children fields
    rss_kb: int = 0
    command: str = ""
    named: bool = True  # False while it shows its parent's command line (forked, not yet exec'd)


@dataclass
class TreeReport:
    """What one measurement found, per tree and per kind (seconds, MiB)."""

    cpu_s: dict[str, float]
    cpu_by_kind_s: dict[str, float]
    peak_mb: dict[str, float]
    root_peak_mb: dict[str, float]
    largest_mb_by_kind: dict[str, float]
    seen: dict[str, int]
    samples: int
    sampler_cpu_s: float
    machine_cpu_s: float  # every process of the machine, ours or not, over the block

    def as_dict(self) -> dict[str, Any]:
        return {
            "cpu_s": _rounded(self.cpu_s, 2),
            "cpu_by_kind_s": _rounded(self.cpu_by_kind_s, 2),
            "peak_rss_mb": _rounded(self.peak_mb, 1),
            "root_peak_rss_mb": _rounded(self.root_peak_mb, 1),
            "largest_process_rss_mb_by_kind": _rounded(self.largest_mb_by_kind, 1),
            "processes_seen": dict(sorted(self.seen.items())),
            "samples": self.samples,
            "sampler_cpu_s": round(self.sampler_cpu_s, 2),
            "machine_cpu_s": round(self.machine_cpu_s, 1),
        }


def _rounded(values: Mapping[str, float], digits: int) -> dict[str, float]:
    return {k: round(v, digits) for k, v in sorted(values.items(), key=lambda kv: -kv[1])}


class ProcessTrees:
    """Samples the named trees every `period_s` from /proc in a thread (see the module's text).

    Use as a context manager: entering takes the start sample, leaving the last one.
    """

    def __init__(self, trees: Mapping[str, Tree], period_s: float = PERIOD_S) -> None:
        self.trees = dict(trees)
        self.period_s = period_s
        self._procs: dict[int, _Proc] = {}  # live, by pid
        self._gone: list[_Proc] = []  # those that left /proc, with their last values
        self._outside: set[int] = set()
        self._samples = 0
        self._sampler_cpu = 0.0
        self._started = False
        self._machine = [0.0, 0.0]  # busy CPU of the machine at the start and the end
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proctree-sampler", daemon=True)

    def add(self, name: str, tree: Tree) -> None:
        """A tree whose root started after the start sample (its CPU counts from its birth)."""
        with self._lock:
            self.trees[name] = tree
            self._outside.discard(tree.root)

    def set_total(self, name: str, cpu_s: float) -> None:
        """The tree's exact CPU (the rusage wait4 gave for a root the caller reaped)."""
        self.trees[name].total_s = cpu_s

    def __enter__(self) -> ProcessTrees:
        self._machine[0] = machine_busy_s()
        self.sample()
        self._started = True
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        self._machine[1] = machine_busy_s()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            began = time.thread_time()
            self.sample()
            self._sampler_cpu += time.thread_time() - began

    def _place(self, pid: int, stat: tuple[int, int, float, float]) -> _Proc | None:
        ppid = stat[0]
        for name, tree in self.trees.items():
            if pid == tree.root:
                return self._new(name, tree, pid, True, stat)
        parent = self._procs.get(ppid)
        if parent is None:
            return None
        return self._new(parent.tree, self.trees[parent.tree], pid, False, stat)

    def _new(
        self, name: str, tree: Tree, pid: int, root: bool, stat: tuple[int, int, float, float]
    ) -> _Proc:
        born_since = self._started  # alive at the start sample: only what it uses later counts
        base_own = 0.0 if born_since else stat[2]
        base = 0.0 if born_since else stat[2] + stat[3]
        proc = _Proc(name, tree.residual, base, base_own, pid, stat[0], stat[2], stat[3])
        if root:
            proc.command = cmdline(pid)
            proc.kind = tree.classify(proc.command, True)
        else:
            self._name(proc)
        return proc

    def _name(self, proc: _Proc) -> None:
        """Name a process once it has exec'd: a fork shows its parent's command line until then
        (a zombie none), so until it shows its own, it is asked again at every sample."""
        command = cmdline(proc.pid)
        parent = self._procs.get(proc.ppid)
        if command and (parent is None or command != parent.command):
            proc.command, proc.named = command, True
            proc.kind = self.trees[proc.tree].classify(command, False)
        else:
            proc.named = False

    def sample(self) -> None:
        """One look at /proc: place new processes, update every tree process's last values."""
        with self._lock:
            listed = {int(e) for e in os.listdir("/proc") if e.isdigit()}
            ended = [self._procs.pop(pid) for pid in list(self._procs) if pid not in listed]
            self._outside &= listed
            stats = {
                pid: s
                for pid in sorted(listed - self._outside - self._procs.keys())
                if (s := read_stat(pid)) is not None
            }
            placed = True
            while placed:  # a child listed before its parent is placed on the next pass
                placed = False
                for pid in [p for p in stats if p not in self._procs]:
                    proc = self._place(pid, stats[pid])
                    if proc is not None:
                        self._procs[pid] = proc
                        placed = True
            self._outside |= stats.keys() - self._procs.keys()
            anon = dict.fromkeys(self.trees, 0)
            shared = dict.fromkeys(self.trees, 0)
            reaped: dict[int, float] = {}  # parent pid -> growth of its children fields
            for pid, proc in list(self._procs.items()):
                stat = stats.get(pid) or read_stat(pid)
                if stat is None:
                    ended.append(self._procs.pop(pid))
                    continue
                reaped[pid] = stat[3] - proc.children
                proc.own, proc.children = stat[2], stat[3]
                if not proc.named:
                    self._name(proc)
                proc_anon, proc_shared = read_statm(pid)
                proc.rss_kb = max(proc.rss_kb, proc_anon + proc_shared)
                anon[proc.tree] += proc_anon
                shared[proc.tree] = max(shared[proc.tree], proc_shared)
            _share_tails(ended, reaped)
            self._gone += ended
            for name, tree in self.trees.items():
                tree.root_hwm_kb = max(tree.root_hwm_kb, read_hwm_kb(tree.root))
                tree.peak_kb = max(tree.peak_kb, anon[name] + shared[name])
            self._samples += 1

    def report(self) -> TreeReport:
        """Per tree and per kind, once the block has ended."""
        cpu: dict[str, float] = {}
        kinds: dict[str, float] = {}
        seen: dict[str, int] = {}
        largest: dict[str, float] = {}
        for name, tree in self.trees.items():
            live = [p for p in self._procs.values() if p.tree == name]
            procs = live + [p for p in self._gone if p.tree == name]
            end = sum(p.own + p.children for p in live)
            start = sum(p.base for p in procs)
            sampled = 0.0
            for p in procs:
                kinds[p.kind] = kinds.get(p.kind, 0.0) + p.own + p.tail - p.base_own
                sampled += p.own + p.tail - p.base_own
                seen[p.kind] = seen.get(p.kind, 0) + 1
                largest[p.kind] = max(largest.get(p.kind, 0.0), p.rss_kb / 1024)
            total = end - start
            if tree.total_s is not None:
                total = tree.total_s
            elif tree.root not in self._procs:  # reaped: its children fields went with it, so
                total = max(total, sampled)  # the sampled sum is the better (lower) bound
            cpu[name] = total
            kinds[tree.residual] = kinds.get(tree.residual, 0.0) + max(0.0, total - sampled)
        return TreeReport(
            cpu_s=cpu,
            cpu_by_kind_s={k: v for k, v in kinds.items() if v > 0.005},
            peak_mb={n: t.peak_kb / 1024 for n, t in self.trees.items()},
            root_peak_mb={n: t.root_hwm_kb / 1024 for n, t in self.trees.items()},
            largest_mb_by_kind=largest,
            seen=seen,
            samples=self._samples,
            sampler_cpu_s=self._sampler_cpu,
            machine_cpu_s=self._machine[1] - self._machine[0],
        )


def _share_tails(ended: list[_Proc], reaped: Mapping[int, float]) -> None:
    """Give the processes that ended since the last sample the CPU they used after it: what
    their parent's children fields grew by beyond the last-seen totals of them and of their own
    children that ended with them (a pulumi process and its plugins end together), shared by own
    CPU (one child: all of it). Children never seen at all stay in the tree's residual when their
    parent reaped no seen child in the same period."""
    by_parent: dict[int, list[_Proc]] = {}
    for proc in ended:
        by_parent.setdefault(proc.ppid, []).append(proc)

    def seen_total(proc: _Proc) -> float:  # its last-seen CPU and that of what ended below it
        below = by_parent.get(proc.pid, [])
        return proc.own + proc.children + sum(seen_total(kid) for kid in below)

    for ppid, kids in by_parent.items():
        tail = reaped.get(ppid, 0.0) - sum(seen_total(k) for k in kids)
        if tail <= 0:
            continue
        weight = sum(k.own - k.base_own for k in kids)
        for kid in kids:
            share = (kid.own - kid.base_own) / weight if weight > 0 else 1 / len(kids)
            kid.tail += tail * share


def flow_kind(command: str, root: bool) -> str:
    """A process of the flow process's tree: the flow process, `pulumi`, a provider plugin."""
    if root:
        return "flow process"
    argv0 = os.path.basename(command.split(" ", 1)[0])
    if argv0 == "pulumi":
        return "pulumi"
    for plugin in ("aws", "random"):
        if f"stackflow.localcloud.plugin {plugin}" in command or f"pulumi-resource-{plugin}" in (
            command
        ):
            return f"{plugin} plugin"
    return f"flow tree: {argv0 or 'unnamed'}"


def cloud_kind(command: str, root: bool) -> str:
    """A process of the local cloud's tree: its server (moto) or a MariaDB of its data plane."""
    argv0 = os.path.basename(command.split(" ", 1)[0])
    if not root and ("mariadb" in argv0 or "mysql" in argv0):
        return "MariaDB"
    return "local cloud server (moto)"


def one_kind(kind: str) -> Callable[[str, bool], str]:
    """Every process of the tree is `kind` (the Prefect server, PostgreSQL)."""

    def classify(_command: str, _root: bool) -> str:
        return kind

    return classify
