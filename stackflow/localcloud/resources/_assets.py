"""Pulumi assets and archives as the engine sends them to a provider (an S3 object's `source`, a
Lambda function's `code`), read into bytes: a file, a text, a folder, a zip file or a map of them."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stackflow.localcloud.errors import InvalidInput
from stackflow.localcloud.wire import SIG_KEY

ASSET_SIG = "c44067f5952c0a294b673a41bacd8c17"
ARCHIVE_SIG = "0def7320c3a5731c473e5ecbe6d01bc7"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # zip entries dated alike: the same files, the same bytes


def is_asset(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get(SIG_KEY) == ASSET_SIG


def is_archive(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get(SIG_KEY) == ARCHIVE_SIG


def asset_bytes(value: Mapping[str, Any]) -> bytes:
    """An asset's content.

    Raises:
        InvalidInput: not an asset, a remote asset (no network here), or a file that is missing.
    """
    if not is_asset(value):
        raise InvalidInput("expected a Pulumi asset (FileAsset, StringAsset)")
    if value.get("text") is not None:
        return str(value["text"]).encode()
    if value.get("path"):
        return _read(Path(str(value["path"])))
    raise InvalidInput(
        f"a remote asset ({value.get('uri')}) cannot be read: the local cloud has no network"
    )


def archive_zip(value: Mapping[str, Any]) -> bytes:
    """An archive as the zip file AWS takes (a zip file is passed on as it is).

    Raises:
        InvalidInput: not an archive, a remote one, or a path that is missing.
    """
    if not is_archive(value):
        raise InvalidInput("expected a Pulumi archive (AssetArchive, FileArchive)")
    path = value.get("path")
    if path and Path(str(path)).is_file():
        return _read(Path(str(path)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if path:
            _add_folder(archive, Path(str(path)), "")
        elif isinstance(value.get("assets"), Mapping):
            for name, member in sorted(value["assets"].items()):
                _add_member(archive, str(name), member)
        else:
            raise InvalidInput(
                f"a remote archive ({value.get('uri')}) cannot be read: the local cloud has no "
                "network"
            )
    return buffer.getvalue()


def _add_member(archive: zipfile.ZipFile, name: str, member: Any) -> None:
    if is_asset(member):
        _write(archive, name, asset_bytes(member))
    elif is_archive(member) and member.get("path") and Path(str(member["path"])).is_dir():
        _add_folder(archive, Path(str(member["path"])), "" if name in (".", "") else name)
    elif is_archive(member):
        with zipfile.ZipFile(io.BytesIO(archive_zip(member))) as inner:
            for info in sorted(inner.infolist(), key=lambda i: i.filename):
                prefix = "" if name in (".", "") else f"{name}/"
                _write(archive, prefix + info.filename, inner.read(info))
    else:
        raise InvalidInput(f"archive member {name!r} is neither an asset nor an archive")


def _add_folder(archive: zipfile.ZipFile, folder: Path, prefix: str) -> None:
    if not folder.is_dir():
        raise InvalidInput(f"the archive folder {folder} does not exist")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        _write(archive, f"{prefix}/{relative}" if prefix else relative, path.read_bytes())


def _write(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    archive.writestr(zipfile.ZipInfo(name, date_time=_FIXED_TIME), data)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read the asset {path}: {exc.strerror}") from None
