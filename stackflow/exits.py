"""The command line's exit codes, declared once: `--help`, the README and every command use these.

Scripts and CI branch on them, so a code keeps its meaning across releases.
"""

from __future__ import annotations

OK = 0
FAILED = 1  # a stack or step failed, or an operation could not complete
USAGE = 2  # refused input: a bad flag, setting, name or file; a protected operation without --yes;
# a mandatory policy's violation (the change is refused before anything is applied)
DRIFT = 3  # `drift` found stacks whose cloud resources differ from their state
REJECTED = 4  # an approval was rejected or timed out: nothing was applied
BUG = 70  # an unexpected error inside stackflow (a traceback is printed: please report it)
INTERRUPTED = 130  # Ctrl-C: running operations were cancelled
TERMINATED = 143  # SIGTERM (kill, a container stop): cancelled as by Ctrl-C

MEANINGS: dict[int, str] = {
    OK: "success",
    FAILED: "a stack or step failed",
    USAGE: "refused input (bad flag, setting, name or file; protected operation without --yes; "
    "a mandatory policy violated)",
    DRIFT: "drift found",
    REJECTED: "approval rejected or timed out (nothing applied)",
    BUG: "unexpected error in stackflow (a bug: the traceback says where)",
    INTERRUPTED: "interrupted (Ctrl-C)",
    TERMINATED: "terminated (SIGTERM): operations cancelled, the flow run Cancelled",
}


def help_text() -> str:
    """The exit codes as `--help` prints them."""
    return "exit codes:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in MEANINGS.items())
