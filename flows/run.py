"""The command users type: `python flows/run.py <command> [options]`.

A door into the command line, which lives in cli/ (flows/ holds the Prefect flows only).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, sys.path[0] is flows/, not the repository: flows/pipeline.py would then
    # shadow the `pipeline` package (the graph) and flows/*.py every top-level name. Drop it.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    from cli.main import drop_event_loop_noise, main

    sys.unraisablehook = drop_event_loop_noise
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head` and the like
        sys.exit(0)
