"""The loopback addresses the data plane hands out (127.x.y.z), one per database and load balancer,
from a /16 of its own, recorded in `addresses.json` under a lock."""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stackflow.localcloud.dataplane.files import read_json, write_json
from stackflow.localcloud.errors import DataplaneError
from stackflow.processes import folder_lock

DATABASES = "databases"
LOAD_BALANCERS = "load_balancers"
_TCP_LISTEN = "0A"  # the LISTEN state in /proc/net/tcp


def address_pool(root: Path) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]:
    """The first and last loopback address a local cloud hands out: a /16 of 127.0.0.0/8 of its
    own, chosen by its folder. Two local clouds on one machine (two clones, two test workers) then
    never hand out one address, not even while one is stopped and its servers do not listen."""
    digest = hashlib.sha256(str(root.resolve()).encode()).digest()
    second = int.from_bytes(digest[:4], "big") % 254 + 1  # 127.1.x.x to 127.254.x.x
    return (
        ipaddress.IPv4Address(f"127.{second}.0.2"),
        ipaddress.IPv4Address(f"127.{second}.255.254"),
    )


def listening_addresses() -> set[str]:
    """IPv4 addresses some socket on this machine listens on (Linux's /proc; empty elsewhere)."""
    found: set[str] = set()
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[3] == _TCP_LISTEN:
            # local_address is "0200007F:0CEA": the IPv4 address in little-endian hex, then port.
            found.add(str(ipaddress.IPv4Address(bytes.fromhex(fields[1].split(":")[0])[::-1])))
    return found


class Addresses:
    """The address table of one cloud root's data plane.

    Args:
        root: the cloud root (its folder picks the pool).
        folder: the data plane's folder, which holds `addresses.json`.
    """

    def __init__(self, root: Path, folder: Path) -> None:
        self.root = root
        self.folder = folder
        self.path = folder / "addresses.json"

    @contextmanager
    def _table(self) -> Iterator[dict[str, dict[str, str]]]:
        # Locked: a `cloud stop` process may read it meanwhile.
        with folder_lock(self.folder, ".addresses.lock"):
            data = read_json(self.path)
            table: dict[str, dict[str, str]] = {DATABASES: {}, LOAD_BALANCERS: {}}
            if isinstance(data, dict):
                for kind in table:
                    table[kind].update(data.get(kind) or {})
            before = json.dumps(table, sort_keys=True)
            yield table
            if json.dumps(table, sort_keys=True) != before:
                write_json(self.path, table)

    def of(self, kind: str, name: str) -> str:
        """The loopback address of `name` (allocated once, from the pool databases and load
        balancers share; skipping addresses another program, such as a second local cloud,
        listens on now).

        Raises:
            DataplaneError: the pool is used up.
        """
        with self._table() as table:
            found = table[kind].get(name)
            if found is not None:
                return found
            used = {a for names in table.values() for a in names.values()}
            used |= listening_addresses()
            candidate, last = address_pool(self.root)
            while str(candidate) in used or str(candidate).endswith((".0", ".255")):
                candidate += 1
                if candidate > last:
                    raise DataplaneError(
                        f"no loopback address left for {name}: {self.path} holds {len(used)}; "
                        "remove entries of deleted resources"
                    )
            table[kind][name] = str(candidate)
            return str(candidate)

    def release(self, kind: str, name: str) -> None:
        """Give `name`'s address back to the pool."""
        with self._table() as table:
            table[kind].pop(name, None)
