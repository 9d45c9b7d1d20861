"""What goes back and forth between a repository and the workers, without servers: real git
repositories made here. A commit's note under refs/notes/stackflow gets one line per environment
(replaced, never duplicated), two workers' notes both reach the repository, and a repository that
refuses the push names why; the shipped post-receive hook turns git's lines into one Prefect event
per branch (tags skipped, deletions their own event) and never shows a password."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from stackflow.gitops.git import Git, GitError, export_commit
from stackflow.gitops.notes import NOTES_REF, NoteLine, merged, write_note
from tests.realenv import ROOT, git

pytestmark = pytest.mark.unit
HOOK = ROOT / "scripts" / "git_hooks" / "post_receive.py"


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, str]:
    """A bare repository with one commit on main (pushed from a working copy), and that commit."""
    bare, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(tmp_path, "clone", "-q", str(bare), str(work))
    (work / "README.md").write_text("hello\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")
    git(work, "push", "-q", "origin", "main")
    return bare, git(work, "rev-parse", "HEAD")


def fetched(bare: Path, commit: str, mirrors: Path) -> Git:
    """A worker that fetched `commit` into its mirror, as a sync does before it notes it."""
    repo = Git(str(bare))
    export_commit(repo, mirrors, commit, mirrors.parent / "checkout")
    return repo


def note_in(bare: Path, commit: str) -> str:
    return git(bare, "notes", f"--ref={NOTES_REF}", "show", commit)


def test_a_note_has_one_line_per_environment_replaced_in_place() -> None:
    first = merged("", NoteLine("staging", "failed", message="exit code 1\nand more", at=0))
    assert first == "staging: failed 1970-01-01T00:00Z (exit code 1 and more)\n"
    both = merged(first, NoteLine("prod", "deployed", run="http://p/runs/1", at=60))
    healed = merged(both, NoteLine("staging", "deployed", url="http://app", run="http://p/r", at=0))
    assert healed.splitlines() == [
        "staging: deployed 1970-01-01T00:00Z url http://app run http://p/r",
        "prod: deployed 1970-01-01T00:01Z run http://p/runs/1",
    ]
    long = NoteLine("dev", "refused", message="x" * 500).text()
    assert long.endswith("…)") and len(long) < 260  # a line names why, it holds no log


def test_two_workers_notes_both_reach_the_repository(
    origin: tuple[Path, str], tmp_path: Path
) -> None:
    """Each worker starts from the repository's notes, so neither overwrites the other's line;
    `git log --notes=stackflow` in the repository shows both."""
    bare, commit = origin
    one = fetched(bare, commit, tmp_path / "w1" / "mirrors")
    two = fetched(bare, commit, tmp_path / "w2" / "mirrors")
    write_note(one, tmp_path / "w1" / "mirrors", commit, NoteLine("staging", "deployed", at=0))
    write_note(two, tmp_path / "w2" / "mirrors", commit, NoteLine("prod", "refused", at=0))
    write_note(one, tmp_path / "w1" / "mirrors", commit, NoteLine("staging", "failed", at=0))
    assert note_in(bare, commit).splitlines() == [
        "staging: failed 1970-01-01T00:00Z",
        "prod: refused 1970-01-01T00:00Z",
    ]
    shown = git(bare, "log", "--notes=stackflow", "-1", "main")
    assert "Notes (stackflow):" in shown and "prod: refused" in shown


def test_a_repository_that_refuses_the_push_is_named_and_nothing_else_changes(
    origin: tuple[Path, str], tmp_path: Path
) -> None:
    bare, commit = origin
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'this worker may not push here' >&2\nexit 1\n")
    hook.chmod(0o755)
    repo = fetched(bare, commit, tmp_path / "mirrors")
    with pytest.raises(GitError) as caught:
        write_note(repo, tmp_path / "mirrors", commit, NoteLine("dev", "deployed"))
    assert "could not push the notes to" in str(caught.value)
    assert "pre-receive hook declined" in str(caught.value)
    refs = git(bare, "for-each-ref", "refs/notes")
    assert refs == ""  # the repository is as it was


def _hook_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("post_receive", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hook_makes_one_event_per_branch_and_shows_no_password() -> None:
    hook = _hook_module()
    zero, a, b = "0" * 40, "a" * 40, "b" * 40
    events = hook.events_for(
        [(a, b, "refs/heads/main"), (zero, a, "refs/tags/v1"), (a, zero, "refs/heads/pr/7")],
        "platform",
    )
    assert [(e["event"], e["resource"]["stackflow.branch"]) for e in events] == [
        ("stackflow.git.pushed", "main"),
        ("stackflow.git.deleted", "pr/7"),
    ]
    assert events[0]["payload"] == {
        "branch": "main",
        "repository": "platform",
        "commit": b,
        "before": a,
    }
    assert events[1]["payload"]["commit"] is None
    assert (
        hook.shown("http://team:s3cret@prefect.internal:4200/api") == "http://prefect.internal/api"
    )


def test_the_hook_never_fails_a_push_when_prefect_is_unreachable(tmp_path: Path) -> None:
    """As git runs it: lines on stdin, a server that is not there; it says so and exits 0."""
    from stackflow.processes import free_port

    url = f"http://user:s3cret@127.0.0.1:{free_port()}/api"
    done = subprocess.run(
        [sys.executable, str(HOOK)],
        input=f"{'0' * 40} {'a' * 40} refs/heads/main\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PREFECT_API_URL": url, "HOME": str(tmp_path)},
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "did not take the push of main" in done.stdout, done.stdout
    assert "s3cret" not in done.stdout + done.stderr
