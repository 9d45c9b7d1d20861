"""What every kind of backend offers, and what they share: masking a URL before anyone sees it,
and the three reads the checkpoint reader makes of a self-managed backend's objects.

A kind of backend (`stackflow.backends.file`, `.s3`, `.postgres`, `.cloud`) is one module with one
`Backend` in it: its schemes, its URL's checks, and, where it has them, its state objects
(`blobs`), stackflow's records beside them (`records`), and its lock objects (`break_lock`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from stackflow.errors import SettingsError, StackflowError

if TYPE_CHECKING:
    from stackflow.records.base import Records

MASK = "***"
SECRET_QUERY_KEYS = ("password", "secret", "token", "sslpassword", "passphrase")
TRUE = ("1", "t", "true", "yes", "on")
ENCODE_HINT = (
    "if its password holds @ : / ? # or %, percent-encode those characters (@ is %40, : is %3A, "
    "/ is %2F)"
)


class BackendURLError(SettingsError):
    """A backend URL that stackflow cannot read: unknown scheme or malformed options."""


class StateBackendUnavailable(StackflowError):
    """The Pulumi backend did not answer (database down, bucket unreachable, folder unreadable)."""


def mask_url(url: str) -> str:
    """`url` as it may be shown: a password in it (user:password@ or a query option named like
    one) replaced by ***. Anything that does not parse comes back masked whole after the scheme."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that does not parse: a raw password cut the URL short)
        netloc = parts.netloc
        if "@" in url.split("://", 1)[-1] and "@" not in netloc:
            raise ValueError("a user part that is not percent-encoded")
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = f"{userinfo.split(':', 1)[0]}:{MASK}"
            netloc = f"{userinfo}@{host}"
        query = [
            (k, MASK if any(s in k.lower() for s in SECRET_QUERY_KEYS) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        return urlunsplit(
            (parts.scheme, netloc, parts.path, urlencode(query, safe="/:*"), parts.fragment)
        )
    except ValueError:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        return f"{scheme}://{MASK}" if scheme else MASK


def url_secrets(url: str) -> list[str]:
    """The secrets `url` holds in its text: the password of user:password@, and the value of any
    query option named like a password. [] for a URL that holds none (or does not parse)."""
    try:
        parts = urlsplit(url)
        found = [unquote(parts.password)] if parts.password else []
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return []
    return found + [v for k, v in query if v and any(s in k.lower() for s in SECRET_QUERY_KEYS)]


def key_prefix(path: str) -> str:
    """A URL path as a key prefix: "" or segments ending in "/" (the Pulumi CLI's blob prefix)."""
    sub = path.strip("/")
    return f"{sub}/" if sub else ""


@dataclass(frozen=True)
class Blob:
    """One object: its key (relative to the backend's root), bytes and last change (if known)."""

    key: str
    data: bytes
    modified: datetime | None


class StateBlobs(Protocol):
    """What the checkpoint reader needs from a backend: three kinds of read, nothing else.

    Keys are always the CLI's own (`.pulumi/stacks/<project>/<stack>.json`, relative to the
    backend's root); each kind adds its own prefix."""

    where: str

    def latest(self, keys: Sequence[str]) -> Blob | None:
        """The most recently written of `keys` that exists (one read), or None."""
        ...

    def under(self, prefix: str) -> list[Blob]:
        """Every object whose key starts with `prefix`, with its bytes."""
        ...

    def names(self, prefix: str) -> list[str]:
        """The keys that start with `prefix`, sorted."""
        ...

    def close(self) -> None: ...


class Backend:
    """One kind of backend. A subclass sets the class attributes and overrides what it has;
    what it lacks refuses with BackendURLError naming the kind.

    Attributes:
        name: the kind, as people say it ("file", "S3", "PostgreSQL", "Pulumi Cloud").
        schemes: the URL schemes it takes (the settings accept these and no others).
        form: how its URL looks, for messages ("s3://<bucket>[/prefix][?endpoint=...]").
        self_managed: the Pulumi CLI's self-managed ("DIY") backend: stackflow reads its objects
            itself, its locks are objects, and `pulumi cancel` only deletes them. False: a service
            that keeps state behind its API and ends stale updates itself (Pulumi Cloud).
        needs_access_token: a run needs STACKFLOW_PULUMI_ACCESS_TOKEN.
    """

    name: ClassVar[str]
    schemes: ClassVar[tuple[str, ...]]
    form: ClassVar[str]
    self_managed: ClassVar[bool] = True
    needs_access_token: ClassVar[bool] = False

    def check(self, url: str) -> None:
        """Refuse a URL of this kind that is malformed (shown masked).

        Raises:
            BackendURLError: naming what is wrong and the form accepted.
        """
        try:
            urlsplit(url).port  # noqa: B018 (parsing it is the check)
        except ValueError:
            raise BackendURLError(
                f"backend URL {mask_url(url)}: its port is not a number 1-65535; {ENCODE_HINT}"
            ) from None

    def for_cli(self, url: str) -> tuple[str, dict[str, str]]:
        """The URL to hand the Pulumi CLI (PULUMI_BACKEND_URL) and the variables that go with it.

        The CLI writes its URL to disk (the stack it selected, keyed by the URL, in
        `$PULUMI_HOME/workspaces/`), so a kind whose URL may hold a password hands it over in a
        variable instead."""
        return url, {}

    def blobs(self, url: str) -> StateBlobs:
        """The reader of the state objects at `url`.

        Raises:
            BackendURLError: this kind's state is not read here (the CLI answers).
        """
        raise BackendURLError(f"{self.name} backend {mask_url(url)}: its state is not read here")

    def records(self, url: str) -> Records:
        """stackflow's records at `url`.

        Raises:
            BackendURLError: this kind holds no records of stackflow's.
        """
        raise BackendURLError(
            f"{mask_url(url)}: a {self.name} backend holds no records of stackflow's; set "
            "records_url (STACKFLOW_RECORDS_URL) to a folder, s3:// or postgres:// URL"
        )

    def records_beside(self, url: str) -> str | None:
        """Where stackflow's records live beside the backend at `url`; None: nowhere beside it
        (the state folder's own records are used)."""
        return None

    def restore(self, url: str) -> str:
        """How the stacks' state at `url` is put back from a backup, as a clause of an error's
        what-to-do (a stack whose state is gone while the records say it was deployed)."""
        return f"restore the {self.name} backend {mask_url(url)} from its own backup"

    def folder(self, url: str) -> Path | None:
        """The local folder that holds the backend at `url`, if it is one (it must exist before
        the CLI opens it)."""
        return None

    def break_lock(self, url: str, key: str) -> bool:
        """Delete the lock object `key` (relative to the root) of a dead update.

        Returns:
            False where the kind leaves it to `pulumi cancel` (which deletes the stack's locks).
        """
        return False
