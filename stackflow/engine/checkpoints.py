"""What a stack's state says, read straight from its backend without starting `pulumi`.

This is the skip path: reading one stack's checkpoint costs one file read, one SQL query or one
object read. The Pulumi CLI v3.259 lays a self-managed backend out by project (checked against the
real CLI on a folder, on S3 and on PostgreSQL):

    .pulumi/meta.yaml                                         version: 1 (project-scoped layout)
    .pulumi/stacks/<project>/<stack>.json                     the checkpoint (.json.gz with
                                                              PULUMI_DIY_BACKEND_GZIP=true)
    .pulumi/locks/organization/<project>/<stack>/<id>.json    one file per update in progress:
                                                              {"pid", "username", "hostname",
                                                               "timestamp"}
    .pulumi/history/<project>/<stack>/...  .pulumi/backups/<project>/<stack>/...

A checkpoint is {"version": 3, "checkpoint": {"stack", "latest": {"manifest": {"time", "magic",
"version"}, "secrets_providers", "resources": [...], "pending_operations": [...]}}}. The root stack
resource's outputs are kept as stored: a secret stays `{"4dabf18193072939515e22adb298388d":
"1b47061264138c4ac30d75fd1eb44270", "ciphertext": ...}`, which nothing here can or tries to open.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any

from stackflow.backends import Blob, StateBackendUnavailable, StateBlobs, open_blobs
from stackflow.engine.base import StackState
from stackflow.engine.envelope import is_secret
from stackflow.engine.pulumisecrets import passphrase_salt
from stackflow.errors import PermanentStackError, StackflowError, TransientStackError
from stackflow.redact import Redactor

STACKS = ".pulumi/stacks"
LOCKS = ".pulumi/locks/organization"
_VARIANTS = (".json", ".json.gz", ".json.zst")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Checkpoint versions this reader knows: the CLI writes 3 (4 with features); a stack created and
# never updated holds {"version": 0, "checkpoint": {"stack": ...}}, with no `latest`.
_SCHEMAS = (0, 1, 2, 3, 4)


class CheckpointError(StackflowError, ValueError):
    """What the backend holds for a stack is not a checkpoint this reader can read."""


@dataclass(frozen=True)
class PendingOperation:
    """An operation an update began and never finished (its `pulumi` was stopped or killed)."""

    type: str  # creating, updating, deleting, reading, importing
    urn: str
    resource_type: str


@dataclass(frozen=True)
class Checkpoint:
    """A stack's latest checkpoint.

    Attributes:
        project, stack: whose it is.
        key: where it was read (relative to the backend's root).
        manifest_time: when the last update wrote it, exactly as the CLI wrote it (RFC 3339, in
            nanoseconds); None for a stack that was created and never updated.
        pulumi_version: the CLI version that wrote it.
        outputs: the root stack resource's outputs; secret ones opaque (see `is_secret`).
        resource_count: resources in the state, the root stack resource included.
        pending_operations: operations an interrupted update left unfinished.
        modified: when the backend last saw the object change (None if it does not say).
        secrets_provider: the checkpoint's `secrets_providers` ({"type": "passphrase", "state":
            {"salt": "v1:..."}}: no secret in it), or None when it names none.
    """

    project: str
    stack: str
    key: str
    manifest_time: str | None
    pulumi_version: str | None
    outputs: dict[str, Any] = field(repr=False)
    resource_count: int
    pending_operations: tuple[PendingOperation, ...]
    modified: datetime | None
    secrets_provider: Mapping[str, Any] | None = None

    @property
    def updated_at(self) -> datetime | None:
        """manifest_time as a datetime (to the microsecond)."""
        return _time(self.manifest_time)

    @property
    def secret_outputs(self) -> frozenset[str]:
        """The names of the outputs that are secret."""
        return frozenset(k for k, v in self.outputs.items() if is_secret(v))


@dataclass(frozen=True)
class LockHolder:
    """Who holds a stack's lock: one update in progress, or left behind by a killed `pulumi`."""

    key: str
    pid: int | None
    host: str | None
    user: str | None
    time: datetime | None


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    # Go writes up to nine fractional digits; Python reads six.
    head, dot, rest = text.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _json(blob: Blob, where: str) -> Any:
    data = blob.data
    if data.startswith(_ZSTD_MAGIC):
        raise CheckpointError(
            f"{blob.key} at {where} is compressed with zstd (PULUMI_DIY_BACKEND_ZSTD), which "
            "stackflow cannot read without `pulumi`; use PULUMI_DIY_BACKEND_GZIP or no compression"
        )
    try:
        if data.startswith(_GZIP_MAGIC):
            data = gzip.decompress(data)
        return json.loads(data)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{blob.key} at {where} is not readable JSON: {exc}") from None


def parse_checkpoint(blob: Blob, project: str, stack: str, where: str = "") -> Checkpoint:
    """The Checkpoint in a checkpoint file's bytes (plain JSON or gzip).

    Raises:
        CheckpointError: damaged, zstd-compressed, or of a schema version this reader does not know.
    """
    body = _json(blob, where)
    if not isinstance(body, Mapping) or body.get("version") not in _SCHEMAS:
        version = body.get("version") if isinstance(body, Mapping) else None
        raise CheckpointError(
            f"{blob.key} at {where} is not a checkpoint of a known schema (version {version!r}; "
            f"known: {', '.join(map(str, _SCHEMAS))})"
        )
    latest: Mapping[str, Any] = (body.get("checkpoint") or {}).get("latest") or {}
    resources: list[Mapping[str, Any]] = latest.get("resources") or []
    root: Mapping[str, Any] = next(
        (r for r in resources if r.get("type") == "pulumi:pulumi:Stack" and not r.get("parent")),
        {},
    )
    manifest = latest.get("manifest") or {}
    pending = tuple(
        PendingOperation(
            str(op.get("type", "")),
            str((op.get("resource") or {}).get("urn", "")),
            str((op.get("resource") or {}).get("type", "")),
        )
        for op in latest.get("pending_operations") or []
    )
    return Checkpoint(
        project=project,
        stack=stack,
        key=blob.key,
        manifest_time=manifest.get("time"),
        pulumi_version=manifest.get("version"),
        outputs=dict(root.get("outputs") or {}),
        resource_count=len(resources),
        pending_operations=pending,
        modified=blob.modified,
        secrets_provider=latest.get("secrets_providers") or None,
    )


def holdings(deployment: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(type token, id) and (type token, ARN) of each resource a deployment (a checkpoint's
    `latest`, an export's `deployment`) holds."""
    held: set[tuple[str, str]] = set()
    for resource in deployment.get("resources") or []:
        kind = str(resource.get("type", ""))
        arn = (resource.get("outputs") or {}).get("arn")
        held.update((kind, str(v)) for v in (resource.get("id"), arn) if isinstance(v, str) and v)
    return held


def _lock_holder(blob: Blob) -> LockHolder:
    try:
        body = json.loads(blob.data)
    except (UnicodeDecodeError, ValueError):
        body = {}  # a lock being written, or damaged: it still locks the stack
    body = body if isinstance(body, Mapping) else {}
    pid = body.get("pid")
    return LockHolder(
        key=blob.key,
        pid=pid if isinstance(pid, int) else None,
        host=body.get("hostname"),
        user=body.get("username"),
        time=_time(body.get("timestamp")),
    )


class CheckpointReader:
    """Reads stacks' checkpoints, locks and names from one backend; use as a context manager.

    Args:
        backend_url: file:///folder, s3://bucket/prefix?endpoint=...&region=..., or
            postgres://... (the URLs the Pulumi CLI takes; credentials come from the environment,
            as the CLI's do).

    Raises:
        BackendURLError: a URL of another kind.
    """

    def __init__(self, backend_url: str, *, blobs: StateBlobs | None = None) -> None:
        self._blobs = blobs if blobs is not None else open_blobs(backend_url)

    @property
    def where(self) -> str:
        """The backend, as a user may be shown it (no password)."""
        return self._blobs.where

    def checkpoint(self, project: str, stack: str) -> Checkpoint | None:
        """The stack's latest checkpoint, or None if the backend holds no such stack.

        Raises:
            CheckpointError: what is stored is damaged, zstd-compressed or of an unknown schema.
            StateBackendUnavailable: the backend did not answer.
        """
        base = f"{STACKS}/{project}/{stack}"
        blob = self._blobs.latest([base + suffix for suffix in _VARIANTS])
        return None if blob is None else parse_checkpoint(blob, project, stack, self.where)

    def locks(self, project: str, stack: str) -> list[LockHolder]:
        """Who holds the stack's lock: [] when no update is in progress (nor left one behind).

        Raises:
            StateBackendUnavailable: the backend did not answer.
        """
        blobs = self._blobs.under(f"{LOCKS}/{project}/{stack}/")
        return [_lock_holder(b) for b in blobs if b.key.endswith(".json")]

    def stacks(self, project: str) -> list[str]:
        """The names of the project's stacks (its environments) in the backend, sorted.

        Raises:
            StateBackendUnavailable: the backend did not answer.
        """
        prefix = f"{STACKS}/{project}/"
        names = set()
        for key in self._blobs.names(prefix):
            name = key[len(prefix) :]
            suffix = next((s for s in _VARIANTS if name.endswith(s)), None)
            if suffix is not None and "/" not in name:
                names.add(name[: -len(suffix)])
        return sorted(names)

    def all_stacks(self) -> list[tuple[str, str]]:
        """Every (project, stack) the backend holds, sorted.

        Raises:
            StateBackendUnavailable: the backend did not answer.
        """
        found = set()
        for key in self._blobs.names(f"{STACKS}/"):
            parts = key[len(STACKS) + 1 :].split("/")
            suffix = next((s for s in _VARIANTS if parts[-1].endswith(s)), None)
            if len(parts) == 2 and suffix is not None:
                found.add((parts[0], parts[1][: -len(suffix)]))
        return sorted(found)

    def holdings(self) -> set[tuple[str, str]]:
        """What every stack of every project in the backend holds (see `holdings`); a checkpoint
        this reader cannot read holds nothing it can tell.

        Raises:
            StateBackendUnavailable: the backend did not answer.
        """
        held: set[tuple[str, str]] = set()
        for project, stack in self.all_stacks():
            blob = self._blobs.latest([f"{STACKS}/{project}/{stack}{s}" for s in _VARIANTS])
            try:
                body = _json(blob, self.where) if blob is not None else {}
            except CheckpointError:
                continue
            latest = (
                (body.get("checkpoint") or {}).get("latest") if isinstance(body, Mapping) else {}
            )
            held |= holdings(latest or {})
        return held

    def close(self) -> None:
        """Let go of the backend's connection."""
        self._blobs.close()

    def __enter__(self) -> CheckpointReader:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def stack_state(
    reader: Callable[[], CheckpointReader], project: str, stack: str, label: str, redactor: Redactor
) -> StackState | None:
    """A stack's latest checkpoint and whether it is locked (one read of its checkpoint, one
    listing of its locks, no `pulumi` process); None when the backend holds no update of it.

    Args:
        reader: gives the backend's reader (opened on first use).
        label: how people name the stack (environment/node), for errors.

    Raises:
        PermanentStackError: the checkpoint is damaged (names the stack and where).
        TransientStackError: the backend did not answer.
    """
    try:
        found = reader()
        checkpoint = found.checkpoint(project, stack)
        if checkpoint is None or checkpoint.manifest_time is None:
            return None
        locked = bool(found.locks(project, stack))
    except CheckpointError as exc:
        raise PermanentStackError(label, redactor(str(exc))) from None
    except StateBackendUnavailable as exc:
        raise TransientStackError(label, redactor(str(exc))) from None
    return StackState(
        updated=checkpoint.manifest_time,
        outputs=checkpoint.outputs,
        resources=checkpoint.resource_count,
        pending=len(checkpoint.pending_operations),
        locked=locked,
        salt=passphrase_salt(checkpoint.secrets_provider),
    )
