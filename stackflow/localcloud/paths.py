"""Where the local cloud keeps its files, and the one secret it generates for itself.

Everything lives under the cloud root, `<state_dir>/localcloud`:

    server.json     record of the running cloud server {pid, port, url, root, region}
    server.log      its log
    journal.jsonl   the mutating API calls, replayed at start (secrets sealed)
    knobs.json      latency / fault knobs (owned by the server process)
    passphrase      0600, generated once: local-cloud Pulumi passphrase and journal key
    dataplane/      the data plane's databases, addresses and snapshots
    pulumi-home/    PULUMI_HOME of local-cloud runs
    surveys/        what a survey preview's plugins found unserved (a file per preview, removed
                    once read)
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from stackflow.localcloud.errors import PassphraseFileError
from stackflow.state import StateLayout

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

_JOURNAL_KEY_INFO = b"stackflow local cloud journal key v1"  # fixed: the key must not change


def cloud_root(state_dir: Path) -> Path:
    """The local cloud's folder inside a state folder (named by the state folder's layout)."""
    return StateLayout(state_dir).localcloud


def server_record(root: Path) -> Path:
    return root / "server.json"


def server_log(root: Path) -> Path:
    return root / "server.log"


def journal_path(root: Path) -> Path:
    return root / "journal.jsonl"


def knobs_path(root: Path) -> Path:
    return root / "knobs.json"


def dataplane_dir(root: Path) -> Path:
    return root / "dataplane"


def pulumi_home(root: Path) -> Path:
    return root / "pulumi-home"


def surveys_dir(root: Path) -> Path:
    return root / "surveys"


def passphrase_file(root: Path) -> Path:
    """The file that holds the local cloud's passphrase."""
    return root / "passphrase"


def passphrase(root: Path) -> str:
    """The local cloud's passphrase: generated once (`secrets.token_urlsafe(32)`), kept 0600.

    Concurrent first calls agree on one value: each writes a private temporary file and links it
    into place, which fails for all but the first; nobody ever reads a half-written file.

    Args:
        root: the cloud root (created 0700 if missing).

    Returns:
        The passphrase (never log it).
    """
    path = passphrase_file(root)
    existing = _read_passphrase(path)
    if existing:
        return existing
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = root / f".passphrase.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
            handle.flush()
            os.fsync(handle.fileno())
        # link() refuses an existing target: the first writer wins, atomically, with full content.
        with contextlib.suppress(FileExistsError):
            os.link(staging, path)
    finally:
        staging.unlink(missing_ok=True)
    found = _read_passphrase(path)
    if not found:
        raise PassphraseFileError(_damaged(path, "it is empty"))
    return found


def _read_passphrase(path: Path) -> str | None:
    """The passphrase in `path`; None when there is no such file.

    Raises:
        PassphraseFileError: it cannot be read, or it is not the text this module writes.
    """
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PassphraseFileError(_damaged(path, exc.strerror or type(exc).__name__)) from None
    try:
        found = text.decode("ascii").strip()
    except UnicodeDecodeError:
        raise PassphraseFileError(_damaged(path, "it holds bytes that are not text")) from None
    if found and not _PASSPHRASE.fullmatch(found):
        raise PassphraseFileError(_damaged(path, "it is not a passphrase this project wrote"))
    return found


_PASSPHRASE = re.compile(r"[A-Za-z0-9_-]{16,}")  # secrets.token_urlsafe's alphabet


def _damaged(path: Path, why: str) -> str:
    return (
        f"the local cloud's passphrase file {path} is damaged ({why}); it seals the secrets of "
        "every stack on this local cloud. what to do: put the file back from a backup of the "
        "state folder; if it is lost, the local cloud's stacks cannot be opened: remove the state "
        "folder's localcloud/ and workspaces/ to start over"
    )


def journal_key(root: Path) -> Fernet:
    """The Fernet key that seals secret fields in the journal, derived (HKDF-SHA256, fixed info)
    from the root's passphrase; the passphrase is generated if missing."""
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    # The passphrase is 256 random bits already: HKDF (not a slow password KDF) is enough.
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_JOURNAL_KEY_INFO).derive(
        passphrase(root).encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))
