"""Where each commit runs, told back to the repository: a git note per commit under
`refs/notes/stackflow`, one line per environment that synced it (its result, when, the run, the
URL of a review environment), so `git log --notes=stackflow` shows it beside the commit.

A note is written in this machine's bare mirror of the repository (the commit is there: the sync
fetched it) and pushed. The repository's notes are the truth: each write starts from the notes
the remote has now, replaces this environment's line and pushes; a push that loses a race with
another worker's starts again from the remote's (a few times). A worker that may not push gets
git's words back, masked, and nothing else changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from stackflow.gitops.git import Git, GitError, mirror_folder
from stackflow.processes import folder_lock

NOTES_REF = "refs/notes/stackflow"
_FETCHED = "refs/stackflow-fetched-notes"  # the remote's notes, as last fetched
PUSH_TRIES = 3
MESSAGE_CHARS = 200  # a note line names why, it does not hold a log


@dataclass(frozen=True)
class NoteLine:
    """What one environment's sync of a commit came to, as its line in the commit's note."""

    environment: str
    result: str  # "deployed", or a sync result word (refused, failed, rejected, ...)
    run: str | None = None  # the run's page in the Prefect UI
    url: str | None = None  # a review environment's URL
    message: str = ""
    at: float | None = None

    def text(self) -> str:
        when = time.strftime(
            "%Y-%m-%dT%H:%MZ", time.gmtime(time.time() if self.at is None else self.at)
        )
        parts = [f"{self.environment}: {self.result} {when}"]
        if self.url:
            parts.append(f"url {self.url}")
        if self.run:
            parts.append(f"run {self.run}")
        why = " ".join(self.message.split())
        if why and self.result != "deployed":
            cut = why if len(why) <= MESSAGE_CHARS else why[: MESSAGE_CHARS - 1] + "…"
            parts.append(f"({cut})")
        return " ".join(parts)


def merged(note: str, line: NoteLine) -> str:
    """The note with `line` as its environment's line (replacing an earlier one in place)."""
    prefix = f"{line.environment}: "
    lines = [x for x in note.splitlines() if x.strip()]
    at = next((i for i, x in enumerate(lines) if x.startswith(prefix)), None)
    if at is None:
        lines.append(line.text())
    else:
        lines[at] = line.text()
    return "\n".join(lines) + "\n"


def write_note(git: Git, mirrors: Path, commit: str, line: NoteLine, push: bool = True) -> None:
    """Put `line` in `commit`'s note under refs/notes/stackflow and push the notes.

    Args:
        mirrors: this machine's folder of bare mirrors (the commit was fetched into one).
        push: False writes the mirror's note only.

    Raises:
        GitError: the notes could not be read, written or pushed (git's words, masked).
    """
    mirror = mirror_folder(mirrors, git.repository)
    with folder_lock(mirrors, f".{mirror.name}.lock"):  # one git at a time per mirror
        for attempt in range(1, PUSH_TRIES + 1):
            if push:
                _start_from_remote(git, mirror)
            try:
                note = git.run(
                    ["-C", str(mirror), "notes", f"--ref={NOTES_REF}", "show", commit],
                    what="read the note of",
                ).decode(errors="replace")
            except GitError:
                note = ""  # no note on this commit yet
            git.run(
                ["-C", str(mirror), "notes", f"--ref={NOTES_REF}", "add", "-f", "-F", "-", commit],
                what="write a note in",
                given=merged(note, line).encode(),
            )
            if not push:
                return
            try:
                git.run(
                    ["-C", str(mirror), "push", "--quiet", "--", git.repository, NOTES_REF],
                    what="push the notes to",
                )
                return
            except GitError as exc:
                lost_race = any(w in str(exc) for w in ("fetch first", "non-fast-forward"))
                if not lost_race or attempt == PUSH_TRIES:
                    raise


def _start_from_remote(git: Git, mirror: Path) -> None:
    """Set the mirror's notes to the remote's (none on the remote: none here)."""
    git.run(
        [
            "-C",
            str(mirror),
            "fetch",
            "--quiet",
            "--no-tags",
            "--prune",
            "--",
            git.repository,
            f"+refs/notes/*:{_FETCHED}/*",
        ],
        what="fetch the notes of",
    )
    fetched = f"{_FETCHED}/{NOTES_REF.removeprefix('refs/notes/')}"
    try:
        tip = git.run(["-C", str(mirror), "rev-parse", "--verify", "-q", fetched]).strip()
    except GitError:
        tip = b""
    if tip:
        git.run(["-C", str(mirror), "update-ref", NOTES_REF, tip.decode()])
    else:
        git.run(["-C", str(mirror), "update-ref", "-d", NOTES_REF])
