"""Whether a commit can run on this worker: the project's locked dependencies (constraints.txt,
`name==version` lines) at that commit against the lock this worker was set up from (its own
checkout's constraints.txt, which scripts/setup.sh installs). A commit that pins another version
of anything is refused by name: its code never runs on packages it was not locked with."""

from __future__ import annotations

import re
from pathlib import Path

from stackflow.errors import SettingsError

LOCK_FILE = "constraints.txt"
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


class LockedDependenciesDiffer(SettingsError):
    """The commit locks other package versions than this worker has installed."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def pins(lock_file: Path) -> dict[str, str]:
    """name -> version of every `name==version` line (comments, hashes and markers ignored)."""
    found: dict[str, str] = {}
    for line in lock_file.read_text(errors="replace").splitlines():
        match = _PIN.match(line)
        if match:
            found[_normal(match.group(1))] = match.group(2)
    return found


def check_locked(checkout: Path, worker_root: Path, commit: str) -> None:
    """Refuse `commit` (exported in `checkout`) when it locks other dependencies than the worker's
    own checkout (`worker_root`) does.

    Raises:
        LockedDependenciesDiffer: naming each package, the commit's pin and the worker's.
    """
    lock = checkout / LOCK_FILE
    if not lock.is_file():
        raise LockedDependenciesDiffer(
            f"commit {commit[:12]} has no {LOCK_FILE}: its dependencies are not locked, so this "
            "worker cannot know it runs them. Commit the lock file; nothing was run."
        )
    wanted, ours = pins(lock), pins(worker_root / LOCK_FILE)
    differ = [
        f"{name} {wanted.get(name) or 'not locked'} (this worker: {ours.get(name) or 'not locked'})"
        for name in sorted(set(wanted) | set(ours))
        if wanted.get(name) != ours.get(name)
    ]
    if differ:
        raise LockedDependenciesDiffer(
            f"commit {commit[:12]} locks other dependencies than this worker was set up with: "
            + "; ".join(differ[:12])
            + (f"; and {len(differ) - 12} more" if len(differ) > 12 else "")
            + f". Set the workers up from the commit's {LOCK_FILE} (scripts/setup.sh in a "
            "checkout of it), or revert the change; nothing was run."
        )
