"""The command users type: `python flows/run.py <command> [options]`.

A door into the command line, which lives in cli/ (flows/ holds the Prefect flows only).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # run as a script, sys.path[0] is flows/, not the repository
        sys.path.insert(0, root)
    from cli.main import drop_event_loop_noise, main

    sys.unraisablehook = drop_event_loop_noise
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head` and the like
        sys.exit(0)
