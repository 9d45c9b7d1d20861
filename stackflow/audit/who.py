"""Who an audit entry names, and where it was written.

    the command line           the OS user, "command line"            (unverified: what the OS says)
    a sync's run of a commit   the commit's author, "sync of <commit>" (unverified: git's author line)
    a deployment's run         "unknown", the deployment and what started it: a self-hosted
                               Prefect server records no user for a run started in its UI
    an approval                who answered: the OS user at the command line, "unknown" in the UI

Every entry also names the host that wrote it. `signer` and `verified` are for signed approvals:
the holder of the key whose signature was checked; until one is checked they are None and False.
"""

from __future__ import annotations

import getpass
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stackflow.gitops.git import Git

UNKNOWN = "unknown"
AUTHOR_FILE = ".stackflow-author"  # in a sync's exported commit: who authored it (git's word)


@dataclass(frozen=True)
class Actor:
    """Who did or decided something, through what, on which machine.

    Attributes:
        name: an OS user, a commit's author ("Ana <ana@example.com>"), or "unknown".
        via: the door: "command line", "sync of <commit>", "deployment deploy/prod (...)".
        host: the machine that wrote the entry.
        signer: the holder of a verified signature's key (signed approvals); None until checked.
        verified: whether `signer` was checked against the repository's allowed signers.
    """

    name: str
    via: str
    host: str
    signer: str | None = None
    verified: bool = False

    def fields(self) -> dict[str, Any]:
        """The actor's fields of an audit entry."""
        return {
            "actor": self.name,
            "via": self.via,
            "host": self.host,
            "signer": self.signer,
            "verified": self.verified,
        }


def os_user() -> str:
    """The OS user this process runs as ("unknown" without a passwd entry, as in some
    containers)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return UNKNOWN


def current_actor(project_dir: Path | None = None) -> Actor:
    """Who acts through this process: a sync's run (its project is an exported commit with its
    author noted), a deployment's flow run, or the command line."""
    host = socket.gethostname()
    author = authored(project_dir) if project_dir is not None else None
    if author is not None:
        return author
    door = _deployment_door()
    if door is not None:
        return Actor(UNKNOWN, door, host)
    return Actor(os_user(), "command line", host)


def decider(channel: str) -> Actor:
    """Who answered an approval, from how it was answered (`flows.approval.Decision.via`):
    "command line (user@host)" names them; the Prefect UI or API does not."""
    host = socket.gethostname()
    if channel.startswith("command line") and channel.endswith(")") and "(" in channel:
        door, _, who = channel[:-1].partition(" (")
        user, _, where = who.rpartition("@")
        return Actor(user or who, door, where or host)
    return Actor(UNKNOWN, channel, host)


def _deployment_door() -> str | None:
    """How the current flow run was started when a deployment's (None: not a deployment run)."""
    if "prefect" not in sys.modules:  # not imported: in no flow run (and not paid for here)
        return None
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is None or run.deployment_id is None:
        return None
    name = run.name or str(run.id)
    if run.created_by is not None and run.created_by.type == "AUTOMATION":
        how = f"automation {run.created_by.display_value}"
    elif run.auto_scheduled:
        how = "its schedule"
    else:
        how = "the Prefect UI or API"
    return f"deployment run {name} (started by {how})"


def note_author(git: Git, mirrors: Path, checkout: Path, commit: str) -> None:
    """Write `commit`'s author (git's "Name <email>") into its exported `checkout`, for the run
    that deploys it to name. Best effort: a commit whose author cannot be read is left unnamed."""
    from stackflow.gitops.git import GitError, mirror_folder

    mirror = mirror_folder(mirrors, git.repository)
    try:
        text = git.run(
            ["-C", str(mirror), "show", "-s", "--format=%an <%ae>", commit], what="read the author"
        )
    except GitError:
        return
    author = " ".join(text.decode(errors="replace").split())[:200]
    if author:
        (checkout / AUTHOR_FILE).write_text(f"{commit}\n{author}\n")


def authored(checkout: Path) -> Actor | None:
    """The author of the commit a sync exported into `checkout`, as the actor of what is done
    with it (unverified: git's author line is whatever its writer put there)."""
    noted = commit_author(checkout)
    if noted is None:
        return None
    commit, author = noted
    return Actor(author, f"sync of commit {commit[:12]} (its author)", socket.gethostname())


def commit_author(project_dir: Path) -> tuple[str, str] | None:
    """(commit, author) when `project_dir` is a sync's export of a commit whose author was
    noted; None otherwise."""
    from stackflow.gitops.git import EXPORTED

    if not (project_dir / EXPORTED).is_file():
        return None
    try:
        commit, author = (project_dir / AUTHOR_FILE).read_text().splitlines()[:2]
    except (OSError, ValueError):
        return None
    return (commit, author) if commit and author else None
