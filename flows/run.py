"""The command users type: `python flows/run.py <command> [options]`.

A door into the command line, which lives in cli/ (flows/ holds the Prefect flows only).
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

_finished: list[int] = []  # the exit code, once the command has finished


def _exit_without_teardown() -> None:
    """The last exit handler (registered first): every other one has run (Prefect's queues are
    drained, log files closed); skip tearing down the interpreter's ~1,700 modules, which took
    0.5-1 s after the last line, a third of a no-op `up`. Not registered under a wrapper that has
    exit handlers of its own (a coverage or profiling run): theirs must run, after ours."""
    if _finished:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_finished[0])


if __name__ == "__main__":
    if not getattr(atexit, "_ncallbacks", lambda: 1)():
        atexit.register(_exit_without_teardown)
    # Run as a script, sys.path[0] is flows/, not the repository: the project's packages would
    # not import, and every flows/*.py would shadow a top-level module of its name. Drop it.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    from cli.main import drop_event_loop_noise, main

    sys.unraisablehook = drop_event_loop_noise
    try:
        code = main()
    except BrokenPipeError:  # output piped into `head` and the like
        code = 0
    _finished.append(code)
    sys.exit(code)
