"""Where the Pulumi state and stackflow's records live: one module per kind of backend, each a
`Backend` (see `stackflow.backends.base`), and this one list of them. The settings accept the
schemes listed here and no others, and every run picks its kind by `backend_for`.

    file:///abs/folder                    stackflow.backends.file      (the one-person default)
    s3://bucket/prefix?endpoint=...       stackflow.backends.s3
    postgres://user@host/database         stackflow.backends.postgres  (postgresql:// too)
    https://api.pulumi.com                stackflow.backends.cloud     (Pulumi Cloud)

A new kind is a module with a `BACKEND` and one line in `KINDS` (docs/development/backends.md).
`mask_url` is the only way a URL reaches a user's eyes.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from stackflow.backends import cloud, file, postgres, s3
from stackflow.backends.base import (
    Backend,
    BackendURLError,
    Blob,
    StateBackendUnavailable,
    StateBlobs,
    mask_url,
    url_secrets,
)
from stackflow.backends.file import FileRecords
from stackflow.records.base import Records

__all__ = [
    "KINDS",
    "SCHEMES",
    "Backend",
    "BackendURLError",
    "Blob",
    "StateBackendUnavailable",
    "StateBlobs",
    "accepted",
    "backend_for",
    "mask_url",
    "open_blobs",
    "open_records",
    "records_beside",
    "url_secrets",
]

KINDS: tuple[Backend, ...] = (file.BACKEND, s3.BACKEND, postgres.BACKEND, cloud.BACKEND)
SCHEMES: tuple[str, ...] = tuple(scheme for kind in KINDS for scheme in kind.schemes)


def accepted() -> str:
    """Every accepted form, for messages: "file://<folder>, s3://..., ..."."""
    return ", ".join(kind.form for kind in KINDS)


def backend_for(url: str) -> Backend:
    """The kind of backend `url` names, by its scheme.

    Raises:
        BackendURLError: a scheme no kind takes (naming the accepted forms; the URL masked).
    """
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    for kind in KINDS:
        if scheme in kind.schemes:
            return kind
    raise BackendURLError(
        f"backend URL {mask_url(url)} is not one stackflow reads; accepted: {accepted()}"
    )


def records_beside(url: str) -> str | None:
    """Where stackflow's records live beside the backend at `url` (None: nowhere beside it).

    Raises:
        BackendURLError: a scheme no kind takes.
    """
    return backend_for(url).records_beside(url)


def open_blobs(url: str) -> StateBlobs:
    """The reader of the state objects of the self-managed backend at `url`.

    Raises:
        BackendURLError: another scheme, or Pulumi Cloud (its state is behind its API).
    """
    return backend_for(url).blobs(url)


def open_records(url: str) -> Records:
    """The store of stackflow's records at `url`, picked by its kind of backend.

    Args:
        url: a folder (a path, or file:///path), postgres(ql)://... or s3://bucket/prefix?...

    Raises:
        BackendURLError: another scheme, or a malformed URL (shown masked).
    """
    if "://" not in url:
        return FileRecords(Path(url).expanduser())
    return backend_for(url).records(url)
