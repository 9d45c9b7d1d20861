"""Where the allowed signers come from: a trusted place, never the commit being deployed nor the
working tree. Either a file an administrator keeps on the machine (an absolute path), or a file
on a git ref of the project's repository (`refs/heads/main:.stackflow/allowed_signers`), read with
`git show`: a change under review cannot move that ref by itself."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from stackflow.errors import SettingsError
from stackflow.processes import clean_environment

ACCEPTED = (
    "an absolute path to a file on this machine (/etc/stackflow/allowed_signers), or "
    "<ref>:<path> naming a file on a git ref of the project's repository "
    "(refs/heads/main:.stackflow/allowed_signers)"
)
_REF_RE = re.compile(r"^refs/[A-Za-z0-9._/-]{1,200}$")
MAX_BYTES = 1_000_000  # a signers file of a thousand teams fits; more is not one


@dataclass(frozen=True)
class SignersSource:
    """A parsed `allowed_signers` setting: a machine path, or a ref and a path in it."""

    path: Path | None = None
    ref: str | None = None
    ref_path: str | None = None

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else f"{self.ref}:{self.ref_path}"


def parse_source(value: str) -> SignersSource:
    """The source an `allowed_signers` setting names.

    Raises:
        ValueError: neither form, naming what is accepted.
    """
    text = value.strip()
    if text.startswith("refs/") and ":" in text:
        ref, _, path = text.partition(":")
        inner = PurePosixPath(path)
        if (
            _REF_RE.match(ref)
            and ".." not in ref
            and path
            and not inner.is_absolute()
            and ".." not in inner.parts
        ):
            return SignersSource(ref=ref, ref_path=str(inner))
    elif text.startswith("/") and ":" not in text:
        return SignersSource(path=Path(text))
    raise ValueError(f"{text[:80]!r} is not accepted: use {ACCEPTED}")


def read_signers(value: str, project_dir: Path, shown: str) -> bytes:
    """The allowed signers file's content, from where `value` says.

    Args:
        value: the setting (see `parse_source`).
        project_dir: the project whose repository holds the ref (the ref form).
        shown: how errors name the setting (its variable).

    Raises:
        SettingsError: the setting is not accepted, or the file cannot be read or is empty.
    """
    try:
        source = parse_source(value)
    except ValueError as exc:
        raise SettingsError(f"{shown}: {exc}") from None
    if source.path is not None:
        try:
            data = source.path.read_bytes()[: MAX_BYTES + 1]
        except OSError as exc:
            raise SettingsError(
                f"{shown}: the allowed signers file {source.path} cannot be read "
                f"({exc.strerror or exc})"
            ) from None
    else:
        data = _from_ref(source, project_dir, shown)
    if len(data) > MAX_BYTES:
        raise SettingsError(f"{shown}: the allowed signers file {source} is over {MAX_BYTES} bytes")
    if not data.strip():
        raise SettingsError(
            f"{shown}: the allowed signers file {source} is empty: nobody could approve"
        )
    return data


def _from_ref(source: SignersSource, project_dir: Path, shown: str) -> bytes:
    env = clean_environment({"LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"})
    try:
        done = subprocess.run(
            ["git", "show", f"{source.ref}:{source.ref_path}", "--"],
            cwd=project_dir,
            capture_output=True,
            env=env,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SettingsError(f"{shown}: git could not read {source} ({exc})") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.decode(errors="replace").split())[:300]
        raise SettingsError(
            f"{shown}: {source} cannot be read from the repository at {project_dir} ({said})"
        )
    return done.stdout
