"""The git commands GitOps needs, and nothing else: ask a remote for its branches' commits
(`git ls-remote`: no clone, no fetch), keep a bare mirror per repository in this machine's state
folder, fetch one commit into it, and export that commit's files into a folder of their own.

git runs with an environment of its own: none of stackflow's settings or other clients'
credentials (`stackflow.processes.clean_environment`), never a terminal prompt, and the token of
the team's credentials block, when there is one, as an HTTP header passed through git's
GIT_CONFIG_* variables: never in a URL, an argument or a log line. Whatever git prints is masked
before it reaches an error.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stackflow.errors import SettingsError, StackflowError
from stackflow.gitops.tree import (
    MAX_EXPORT_BYTES,
    MAX_EXPORT_FILES,
    CommitRefused,
    Entry,
    check_exported,
    check_required,
    check_tree,
    parse_tree,
)
from stackflow.processes import clean_environment, folder_lock
from stackflow.redact import Redactor

GIT_TIMEOUT_S = 120.0
EXPORTED = ".stackflow-exported"  # the commit an exported folder holds, written by export_commit
_SHA_LEN = 40


class GitError(StackflowError):
    """A git command failed: names the repository (masked) and what git said (masked)."""


class BranchNotFound(GitError, LookupError):
    """The remote has no such branch."""


class UncommittedChanges(SettingsError):
    """A run that must deploy an exact commit was started from a checkout with edits."""


@dataclass(frozen=True)
class Git:
    """git for one repository, with the credentials (if any) it is fetched with.

    Args:
        repository: what `git` fetches (a URL or a path); never holds credentials (the settings
            refuse one that does).
        token: an HTTPS token from the team's credentials block, sent as a header.
    """

    repository: str
    token: str | None = field(default=None, repr=False)

    @property
    def redactor(self) -> Redactor:
        return Redactor([self.token] if self.token else [])

    def _environment(self) -> dict[str, str]:
        extra = {
            "GIT_TERMINAL_PROMPT": "0",  # a missing credential fails, never waits on a prompt
            "GIT_ASKPASS": "true",
            "GCM_INTERACTIVE": "never",
            "LC_ALL": "C",  # git's words in errors, whatever the worker's locale
            # who writes the notes (stackflow.gitops.notes): the only commits a worker makes
            "GIT_AUTHOR_NAME": "stackflow",
            "GIT_AUTHOR_EMAIL": "stackflow@localhost",
            "GIT_COMMITTER_NAME": "stackflow",
            "GIT_COMMITTER_EMAIL": "stackflow@localhost",
        }
        if self.token:
            basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
            extra |= {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
            }
        return clean_environment(extra)

    def run(
        self, args: Sequence[str], cwd: Path | None = None, what: str = "", given: bytes = b""
    ) -> bytes:
        """Run one git command (`given` on its standard input); its standard output.

        Raises:
            GitError: git failed or took longer than GIT_TIMEOUT_S; names what it was doing.
        """
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=cwd,
                env=self._environment(),
                input=given,
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GitError(
                f"git took over {GIT_TIMEOUT_S:.0f}s {what or 'to answer'} for {self.repository}"
            ) from None
        except FileNotFoundError:
            raise GitError("git is not installed on this worker: install git") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            detail = self.redactor(" ".join(said[-3:]) or f"exit code {done.returncode}")
            raise GitError(f"git could not {what or 'run'} {self.repository}: {detail}")
        return done.stdout

    def branches(self) -> dict[str, str]:
        """Every branch of the remote and its commit (one `git ls-remote --heads`)."""
        out = self.run(["ls-remote", "--heads", "--", self.repository], what="list the branches of")
        heads: dict[str, str] = {}
        for line in out.decode(errors="replace").splitlines():
            sha, _, ref = line.partition("\t")
            if len(sha) == _SHA_LEN and ref.startswith("refs/heads/"):
                heads[ref.removeprefix("refs/heads/")] = sha
        return heads

    def head_of(self, branch: str) -> str:
        """The commit `branch` points at on the remote.

        Raises:
            BranchNotFound: the remote has no such branch (names the branches it has, a few).
            GitError: the remote did not answer.
        """
        heads = self.branches()
        if branch in heads:
            return heads[branch]
        some = ", ".join(sorted(heads)[:8]) or "none"
        raise BranchNotFound(f"{self.repository} has no branch {branch!r} (branches: {some})")


def mirror_folder(mirrors: Path, repository: str) -> Path:
    """The bare mirror of `repository` under `mirrors` (one per repository, by a hash of it)."""
    return mirrors / (hashlib.sha256(repository.encode()).hexdigest()[:16] + ".git")


def export_commit(
    git: Git,
    mirrors: Path,
    commit: str,
    dest: Path,
    *,
    required: Sequence[str] = (),
    max_files: int = MAX_EXPORT_FILES,
    max_bytes: int = MAX_EXPORT_BYTES,
) -> Path:
    """The files of `commit` in `dest` (made once per commit; kept as the cache of that commit).

    The commit is fetched into this machine's bare mirror of the repository (only what is
    missing), its tree is listed and checked (`stackflow.gitops.tree`: no submodule, no link
    that is absolute or leaves it, not too large, the `required` files present), then it is
    exported with `git archive` into a file and unpacked: a plain folder, no .git, nothing of the
    worker's own checkout.

    Raises:
        CommitRefused: the commit holds what a worker does not export (named); nothing was made.
        GitError: the commit cannot be fetched (gone from the remote, or the remote is down).
    """
    if len(commit) != _SHA_LEN or any(c not in "0123456789abcdef" for c in commit):
        raise GitError(f"{commit!r} is not a full commit id")
    done = dest / EXPORTED
    if done.is_file():
        return dest
    mirror = mirror_folder(mirrors, git.repository)
    mirrors.mkdir(parents=True, exist_ok=True)
    staging = dest.with_name(dest.name + ".partial")
    archive = dest.with_name(dest.name + ".tar")
    for path in (staging, archive):
        _remove(path)
    with folder_lock(mirrors, f".{mirror.name}.lock"):  # one fetch per repository at a time
        if not (mirror / "HEAD").is_file():
            git.run(["init", "--bare", "--quiet", str(mirror)], what="make a mirror for")
        present = subprocess.run(
            ["git", "-C", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}"],
            capture_output=True,
            env=clean_environment({"LC_ALL": "C"}),
            check=False,
        )
        if present.returncode != 0:
            git.run(
                ["-C", str(mirror), "fetch", "--quiet", "--no-tags", "--", git.repository, commit],
                what=f"fetch commit {commit[:12]} of",
            )
        entries = parse_tree(
            git.run(["-C", str(mirror), "ls-tree", "-r", "-l", "-z", commit], what="list")
        )
        check_tree(commit, entries, _link_targets(git, mirror, entries), max_files, max_bytes)
        check_required(commit, entries, required)
        dest.parent.mkdir(parents=True, exist_ok=True)
        git.run(
            ["-C", str(mirror), "archive", "--format=tar", "-o", str(archive), commit],
            what="export",
        )
    try:
        staging.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")  # no links out, no devices, no absolute paths
        check_exported(commit, staging)
    except tarfile.TarError as exc:
        _remove(staging)
        raise CommitRefused(
            f"commit {commit[:12]} is refused: its files cannot be unpacked here ({exc}). Nothing was run."
        ) from None
    except CommitRefused:
        _remove(staging)
        raise
    finally:
        _remove(archive)
    (staging / EXPORTED).write_text(commit + "\n")
    if dest.exists():
        _remove(dest)
    staging.rename(dest)
    return dest


def _link_targets(git: Git, mirror: Path, entries: list[Entry]) -> dict[str, str]:
    """path -> target of each symbolic link in `entries` (one `git cat-file --batch`)."""
    links = [e for e in entries if e.is_link]
    if not links:
        return {}
    out = git.run(
        ["-C", str(mirror), "cat-file", "--batch"],
        what="read links of",
        given="".join(f"{e.object_id}\n" for e in links).encode(),
    )
    targets, at = {}, 0
    for entry in links:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        start = header_end + 1
        targets[entry.path] = out[start : start + size].decode(errors="replace")
        at = start + size + 1  # the content, then a newline
    return targets


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def masked_repository(repository: str) -> str:
    """A repository as reports show it (a URL's user part dropped)."""
    from stackflow.backends import mask_url

    return mask_url(repository) if "://" in repository else repository


def read_git(project_dir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run a read-only git command in `project_dir` (no lock taken, a clean environment).

    Raises:
        OSError, subprocess.TimeoutExpired: git could not run, or did not answer in 30 s.
    """
    env = clean_environment({"LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"})
    return subprocess.run(
        ["git", *args], cwd=project_dir, capture_output=True, env=env, timeout=30, check=False
    )


def _local(project_dir: Path, *args: str) -> bytes | None:
    """What git says of the checkout at `project_dir`, or None when it is not a checkout or git
    fails."""
    try:
        done = read_git(project_dir, *args)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def project_commit(project_dir: Path) -> str | None:
    """The commit the project at `project_dir` is: the one a sync exported there, else its git
    checkout's HEAD, with "-dirty" when tracked files differ from it; None outside git."""
    marker = project_dir / EXPORTED
    if marker.is_file():
        return marker.read_text().strip() or None
    head = _local(project_dir, "rev-parse", "--verify", "-q", "HEAD")
    sha = head.decode().strip() if head else ""
    if not sha:
        return None
    dirty = _local(project_dir, "status", "--porcelain", "--untracked-files=no")
    return sha + ("-dirty" if dirty and dirty.strip() else "")


def changed_files(project_dir: Path) -> list[str] | None:
    """The project's files that differ from its checkout's HEAD: edited, staged, deleted or new
    (ignored files aside); None outside git, or for a folder a sync exported (an exact commit)."""
    if (project_dir / EXPORTED).is_file():
        return []
    out = _local(project_dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", ".")
    if out is None:
        return None
    found, skip = [], False
    for record in out.split(b"\0"):
        if skip:  # a rename's second path (its origin)
            skip = False
            continue
        if len(record) > 3:
            found.append(record[3:].decode(errors="replace"))
            skip = record[:1] in (b"R", b"C")
    return sorted(found)


def check_exact_commit(project_dir: Path, environment: str, why: str) -> None:
    """Refuse to run `environment` from a checkout with uncommitted edits (naming them).

    Args:
        why: why it must be an exact commit ("a protected environment").

    Raises:
        UncommittedChanges: naming up to ten changed files and what to do.
    """
    changed = changed_files(project_dir)
    if not changed:
        return
    shown = ", ".join(changed[:10]) + (
        f" and {len(changed) - 10} more" if len(changed) > 10 else ""
    )
    raise UncommittedChanges(
        f"{environment} is {why}: it deploys an exact commit, and this checkout ({project_dir}) "
        f"has uncommitted changes: {shown}. Commit them (or stash them) and run again; nothing "
        "was changed."
    )
