"""glibc's malloc arenas in a process that runs flows: two, not eight per core.

glibc gives a thread that allocates under contention an arena of its own, up to eight per core,
and memory freed into one arena is not reused by another. A flow process runs many threads that
allocate (Prefect's API client, its log and event workers, the heartbeat, the engine's gRPC
server for inline programs and its event-stream reader): their arenas kept about 20 MiB resident
that no thread used any more. With two, a first deploy's peak RSS fell from 250 to 229 MiB; the
plain script's, from 183 to 181 (bench/profiles.py, README "Performance").

`limit()` sets it in the running process (the command line calls it before anything starts a
thread); `environment()` is what a worker gives the flow-run processes it starts. A
MALLOC_ARENA_MAX the machine sets itself is left as it is.
"""

from __future__ import annotations

import ctypes
import os

VARIABLE = "MALLOC_ARENA_MAX"  # glibc's own variable, read when a process starts
ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h


def environment() -> dict[str, str]:
    """What a process that runs flows gets in its environment for two arenas."""
    return {VARIABLE: str(ARENAS)}


def limit() -> bool:
    """Limit this process to `ARENAS` arenas from now on; whether it was done (False: not glibc,
    or the machine sets MALLOC_ARENA_MAX itself, which glibc already applied)."""
    if VARIABLE in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: nothing to limit
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return int(mallopt(_M_ARENA_MAX, ARENAS)) == 1
