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
import io
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stackflow.errors import StackflowError
from stackflow.processes import clean_environment, folder_lock
from stackflow.redact import Redactor

GIT_TIMEOUT_S = 120.0
EXPORTED = ".stackflow-exported"  # the commit an exported folder holds, written by export_commit
_SHA_LEN = 40


class GitError(StackflowError):
    """A git command failed: names the repository (masked) and what git said (masked)."""


class BranchNotFound(GitError, LookupError):
    """The remote has no such branch."""


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
        }
        if self.token:
            basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
            extra |= {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
            }
        return clean_environment(extra)

    def run(self, args: Sequence[str], cwd: Path | None = None, what: str = "") -> bytes:
        """Run one git command; its standard output.

        Raises:
            GitError: git failed or took longer than GIT_TIMEOUT_S; names what it was doing.
        """
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=cwd,
                env=self._environment(),
                stdin=subprocess.DEVNULL,
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


def export_commit(git: Git, mirrors: Path, commit: str, dest: Path) -> Path:
    """The files of `commit` in `dest` (made once per commit; kept as the cache of that commit).

    The commit is fetched into this machine's bare mirror of the repository (only what is
    missing), then exported with `git archive`: a plain folder, no .git, nothing of the worker's
    own checkout.

    Raises:
        GitError: the commit cannot be fetched (gone from the remote, or the remote is down).
    """
    if len(commit) != _SHA_LEN or any(c not in "0123456789abcdef" for c in commit):
        raise GitError(f"{commit!r} is not a full commit id")
    done = dest / EXPORTED
    if done.is_file():
        return dest
    mirror = mirror_folder(mirrors, git.repository)
    mirrors.mkdir(parents=True, exist_ok=True)
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
        archive = git.run(["-C", str(mirror), "archive", "--format=tar", commit], what="export")
    staging = dest.with_name(dest.name + ".partial")
    if staging.exists():
        _remove(staging)
    staging.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(staging, filter="data")  # no links out, no devices, no absolute paths
    (staging / EXPORTED).write_text(commit + "\n")
    if dest.exists():
        _remove(dest)
    staging.rename(dest)
    return dest


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def masked_repository(repository: str) -> str:
    """A repository as reports show it (a URL's user part dropped)."""
    from stackflow.backends import mask_url

    return mask_url(repository) if "://" in repository else repository


def project_commit(project_dir: Path) -> str | None:
    """The commit the project at `project_dir` is: the one a sync exported there, else its git
    checkout's HEAD, with "-dirty" when tracked files differ from it; None outside git."""
    marker = project_dir / EXPORTED
    if marker.is_file():
        return marker.read_text().strip() or None
    env = clean_environment({"LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"})
    try:
        head = subprocess.run(
            ["git", "-C", str(project_dir), "rev-parse", "--verify", "-q", "HEAD"],
            capture_output=True,
            env=env,
            timeout=10,
            check=False,
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(project_dir), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            env=env,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = head.stdout.decode().strip()
    return sha + ("-dirty" if dirty.stdout.strip() else "") if sha else None
