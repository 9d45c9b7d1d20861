"""Where the allowed signers come from: a trusted place, never the commit being deployed nor the
working tree. Either a file an administrator keeps on the machine (an absolute path), or a file
on a git ref of the project's repository (`refs/heads/main:.stackflow/allowed_signers`), read with
`git show`: a change under review cannot move that ref by itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

from stackflow.config.approval import SignersSource, parse_source
from stackflow.errors import SettingsError

MAX_BYTES = 1_000_000  # a signers file of a thousand teams fits; more is not one


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
    from stackflow.gitops.git import read_git

    try:
        done = read_git(project_dir, "show", f"{source.ref}:{source.ref_path}", "--")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SettingsError(f"{shown}: git could not read {source} ({exc})") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.decode(errors="replace").split())[:300]
        raise SettingsError(
            f"{shown}: {source} cannot be read from the repository at {project_dir} ({said})"
        )
    return done.stdout
