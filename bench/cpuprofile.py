"""Where a process's own CPU goes, by Python function, with every thread of it counted.

cProfile sees one thread and slows what it sees; a fan-out's flow process runs dozens of threads
(the deploy flows, Prefect's event loop and log and event workers, the inline programs' gRPC
servers). This samples instead: every `period_s` it reads each Python thread's CPU clock
(`pthread_getcpuclockid`, one system call) and charges what the thread used since the last look to
the Python stack the thread is in now (`sys._current_frames`). The process's CPU beyond its Python
threads' (threads of C libraries such as gRPC's, and threads that ended between two looks) is
charged to one line of its own, so the figures add up to the process's CPU since `start`.
Statistical, CPU-weighted; its own thread is in the figures under its name. `by_self` charges the
innermost frame; `by_cumulative` every frame of our code and the libraries' on the stack (not the
standard library's, which is on every stack: threads, event loops, imports).

    profile = CpuProfile().start()
    ...
    report = profile.stop()   # {"cpu_s", "by_self", "by_cumulative", "by_package", "by_thread"}
"""

from __future__ import annotations

import re
import sys
import sysconfig
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

_STDLIB = sysconfig.get_paths()["stdlib"]
_ROOT = str(Path(__file__).resolve().parents[1])
TOP = 25


def _thread_cpu() -> dict[int, float]:
    """Python thread ident -> its CPU seconds so far (threads that just ended are left out)."""
    found: dict[int, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            found[thread.ident] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:
            continue
    return found


OTHER = "[C threads, and threads that ended between samples]"


def package_of(filename: str) -> str:
    """Which package a source file belongs to: site-packages/<pkg>, stackflow's own top-level
    folders, or the standard library."""
    if "site-packages/" in filename:
        rest = filename.split("site-packages/", 1)[1]
        return rest.split("/", 1)[0].removesuffix(".py")
    if filename.startswith(_ROOT + "/"):
        return filename[len(_ROOT) + 1 :].split("/", 1)[0].removesuffix(".py")
    if filename.startswith(_STDLIB):
        return "stdlib"
    if filename.startswith("<frozen importlib"):
        return "importlib (imports while running)"
    return filename


def _plumbing(filename: str) -> bool:
    return filename.startswith((_STDLIB, "<frozen "))


def _where(frame: FrameType) -> str:
    code = frame.f_code
    filename = code.co_filename
    short = filename.split("site-packages/", 1)[-1].removeprefix(_ROOT + "/")
    short = short.replace(_STDLIB, "stdlib")
    return f"{code.co_qualname} ({short}:{code.co_firstlineno})"


def thread_group(name: str) -> str:
    """A thread's name without its numbers: ThreadPoolExecutor-3_12 -> ThreadPoolExecutor-N_N."""
    return re.sub(r"\d+", "N", name)


class CpuProfile:
    """CPU-weighted stack samples of every thread of this process (see the module's text)."""

    def __init__(self, period_s: float = 0.2) -> None:
        self.period_s = period_s
        self.self_s: dict[str, float] = {}
        self.cumulative_s: dict[str, float] = {}
        self.package_s: dict[str, float] = {}
        self.thread_s: dict[str, float] = {}
        self.total_s = 0.0
        self.most_threads = 0
        self._last: dict[int, float] = {}
        self._last_process = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-profiler", daemon=True)
        self._process_cpu_at_start = 0.0

    def start(self) -> CpuProfile:
        self._process_cpu_at_start = time.process_time()  # imports and start-up: not sampled
        self._last_process = self._process_cpu_at_start
        self._last = _thread_cpu()
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the figures (seconds), the largest first."""
        self._stop.set()
        self._thread.join()
        self._tick()

        def top(values: dict[str, float]) -> list[list[Any]]:
            ordered = sorted(values.items(), key=lambda kv: -kv[1])[:TOP]
            return [[k, round(v, 2)] for k, v in ordered if v >= 0.01]

        return {
            "period_s": self.period_s,
            "cpu_s": round(self.total_s, 2),
            "cpu_before_profile_s": round(self._process_cpu_at_start, 2),
            "most_threads": self.most_threads,
            "by_self": top(self.self_s),
            "by_cumulative": top(self.cumulative_s),
            "by_package": top(self.package_s),
            "by_thread": top(self.thread_s),
        }

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._tick()

    def _tick(self) -> None:
        now = _thread_cpu()
        process = time.process_time()
        self.most_threads = max(self.most_threads, len(now))
        frames = sys._current_frames()
        names = {t.ident: t.name for t in threading.enumerate()}
        charged = 0.0
        for ident, cpu in now.items():
            used = cpu - self._last.get(ident, 0.0)
            frame = frames.get(ident)
            if used <= 0 or frame is None:
                continue
            charged += used
            _add(self.thread_s, thread_group(names.get(ident, "?")), used)
            _add(self.self_s, _where(frame), used)
            _add(self.package_s, package_of(frame.f_code.co_filename), used)
            seen: set[str] = set()
            walk: FrameType | None = frame
            while walk is not None:
                where = _where(walk)
                # the cumulative view names our code and the libraries', not the plumbing that
                # is on every stack (threads, event loops, the import machinery)
                if where not in seen and not _plumbing(walk.f_code.co_filename):
                    seen.add(where)
                    _add(self.cumulative_s, where, used)
                walk = walk.f_back
        other = process - self._last_process - charged
        if other > 0:
            for into in (self.thread_s, self.self_s, self.package_s):
                _add(into, OTHER, other)
        self.total_s += max(0.0, process - self._last_process)
        self._last, self._last_process = now, process


def _add(into: dict[str, float], key: str, value: float) -> None:
    into[key] = into.get(key, 0.0) + value
