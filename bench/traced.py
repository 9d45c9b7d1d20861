"""Run a Python script as `python SCRIPT ARGS...` would, recording every `pulumi` process it starts.

    .venv/bin/python bench/traced.py --trace FILE [--cpu-profile FILE] [--memory FILE] SCRIPT ...

The same launcher wraps both sides (`flows/run.py ...` and `bench/plain_automation.py ...`), so
neither side's code carries anything for the bench. Every `pulumi` child goes through
`subprocess.Popen` (the engine's `PulumiCLI.run` and the plain script alike): the launcher notes
when each starts and, waiting for it with `os.wait4`, when it ended and the CPU it used with the
processes it reaped (its provider plugins). One JSON line per process goes to `--trace`:
`{"argv", "cwd", "start_s", "wall_s", "cpu_s", "code"}`, start relative to the launcher's start; config
values on a command line are masked (`config set-all --secret key=...` carries a secret).

`--memory FILE` traces Python's allocations (tracemalloc, 1 frame) and writes, as JSON, the peak
of traced memory and the memory still allocated at the end by package (`pulumi_aws`, `prefect`,
`pydantic`, ...): where the process's RSS goes. Like the CPU profile, it slows the process down.

`--cpu-profile` also profiles every thread of the process with cProfile on per-thread CPU clocks
(`time.thread_time`, so a thread that waits costs nothing) and writes the merged pstats there:
where the process's own CPU goes, by package (Prefect, the Pulumi SDK, stackflow, ...). It slows
Python code down, never the `pulumi` processes; use it for shares, not for wall times.
"""

from __future__ import annotations

import cProfile
import json
import os
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_STARTED = time.perf_counter()
_CONFIG_FLAGS = ("--secret", "--plaintext")


def shown_argv(argv: list[str]) -> list[str]:
    """A `pulumi` command line as the trace may keep it: config values masked."""
    shown: list[str] = []
    masked = False
    for arg in argv:
        if masked and "=" in arg:
            shown.append(arg.split("=", 1)[0] + "=***")
        elif masked:
            shown.append("***")
        else:
            shown.append(arg)
        masked = arg in _CONFIG_FLAGS
    return shown


class _Trace:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    def write(self, record: dict[str, Any]) -> None:
        with self.lock, self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")


def install_trace(path: Path) -> None:
    """Record every `pulumi` process this process starts (see the module's docstring)."""
    trace = _Trace(path)
    popen_init = subprocess.Popen.__init__
    try_wait = subprocess.Popen._try_wait  # type: ignore[attr-defined]

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        argv = [str(a) for a in args] if isinstance(args, list | tuple) else [str(args)]
        traced = os.path.basename(argv[0]) == "pulumi"
        started = time.perf_counter()
        popen_init(self, args, *rest, **kw)
        if traced:
            where = str(kw.get("cwd") or os.getcwd())
            self._bench_trace = (shown_argv(argv[1:]), where, started)  # type: ignore[attr-defined]

    def wait(self: subprocess.Popen[Any], wait_flags: int) -> tuple[int, int]:
        traced = getattr(self, "_bench_trace", None)
        if traced is None:
            return try_wait(self, wait_flags)  # type: ignore[no-any-return]
        try:
            pid, status, usage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return self.pid, 0
        if pid == self.pid:
            argv, where, started = traced
            ended = time.perf_counter()
            trace.write(
                {
                    "argv": argv,
                    "cwd": where,
                    "start_s": round(started - _STARTED, 3),
                    "wall_s": round(ended - started, 3),
                    "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                    "code": os.waitstatus_to_exitcode(status),
                }
            )
        return pid, status

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    subprocess.Popen._try_wait = wait  # type: ignore[attr-defined]


class ThreadProfiles:
    """cProfile in every thread, each on its own thread's CPU clock."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self.lock = threading.Lock()

    def _new(self) -> cProfile.Profile:
        profile = cProfile.Profile(time.thread_time)
        with self.lock:
            self.profiles.append(profile)
        return profile

    def start(self) -> None:
        def first_call(*_: Any) -> None:  # in a new thread: hand over to a profiler of its own
            sys.setprofile(None)
            self._new().enable()

        threading.setprofile(first_call)
        self._new().enable()

    def dump(self, path: Path) -> None:
        import pstats

        threading.setprofile(None)  # type: ignore[arg-type]
        with self.lock:
            profiles = list(self.profiles)
        for profile in profiles:
            profile.disable()
        stats: pstats.Stats | None = None
        for profile in profiles:
            try:
                found = pstats.Stats(profile)
            except TypeError:  # a thread that ran no Python code
                continue
            stats = found if stats is None else stats.add(found)
        if stats is not None:
            stats.dump_stats(str(path))


def package_of(filename: str) -> str:
    """A site-packages name, a folder of the repository, or (stdlib)."""
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    root = str(Path(__file__).resolve().parents[1]) + "/"
    if filename.startswith(root):
        return filename[len(root) :].split("/", 1)[0].removesuffix(".py")
    return "(stdlib)" if filename.startswith(sys.prefix) or "/lib/python" in filename else "(other)"


def dump_memory(path: Path) -> None:
    import tracemalloc

    current, peak = tracemalloc.get_traced_memory()
    by: dict[str, int] = {}
    for stat in tracemalloc.take_snapshot().statistics("filename"):
        name = package_of(stat.traceback[0].filename)
        by[name] = by.get(name, 0) + stat.size
    tracemalloc.stop()
    top = dict(sorted(((k, round(v / 2**20, 1)) for k, v in by.items()), key=lambda kv: -kv[1]))
    path.write_text(
        json.dumps(
            {
                "traced_peak_mb": round(peak / 2**20, 1),
                "traced_end_mb": round(current / 2**20, 1),
                "end_by_package_mb": top,
            }
        )
    )


def main() -> None:
    args = sys.argv[1:]
    trace: Path | None = None
    profile_to: Path | None = None
    memory_to: Path | None = None
    while args and args[0].startswith("--"):
        flag, value, args = args[0], Path(args[1]), args[2:]
        if flag == "--trace":
            trace = value
        elif flag == "--cpu-profile":
            profile_to = value
        elif flag == "--memory":
            memory_to = value
        else:
            raise SystemExit(f"unknown option {flag}")
    if not args:
        raise SystemExit(__doc__)
    script = str(Path(args[0]).resolve())
    sys.argv = [script, *args[1:]]
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` sets it
    if trace is not None:
        install_trace(trace)
    if memory_to is not None:
        import tracemalloc

        tracemalloc.start(1)
    profiles = ThreadProfiles() if profile_to is not None else None
    if profiles is not None:
        profiles.start()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        if profiles is not None and profile_to is not None:
            profiles.dump(profile_to)
        if memory_to is not None:
            dump_memory(memory_to)


if __name__ == "__main__":
    main()
