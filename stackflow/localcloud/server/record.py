"""`server.json`: the record of a running local cloud server (no secrets), written whole."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from stackflow.localcloud.paths import server_log, server_record

DEFAULT_PORT = 4566
DEFAULT_REGION = "eu-west-1"


@dataclass(frozen=True)
class CloudServer:
    """A running local cloud server (what server.json records; no secrets).

    Attributes:
        url: where it serves AWS's APIs and `/_stackflow/*`, e.g. http://127.0.0.1:4566.
        pid: its process id (leader of its own process group).
        root: the cloud root it keeps its files in.
        port: its TCP port on 127.0.0.1.
        region: its default region (it answers for every region).
        dataplane: whether it runs the data plane (databases, app stand-ins); tests of moto
            alone turn it off.
    """

    url: str
    pid: int
    root: Path
    port: int
    region: str = DEFAULT_REGION
    dataplane: bool = True

    @property
    def log(self) -> Path:
        return server_log(self.root)


def read_record(root: Path) -> CloudServer | None:
    """The server recorded in `root` (alive or not), or None when there is no readable record."""
    try:
        info = json.loads(server_record(root).read_text())
        return CloudServer(
            url=str(info["url"]),
            pid=int(info["pid"]),
            root=Path(info["root"]),
            port=int(info["port"]),
            region=str(info.get("region") or DEFAULT_REGION),
            dataplane=bool(info.get("dataplane", True)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(server: CloudServer) -> None:
    """Record `server` in its root (written beside, then renamed: never read half-written)."""
    path = server_record(server.root)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(json.dumps({**asdict(server), "root": str(server.root)}))
    os.replace(staging, path)


def forget_record(root: Path, pid: int | None = None) -> None:
    """Remove the record (only if it names `pid`, when given: a newer server keeps its own)."""
    if pid is not None:
        found = read_record(root)
        if found is None or found.pid != pid:
            return
    server_record(root).unlink(missing_ok=True)
