"""Where the time goes: every `pulumi` process of one environment's first deploy, no-op `up`,
refresh and destroy, for stackflow and for the plain Automation API script, through the real
engine on the **local cloud** (moto on loopback, never AWS).

    .venv/bin/python bench/profiles.py [--only first-up,noop-up,refresh,destroy]
                                      [--sides ours,plain] [--latency] [--memory]
                                      [--no-cpu-profile] [--out FILE]

It starts a Prefect server and a local cloud server of its own (bench/sessions.py), then runs each
operation with each side in a process of its own, under bench/traced.py, which records every
`pulumi` process that side starts (command line, start, duration, CPU with the plugins it
reaped). It prints, per operation and side:

- the whole process: wall time, CPU with its descendants, peak RSS;
- `pulumi` processes: how many, per stack operation, by command, and each one in order;
- the provider plugins (sampled from /proc every 0.05 s: counts, time alive, CPU; lower bounds);
- the time no `pulumi` process ran (start-up, Prefect, migrations, the health check: what the side
  adds around the engine), and the process's own CPU by package (cProfile on per-thread CPU
  clocks, in a second run of stackflow's first deploy and no-op `up`, so the timed run above is not
  slowed by it): how much of it is Prefect;
- for stackflow's no-op `up`, the import time by package (`python -X importtime`).

With `--latency` the local cloud takes compare.py's latencies (AWS's proportions); without, none
(the engine's own time). The machine's load average is printed with the figures: on a busy machine
compare counts, not seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit import LOGS, PYTHON, ROOT, say, workdir
from sampling import run_measured
from sessions import Session, session

OPERATIONS = ("first-up", "noop-up", "refresh", "destroy")
SIDES = ("ours", "plain")
TRACED = str(ROOT / "bench" / "traced.py")
STACKS = ("networking", "database", "app")
PERIOD_S = 0.05
PLUGINS = ("aws plugin", "random plugin")


@dataclass
class Profiled:
    """One operation of one side: the process, its `pulumi` processes and its plugins."""

    side: str
    operation: str
    command: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    pulumi: list[dict[str, Any]]
    plugins: dict[str, dict[str, float]]
    by_package_s: dict[str, float] = field(default_factory=dict)
    imports_s: dict[str, float] = field(default_factory=dict)

    @property
    def stacks(self) -> int:
        return len({p["stack"] for p in self.pulumi}) or 1

    def outside_pulumi_s(self) -> float:
        """Wall time during which no `pulumi` process of this side ran."""
        covered = 0.0
        end = 0.0
        for start, stop in sorted((p["start_s"], p["start_s"] + p["wall_s"]) for p in self.pulumi):
            if stop > end:
                covered += stop - max(start, end)
                end = stop
        return max(0.0, self.wall_s - covered)

    def as_dict(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "operation": self.operation,
            "command": self.command,
            "wall_s": round(self.wall_s, 2),
            "cpu_s": self.cpu_s,
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "pulumi_processes": len(self.pulumi),
            "pulumi_processes_per_stack": round(len(self.pulumi) / self.stacks, 2),
            "pulumi_by_command": dict(command_counts(self.pulumi)),
            "outside_pulumi_s": round(self.outside_pulumi_s(), 2),
            "pulumi": self.pulumi,
            "plugins": self.plugins,
            "cpu_by_package_s": self.by_package_s,
            "import_self_s_by_package": self.imports_s,
        }


def _stack_of(cwd: str) -> str:
    """The stack a `pulumi` process worked on, from its workspace folder (<project>-<node>/<env>)."""
    for part in Path(cwd).parts:
        for node in STACKS:
            if part.endswith(f"-{node}"):
                return node
    return "?"


def command_of(argv: list[str]) -> str:
    """`stack select`, `config set-all`, `up`, `stack output --show-secrets`: what a process did."""
    words = []
    for arg in argv:
        if arg.startswith("-"):
            break
        words.append(arg)
    if "--show-secrets" in argv and words[:2] == ["stack", "output"]:
        words.append("--show-secrets")
    return " ".join(words)


def command_counts(processes: Iterable[Mapping[str, Any]]) -> Counter[str]:
    return Counter(command_of(p["argv"]) for p in processes)


def _read_trace(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        record["argv"] = [a for a in record["argv"] if a != "--non-interactive"]
        record["stack"] = _stack_of(record.pop("cwd", ""))
        found.append(record)
    return sorted(found, key=lambda r: r["start_s"])


def package_of(filename: str) -> str:
    """The package a profiled function belongs to: a site-packages name, a folder of this
    repository, (stdlib) or (built-in)."""
    if filename.startswith("~") or filename.startswith("<"):
        return "(built-in)"
    if "site-packages/" in filename:
        head = filename.split("site-packages/", 1)[1].split("/", 1)[0]
        return head.removesuffix(".py").split(".")[0]
    root = str(ROOT) + "/"
    if filename.startswith(root):
        return filename[len(root) :].split("/", 1)[0].removesuffix(".py")
    return "(stdlib)"


def cpu_by_package(path: Path) -> dict[str, float]:
    """Own CPU time (tottime) of every profiled function, summed by package, largest first."""
    if not path.exists():
        return {}
    stats: Any = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = defaultdict(float)
    for (filename, _line, _name), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        totals[package_of(filename)] += tottime
    return {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


_IMPORT = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (.*)$")


def import_times(text: str) -> dict[str, float]:
    """`-X importtime` output: each module's own import time, summed by its root package."""
    totals: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        found = _IMPORT.match(line)
        if found:
            totals[found.group(3).strip().split(".")[0]] += int(found.group(1)) / 1e6
    return {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


class Profiler:
    """Runs each side's operations on one session, traced."""

    def __init__(self, s: Session, folder: Path) -> None:
        self.s = s
        self.folder = folder
        self.count = 0

    def _argv(self, side: str, operation: str) -> tuple[list[str], dict[str, str]]:
        verb = "up" if operation.endswith("up") else operation
        if side == "ours":
            args = ["flows/run.py", verb, "--env", "prof-a"] + (
                ["--yes"] if verb == "destroy" else []
            )
            return args, self.s.env(self.folder / "stackflow-state")
        work = str(self.folder / "plain-script")
        return ["bench/plain_automation.py", verb, "--env", "plain-a", "--work", work], self.s.env()

    def run(self, side: str, operation: str, cpu_profile: bool = False) -> Profiled:
        self.count += 1
        args, env = self._argv(side, operation)
        trace = self.folder / f"trace-{self.count}.jsonl"
        log = LOGS / f"profile-{self.count:02d}-{side}-{operation}.log"
        argv = [PYTHON, TRACED, "--trace", str(trace), *args]
        run = run_measured(argv, env, log, PERIOD_S).check()
        plugins: dict[str, dict[str, float]] = {}
        for kind in PLUGINS:
            seen = [p for p in run.processes if p.kind == kind]
            plugins[kind] = {
                "processes": len(seen),
                "alive_s": round(sum(p.last_s - p.first_s for p in seen), 2),
                "cpu_s": round(sum(p.cpu_s for p in seen), 2),
            }
        profiled = Profiled(
            side,
            operation,
            " ".join(args[:3]),
            run.wall_s,
            run.cpu_s,
            run.memory.root_mb,
            _read_trace(trace),
            plugins,
        )
        if cpu_profile:
            profiled.by_package_s = self._cpu_profile(side, operation)
        say(f"{side} {operation}: {run.wall_s:.1f}s, {len(profiled.pulumi)} pulumi processes")
        return profiled

    def _cpu_profile(self, side: str, operation: str) -> dict[str, float]:
        """A second run under cProfile (on an environment of its own for a first deploy)."""
        args, env = self._argv(side, operation)
        if operation == "first-up":
            args = [a if a != "prof-a" else "prof-b" for a in args]
        out = self.folder / f"cpu-{self.count}.pstats"
        argv = [PYTHON, TRACED, "--cpu-profile", str(out), *args]
        run_measured(argv, env, LOGS / f"profile-{self.count:02d}-{side}-{operation}-cpu.log")
        return cpu_by_package(out)

    def memory(self, side: str) -> dict[str, Any]:
        """A first deploy of an environment of its own under tracemalloc (bench/traced.py)."""
        args, env = self._argv(side, "first-up")
        args = [a.replace("prof-a", "prof-m").replace("plain-a", "plain-m") for a in args]
        out = self.folder / f"memory-{side}.json"
        argv = [PYTHON, TRACED, "--memory", str(out), *args]
        run_measured(argv, env, LOGS / f"profile-memory-{side}.log").check()
        found: dict[str, Any] = json.loads(out.read_text())
        return found

    def imports(self) -> dict[str, float]:
        """stackflow's no-op `up` under `-X importtime`."""
        args, env = self._argv("ours", "noop-up")
        log = LOGS / "profile-importtime.log"
        run_measured([PYTHON, "-X", "importtime", *args], env, log).check()
        return import_times(log.read_text(errors="replace"))


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def report(found: list[Profiled]) -> str:
    lines: list[str] = []
    for p in found:
        lines.append("")
        lines.append(f"== {p.operation}, {p.side}: `{p.command}` ==")
        lines.append(
            f"whole process {p.wall_s:.2f} s wall, {p.cpu_s:.1f} s CPU with its descendants, "
            f"peak RSS {p.peak_rss_mb:.0f} MiB; no `pulumi` running for {p.outside_pulumi_s():.2f} s"
        )
        total = sum(x["wall_s"] for x in p.pulumi)
        lines.append(
            f"`pulumi` processes: {len(p.pulumi)} ({len(p.pulumi) / p.stacks:.1f} per stack "
            f"operation, {p.stacks} stacks), {total:.2f} s in all"
        )
        by_command: dict[str, list[float]] = defaultdict(list)
        for x in p.pulumi:
            by_command[command_of(x["argv"])].append(x["wall_s"])
        for command, walls in sorted(by_command.items(), key=lambda kv: -sum(kv[1])):
            lines.append(f"  {len(walls):3d} x {command:32s} {sum(walls):7.2f} s")
        if p.pulumi:
            lines.append("  start     wall    cpu  stack       command line")
            for x in p.pulumi:
                lines.append(
                    f"  {x['start_s']:6.2f} {x['wall_s']:7.2f} {x['cpu_s']:6.2f}  "
                    f"{x['stack']:10s}  pulumi {' '.join(x['argv'])[:110]}"
                )
        for kind, plugin in p.plugins.items():
            if plugin["processes"]:
                lines.append(
                    f"{kind}: {plugin['processes']:.0f} processes, alive {plugin['alive_s']:.2f} s "
                    f"in all, CPU {plugin['cpu_s']:.2f} s (sampled: lower bounds)"
                )
        if p.by_package_s:
            own = sum(p.by_package_s.values())
            shown = ", ".join(
                f"{k} {v:.2f} s ({_pct(v, own)})" for k, v in list(p.by_package_s.items())[:10]
            )
            lines.append(f"the process's own CPU by package (cProfile run): {own:.2f} s: {shown}")
        if p.imports_s:
            total = sum(p.imports_s.values())
            shown = ", ".join(f"{k} {v:.2f}" for k, v in list(p.imports_s.items())[:14])
            lines.append(f"imports (-X importtime, own time by package): {total:.2f} s: {shown}")
    lines.append("")
    lines.append("`pulumi` processes per stack operation (ours / plain):")
    by = {(p.side, p.operation): p for p in found}
    for operation in OPERATIONS:
        cells = []
        for side in SIDES:
            p = by.get((side, operation))
            cells.append("-" if p is None else f"{len(p.pulumi)} ({len(p.pulumi) / 3:.1f}/stack)")
        lines.append(f"  {operation:9s} {cells[0]:>16s}  {cells[1]:>16s}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(OPERATIONS), help="operations, in this order")
    parser.add_argument("--sides", default=",".join(SIDES), help="ours, plain or both")
    parser.add_argument("--latency", action="store_true", help="compare.py's deploy latencies")
    parser.add_argument("--no-cpu-profile", action="store_true", help="skip the cProfile runs")
    parser.add_argument(
        "--memory", action="store_true", help="also a first deploy of each side under tracemalloc"
    )
    parser.add_argument("--out", type=Path, help="also write every figure here (JSON)")
    args = parser.parse_args(argv)
    operations = [o for o in args.only.split(",") if o]
    sides = [s for s in args.sides.split(",") if s]
    LOGS.mkdir(exist_ok=True)
    load = os.getloadavg()[0]
    found: list[Profiled] = []
    memory: dict[str, dict[str, Any]] = {}
    with workdir("profile") as tmp, session(Path(tmp)) as s:
        if args.latency:
            from compare import DEPLOY_LATENCY_S

            s.set_latency(DEPLOY_LATENCY_S)
        profiler = Profiler(s, Path(tmp))
        for operation in operations:
            for side in sides:
                cpu = side == "ours" and operation in ("first-up", "noop-up")
                profiled = profiler.run(side, operation, cpu and not args.no_cpu_profile)
                if side == "ours" and operation == "noop-up":
                    profiled.imports_s = profiler.imports()
                found.append(profiled)
        if args.memory:
            memory = {side: profiler.memory(side) for side in sides}
    text = report(found)
    if args.memory:
        text += "\n\nPython allocations in a first deploy (tracemalloc; a run of its own):"
        for side, found_memory in memory.items():
            top = ", ".join(
                f"{k} {v}" for k, v in list(found_memory["end_by_package_mb"].items())[:10]
            )
            text += (
                f"\n  {side}: peak traced {found_memory['traced_peak_mb']} MiB; still allocated at "
                f"the end {found_memory['traced_end_mb']} MiB, by package (MiB): {top}"
            )
    print(text)
    print(f"\nload average (1 min) {load:.2f} at start, {os.getloadavg()[0]:.2f} at the end")
    if args.out is not None:
        args.out.write_text(json.dumps([p.as_dict() for p in found], indent=2))


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
