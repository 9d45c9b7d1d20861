"""The team backend's URLs: which kind a URL names, how to reach it, and how to show it.

One URL names where the Pulumi state lives (and, beside it, stackflow's records):

    file:///abs/folder            a folder (the one-person default)
    s3://bucket/prefix?endpoint=127.0.0.1:4566&disableSSL=true&s3ForcePathStyle=true&region=eu-west-1
    postgres://user@/database?host=/socket/folder   (or user:password@host:port; `table` picks the
                                                    Pulumi CLI's table, pulumi_state by default)

S3 options are the Pulumi CLI's own: the AWS SDK v1 names above (which the CLI still translates)
and the v2 ones (endpoint with a scheme, disable_https, use_path_style, profile). Credentials come
from the environment, as the CLI's do. `mask_url` is the only way a URL reaches a user's eyes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from stackflow.errors import SettingsError

BackendKind = Literal["file", "s3", "postgres"]
MASK = "***"
_SECRET_QUERY_KEYS = ("password", "secret", "token", "sslpassword", "passphrase")
_TRUE = ("1", "t", "true", "yes", "on")


class BackendURLError(SettingsError):
    """A backend URL that stackflow cannot read: unknown scheme or malformed options."""


def mask_url(url: str) -> str:
    """`url` as it may be shown: a password in it (user:password@ or a query option named like
    one) replaced by ***. Anything that does not parse comes back masked whole after the scheme."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = f"{userinfo.split(':', 1)[0]}:{MASK}"
            netloc = f"{userinfo}@{host}"
        query = [
            (k, MASK if any(s in k.lower() for s in _SECRET_QUERY_KEYS) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        return urlunsplit(
            (parts.scheme, netloc, parts.path, urlencode(query, safe="/:*"), parts.fragment)
        )
    except ValueError:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        return f"{scheme}://{MASK}" if scheme else MASK


def backend_kind(url: str) -> BackendKind:
    """Which kind of backend `url` names.

    Raises:
        BackendURLError: not file://, s3:// or postgres(ql)://.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme == "file":
        return "file"
    if scheme == "s3":
        return "s3"
    if scheme in ("postgres", "postgresql"):
        return "postgres"
    raise BackendURLError(
        f"backend URL {mask_url(url)} is not one stackflow reads: use file:///folder, "
        "s3://bucket/prefix?... or postgres://user@host/database"
    )


def file_folder(url: str) -> Path:
    """The folder of a file:// URL (file://~/x and file:///abs both occur; options dropped)."""
    return Path(unquote(url.removeprefix("file://").split("?", 1)[0])).expanduser()


@dataclass(frozen=True)
class S3Location:
    """Where an s3:// URL points and how to reach it.

    Attributes:
        bucket: the bucket.
        prefix: the key prefix under it ("" or ending in "/"), as the Pulumi CLI prefixes keys.
        endpoint_url: an S3-compatible endpoint (http://127.0.0.1:4566), or None for AWS.
        region: the region, or None for the environment's.
        path_style: address the bucket in the path (S3-compatible servers), not the host name.
        profile: an AWS profile name, or None for the environment's credentials.
    """

    bucket: str
    prefix: str
    endpoint_url: str | None
    region: str | None
    path_style: bool
    profile: str | None

    def client(self) -> Any:
        """A boto3 S3 client for this location (credentials from the environment or profile)."""
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
        return session.client(
            "s3",
            endpoint_url=self.endpoint_url,
            config=Config(
                s3={"addressing_style": "path" if self.path_style else "auto"},
                retries={"total_max_attempts": 3, "mode": "standard"},
                connect_timeout=10,
                read_timeout=60,
            ),
        )


def _prefix(path: str) -> str:
    sub = path.strip("/")
    return f"{sub}/" if sub else ""


def s3_location(url: str) -> S3Location:
    """Parse an s3:// backend URL with the Pulumi CLI's options (v1 and v2 names).

    Raises:
        BackendURLError: not s3://, no bucket, or an option with a malformed value.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise BackendURLError(f"{mask_url(url)} is not an s3://bucket/prefix URL")
    query = dict(parse_qsl(parts.query))
    no_tls = query.get("disableSSL", query.get("disable_https", "false")).lower() in _TRUE
    endpoint = query.get("endpoint") or None
    if endpoint is not None and "://" not in endpoint:
        # The CLI adds the scheme the v1 SDK implied: http when disableSSL, else https.
        endpoint = f"{'http' if no_tls else 'https'}://{endpoint}"
    path_style = query.get("s3ForcePathStyle", query.get("use_path_style", "false")).lower()
    return S3Location(
        bucket=parts.netloc,
        prefix=_prefix(parts.path),
        endpoint_url=endpoint,
        region=query.get("region") or None,
        path_style=path_style in _TRUE,
        profile=query.get("profile") or None,
    )


@dataclass(frozen=True)
class PostgresLocation:
    """Where a postgres:// URL points, as the Pulumi CLI reads it.

    Attributes:
        conninfo: the URL for psycopg/libpq (the CLI's own `table` option removed).
        table: the Pulumi CLI's state table (`pulumi_state` unless `table=` says otherwise).
        prefix: the CLI prefixes every key with the URL's path (the database name) and a "/".
    """

    conninfo: str
    table: str
    prefix: str


def postgres_location(url: str) -> PostgresLocation:
    """Parse a postgres:// backend URL.

    Raises:
        BackendURLError: not postgres(ql)://, or a table name that is not a plain identifier.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise BackendURLError(f"{mask_url(url)} is not a postgres:// URL")
    query = parse_qsl(parts.query, keep_blank_values=True)
    table = next((v for k, v in query if k == "table"), "") or "pulumi_state"
    if not table.replace("_", "").isalnum() or table[0].isdigit():
        raise BackendURLError(f"{mask_url(url)}: table {table!r} is not a plain identifier")
    rest = urlencode([(k, v) for k, v in query if k != "table"], safe="/")
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
    return PostgresLocation(conninfo=conninfo, table=table, prefix=_prefix(parts.path))


def socket_url(scheme: str, user: str, database: str, socket_dir: Path, port: int) -> str:
    """A URL to `database` as `user` over the Unix socket in `socket_dir` (no password: the
    socket's folder is the guard). Port 5432 is left out, as every client defaults to it."""
    query = {"host": str(socket_dir)}
    if port != 5432:
        query["port"] = str(port)
    return f"{scheme}://{quote(user)}@/{quote(database)}?{urlencode(query, safe='/')}"


def records_beside(backend_url: str, database: str = "stackflow") -> str:
    """Where stackflow's records live beside a backend: a `.stackflow` folder (or S3 prefix)
    next to the Pulumi state, or the `database` database on the same PostgreSQL server.

    Raises:
        BackendURLError: a backend stackflow cannot keep records beside (Pulumi Cloud).
    """
    kind = backend_kind(backend_url)
    parts = urlsplit(backend_url)
    if kind == "file":
        return str(file_folder(backend_url) / ".stackflow")
    if kind == "s3":
        path = parts.path.rstrip("/") + "/.stackflow"
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "table"], safe="/")
    return urlunsplit(("postgresql", parts.netloc, f"/{database}", query, ""))
