"""The local cloud's data plane: a real MariaDB per RDS instance, a stand-in app per listener.

The cloud server calls `Dataplane.on_api_call` after each successful mutating AWS request:

- RDS `CreateDBInstance` starts a `mariadbd` of its own (detached: it outlives the server) on a
  loopback address of its own (127.x.y.z, from the cloud's own /16) at the requested port, from a copy of a data folder
  initialised once, and creates the master user and the database. `ModifyDBInstance` changes the
  password (or port, or identifier), `Reboot`/`Stop`/`StartDBInstance` do what they say, and
  `DeleteDBInstance` dumps a final snapshot (unless skipped), stops the server and removes its data.
- ELBv2 `CreateLoadBalancer` gives the load balancer a loopback address; each `CreateListener`
  binds an app stand-in there (`dataplane_app.py`) until `DeleteListener`/`DeleteLoadBalancer`.

Everything is recorded under `<root>/dataplane/` without secrets, so `start_all` brings it all back
after a restart. The master password is sent to the server over its Unix socket only: it is never
written to disk or logged. This is the local cloud, not AWS.

Layout:
    addresses.json              {"databases": {id: "127.x.y.z"}, "load_balancers": {name: ...}}
    template/                   the initialised data folder that every instance copies
    db/<identifier>/            instance.json (the record), data/, server.json, mariadbd.log
    lb/<name>.json              {"name", "arn", "listeners": {listener arn: port}}
    snapshots/<final id>.sql    final snapshots of deleted instances
"""

from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import json
import logging
import re
import shutil
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from stackflow.errors import StackflowError
from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.dataplane_app import AppStandIn
from stackflow.localcloud.errors import DataplaneError
from stackflow.localdb import (
    admin_connection,
    dump_local_mariadb,
    prepare_template,
    running_server,
    set_user,
    start_local_mariadb,
    stop_local_mariadb,
)

RDS = "rds"
ELBV2 = "elasticloadbalancing"
DEFAULT_DB_PORT = 3306
MYSQL_ENGINES = frozenset({"mysql", "mariadb"})
# The hosts the master user may connect from: any, the socket, and loopback (clients on this
# machine reach 127.x.y.z from 127.0.0.1).
MASTER_HOSTS = ("%", "localhost", "127.0.0.1")
# Small servers: a few of them (one per environment) must fit next to everything else.
SERVER_ARGS = (
    "--innodb-buffer-pool-size=8M",
    "--innodb-log-file-size=4M",
    "--innodb-log-buffer-size=2M",
    "--innodb-read-io-threads=1",
    "--innodb-write-io-threads=2",
    "--innodb-use-native-aio=0",  # many servers would exhaust the kernel's aio contexts
    "--performance-schema=OFF",
    "--key-buffer-size=1M",
    "--aria-pagecache-buffer-size=2M",
    "--query-cache-size=0",
    "--max-connections=50",
    "--table-open-cache=256",
    "--thread-cache-size=4",
)


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


# Identifiers become folder and file names: AWS's own characters only, no path tricks.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,254}$")
_TRUE = "true"
_TCP_LISTEN = "0A"  # the LISTEN state in /proc/net/tcp


@dataclass(frozen=True)
class ApiCall:
    """One successful mutating AWS request, as the cloud server saw it.

    Attributes:
        service: the endpoint prefix: "rds", "elasticloadbalancing" (ELBv2), "ecs", ...
        action: the API action, e.g. "CreateDBInstance".
        params: the request's parameters (query-protocol form fields, or the JSON body); secrets
            included, so never log or store them.
        response: the response body.
    """

    service: str
    action: str
    params: dict[str, Any]
    response: bytes

    def __repr__(self) -> str:
        return f"ApiCall({self.service}:{self.action})"  # params may hold a password

    def param(self, name: str) -> str | None:
        """A parameter as text (a form field's first value), or None when absent."""
        value = self.params.get(name)
        if isinstance(value, list):
            value = value[0] if value else None
        return None if value is None else str(value)

    def flag(self, name: str) -> bool:
        """A boolean parameter: "true" (any case) or True; absent is False."""
        return (self.param(name) or "").lower() == _TRUE

    def response_field(self, name: str) -> str | None:
        """The first element called `name` in an XML response body (namespaces ignored)."""
        try:
            root = ET.fromstring(self.response)
        except ET.ParseError:
            return None
        for element in root.iter():
            if element.tag.rsplit("}", 1)[-1] == name and element.text:
                return element.text.strip()
        return None


@dataclass(frozen=True)
class DatabaseRecord:
    """What the data plane keeps about one RDS instance (db/<identifier>/instance.json)."""

    identifier: str
    host: str
    port: int
    engine: str
    user: str | None
    database: str | None
    stopped: bool = False


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def _safe(kind: str, name: str | None) -> str:
    if not name or not _SAFE_NAME.match(name):
        raise DataplaneError(
            f"{kind} {name!r} cannot be served by the local cloud's data plane; expected letters, "
            "digits and hyphens (as AWS accepts)"
        )
    return name


def _lb_name_from_arn(arn: str) -> str | None:
    # arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/app/<name>/<id> (listener/...)
    resource = arn.split(":", 5)[-1]
    parts = resource.split("/")
    return parts[2] if len(parts) >= 4 and parts[0] in ("loadbalancer", "listener") else None


def _listening_addresses() -> set[str]:
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


def _write_json(path: Path, data: Any) -> None:
    # Write beside, then rename: a reader never sees half a record.
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = path.with_name(f"{path.name}.writing")
    staging.write_text(json.dumps(data, indent=2, sort_keys=True))
    staging.replace(path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Dataplane:
    """The data plane of one local cloud (see the module docstring).

    Thread-safe: the cloud server calls it from its request threads.

    Args:
        root: the cloud root (`<state_dir>/localcloud`); the data plane lives in root/dataplane.
        endpoint: the cloud server's URL, which the app stand-ins read AWS through.
        region: the region of the local cloud.
        log: receives one-line progress messages (default: this module's logger, at INFO).

    Attributes:
        start_times: seconds each database took to start last (copy included), by identifier.
        template_seconds: how long the template data folder took to initialise (None: reused).
    """

    def __init__(
        self, root: Path, endpoint: str, region: str, *, log: Callable[[str], None] | None = None
    ) -> None:
        self.root = Path(root)
        self.dir = self.root / "dataplane"
        self.endpoint, self.region = endpoint, region
        self._log = log or logging.getLogger(__name__).info
        self._lock = threading.RLock()
        self._stand_ins: dict[str, AppStandIn] = {}  # by listener ARN
        self._cloud: CloudContext | None = None
        self._cloud_lock = threading.Lock()  # not _lock: a stand-in never waits for a hook
        self.start_times: dict[str, float] = {}
        self.template_seconds: float | None = None

    # --- the server's interface ----------------------------------------------------------------

    def on_api_call(self, call: ApiCall) -> None:
        """Bring the data plane in line with one successful mutating AWS request.

        Calls that concern neither RDS instances nor ELBv2 load balancers and listeners are ignored.
        Makes no AWS call itself (the server may hold its request lock meanwhile).

        Raises:
            DataplaneError: a name the data plane cannot use, or a port it cannot bind.
            LocalDatabaseError: a database server failed to start or to take the change.
        """
        handler = self._handlers().get((call.service, call.action))
        if handler is not None:
            with self._lock:
                handler(call)

    def before_api_call(self, call: ApiCall) -> None:
        """Prepare what a mutating AWS request will need, before the cloud acts on it: the data
        folder every database copies (initialised once) before `CreateDBInstance`.

        Raises:
            LocalDatabaseError: the data folder could not be initialised (names the log).
        """
        if (call.service, call.action) != (RDS, "CreateDBInstance"):
            return
        if (call.param("Engine") or "mysql").lower() in MYSQL_ENGINES:
            self._template()

    def start_all(self, _backend: object = None) -> list[str]:
        """Start every recorded database (unless stopped through the API) and every stand-in.

        Works from the files alone (no secrets needed). One failure does not stop the others.

        Returns:
            One message per database or listener that could not be started (also logged).
        """
        problems: list[str] = []
        with self._lock:
            for record in self._db_records():
                if record.stopped:
                    continue
                try:
                    self._ensure_running(record)
                except StackflowError as exc:
                    problems.append(f"database {record.identifier}: {exc}")
            for lb in self._lb_records():
                for listener_arn, port in lb["listeners"].items():
                    try:
                        self._bind(lb, listener_arn, int(port))
                    except DataplaneError as exc:
                        problems.append(str(exc))
        for problem in problems:
            self._log(f"local cloud data plane: {problem}")
        return problems

    def stop_all(self) -> None:
        """Stop every database server and app stand-in; their records stay for `start_all`."""
        with self._lock:
            for stand_in in self._stand_ins.values():
                stand_in.stop()
            self._stand_ins.clear()
            for record in self._db_records():
                if stop_local_mariadb(self._db_dir(record.identifier)):
                    self._log(f"stopped local-cloud database {record.identifier}")

    def endpoints(self) -> dict[str, Any]:
        """Where each database and load balancer is served (the GET /_stackflow/dataplane body).

        Reads the records only (written whole by rename), so it never waits for a hook at work.
        """
        databases = {
            r.identifier: {
                "host": r.host,
                "port": r.port,
                "running": running_server(self._db_dir(r.identifier)) is not None,
            }
            for r in self._db_records()
        }
        balancers = {
            lb["name"]: {
                "host": lb["host"],
                "ports": sorted({int(p) for p in lb["listeners"].values()}),
            }
            for lb in self._lb_records()
        }
        return {"databases": databases, "load_balancers": balancers}

    # --- RDS -----------------------------------------------------------------------------------

    def _handlers(self) -> dict[tuple[str, str], Callable[[ApiCall], None]]:
        return {
            (RDS, "CreateDBInstance"): self._create_db,
            (RDS, "ModifyDBInstance"): self._modify_db,
            (RDS, "RebootDBInstance"): self._reboot_db,
            (RDS, "StopDBInstance"): self._stop_db,
            (RDS, "StartDBInstance"): self._start_db,
            (RDS, "DeleteDBInstance"): self._delete_db,
            (ELBV2, "CreateLoadBalancer"): self._create_lb,
            (ELBV2, "CreateListener"): self._create_listener,
            (ELBV2, "ModifyListener"): self._modify_listener,
            (ELBV2, "DeleteListener"): self._delete_listener,
            (ELBV2, "DeleteLoadBalancer"): self._delete_lb,
        }

    def _db_dir(self, identifier: str) -> Path:
        return self.dir / "db" / identifier

    def _db_record(self, identifier: str | None) -> DatabaseRecord | None:
        if not identifier or not _SAFE_NAME.match(identifier):
            return None
        data = _read_json(self._db_dir(identifier) / "instance.json")
        return DatabaseRecord(**data) if isinstance(data, dict) else None

    def _db_records(self) -> list[DatabaseRecord]:
        folder = self.dir / "db"
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        return [r for r in map(self._db_record, names) if r is not None]

    def _save_db(self, record: DatabaseRecord) -> None:
        _write_json(self._db_dir(record.identifier) / "instance.json", asdict(record))

    def _template(self) -> Path:
        """The data folder every database copies, initialised on first use."""
        template = self.dir / "template"
        started = time.monotonic()
        if prepare_template(template, server_args=SERVER_ARGS, log=self._log):
            self.template_seconds = time.monotonic() - started
            self._log(f"initialised the data plane's template in {self.template_seconds:.2f}s")
        return template

    def _ensure_running(self, record: DatabaseRecord) -> None:
        template = self._template()
        base = self._db_dir(record.identifier)
        already = running_server(base)
        if already is not None and (already.host, already.port) == (record.host, record.port):
            return
        started = time.monotonic()
        start_local_mariadb(
            base, record.port, host=record.host, template=template, server_args=SERVER_ARGS
        )
        elapsed = time.monotonic() - started
        self.start_times[record.identifier] = elapsed
        self._log(
            f"local-cloud database {record.identifier} serves {record.host}:{record.port} "
            f"(started in {elapsed:.2f}s)"
        )

    def _set_master(self, record: DatabaseRecord, password: str) -> None:
        if not record.user:
            return
        with admin_connection(self._db_dir(record.identifier)) as conn:
            set_user(conn, record.user, password, MASTER_HOSTS)
            with conn.cursor() as cur:
                for host in MASTER_HOSTS:
                    # RDS's master user administers the instance: every database, new users.
                    cur.execute(
                        "GRANT ALL PRIVILEGES ON *.* TO %s@%s WITH GRANT OPTION",
                        (record.user, host),
                    )

    def _create_db(self, call: ApiCall) -> None:
        identifier = _safe("DB instance identifier", call.param("DBInstanceIdentifier"))
        engine = (call.param("Engine") or "mysql").lower()
        if engine not in MYSQL_ENGINES:
            self._log(f"DB instance {identifier}: engine {engine} has no local-cloud data plane")
            return
        record = DatabaseRecord(
            identifier=identifier,
            host=self._address("databases", identifier),
            port=int(call.param("Port") or DEFAULT_DB_PORT),
            engine=engine,
            user=call.param("MasterUsername"),
            database=call.param("DBName"),
        )
        self._save_db(record)  # first: start_all retries an instance whose start failed
        self._ensure_running(record)
        password = call.param("MasterUserPassword")
        if password:
            self._set_master(record, password)
        if record.database:
            with admin_connection(self._db_dir(identifier)) as conn, conn.cursor() as cur:
                cur.execute(
                    f"CREATE DATABASE IF NOT EXISTS {_quote(record.database)} CHARACTER SET utf8mb4"
                )

    def _known_db(self, call: ApiCall) -> DatabaseRecord | None:
        record = self._db_record(call.param("DBInstanceIdentifier"))
        if record is None:
            self._log(
                f"{call.action} of {call.param('DBInstanceIdentifier')}: "
                "not served by the local cloud's data plane; ignored"
            )
        return record

    def _modify_db(self, call: ApiCall) -> None:
        record = self._known_db(call)
        if record is None:
            return
        new_id = call.param("NewDBInstanceIdentifier")
        if new_id and new_id != record.identifier:
            record = self._rename_db(record, _safe("DB instance identifier", new_id))
        new_port = call.param("DBPortNumber")
        if new_port and int(new_port) != record.port:
            record = replace(record, port=int(new_port))
            self._save_db(record)
        if not record.stopped:
            self._ensure_running(record)  # restarts it on a new port
        password = call.param("MasterUserPassword")
        if password:
            if record.stopped:
                self._ensure_running(record)
                self._set_master(record, password)
                stop_local_mariadb(self._db_dir(record.identifier))
            else:
                self._set_master(record, password)
            self._log(f"local-cloud database {record.identifier}: master password changed")

    def _rename_db(self, record: DatabaseRecord, new_id: str) -> DatabaseRecord:
        old_dir, new_dir = self._db_dir(record.identifier), self._db_dir(new_id)
        if new_dir.exists():
            raise DataplaneError(f"DB instance {new_id} already has data in {new_dir}")
        stop_local_mariadb(old_dir)  # its socket and records name the old folder
        for stale in ("server.json", "mariadbd.pid"):
            (old_dir / stale).unlink(missing_ok=True)
        old_dir.rename(new_dir)
        renamed = replace(record, identifier=new_id, host=self._address("databases", new_id))
        self._save_db(renamed)
        self._log(f"local-cloud database {record.identifier} renamed to {new_id}")
        return renamed

    def _reboot_db(self, call: ApiCall) -> None:
        record = self._known_db(call)
        if record is not None and not record.stopped:
            stop_local_mariadb(self._db_dir(record.identifier))
            self._ensure_running(record)

    def _stop_db(self, call: ApiCall) -> None:
        record = self._known_db(call)
        if record is not None:
            self._save_db(replace(record, stopped=True))
            stop_local_mariadb(self._db_dir(record.identifier))

    def _start_db(self, call: ApiCall) -> None:
        record = self._known_db(call)
        if record is not None:
            record = replace(record, stopped=False)
            self._save_db(record)
            self._ensure_running(record)

    def _delete_db(self, call: ApiCall) -> None:
        record = self._known_db(call)
        if record is None:
            return
        base = self._db_dir(record.identifier)
        if not call.flag("SkipFinalSnapshot"):
            final = call.param("FinalDBSnapshotIdentifier") or f"{record.identifier}-final"
            target = self.dir / "snapshots" / f"{_safe('final snapshot identifier', final)}.sql"
            self._ensure_running(record)  # a stopped instance still gets its snapshot
            databases = dump_local_mariadb(base, target)
            self._log(
                f"local-cloud database {record.identifier}: final snapshot of "
                f"{', '.join(databases) or 'no databases'} in {target}"
            )
        stop_local_mariadb(base)
        shutil.rmtree(base)
        self.start_times.pop(record.identifier, None)
        self._log(f"local-cloud database {record.identifier} deleted")

    # --- ELBv2 ---------------------------------------------------------------------------------

    def _lb_path(self, name: str) -> Path:
        return self.dir / "lb" / f"{name}.json"

    def _lb_records(self) -> list[dict[str, Any]]:
        folder = self.dir / "lb"
        paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
        return [d for d in map(_read_json, paths) if isinstance(d, dict)]

    def _lb_by_arn(self, arn: str | None) -> dict[str, Any] | None:
        if not arn:
            return None
        found = next((lb for lb in self._lb_records() if lb.get("arn") == arn), None)
        if found is None:
            name = _lb_name_from_arn(arn)
            data = _read_json(self._lb_path(name)) if name and _SAFE_NAME.match(name) else None
            found = data if isinstance(data, dict) else None
        return found

    def _lb_by_listener(self, listener_arn: str | None) -> dict[str, Any] | None:
        return next(
            (lb for lb in self._lb_records() if listener_arn in lb["listeners"]),
            None,
        )

    def _new_lb(self, name: str, arn: str | None) -> dict[str, Any]:
        lb: dict[str, Any] = {
            "name": name,
            "arn": arn,
            "host": self._address("load_balancers", name),
            "listeners": {},
        }
        _write_json(self._lb_path(name), lb)
        self._log(f"local-cloud load balancer {name} has address {lb['host']}")
        return lb

    def _create_lb(self, call: ApiCall) -> None:
        name = _safe("load balancer name", call.param("Name"))
        existing = _read_json(self._lb_path(name))
        arn = call.response_field("LoadBalancerArn")
        if isinstance(existing, dict):
            existing["arn"] = arn or existing.get("arn")
            _write_json(self._lb_path(name), existing)
        else:
            self._new_lb(name, arn)

    def _create_listener(self, call: ApiCall) -> None:
        lb_arn = call.param("LoadBalancerArn")
        port = int(call.param("Port") or 80)
        listener_arn = call.response_field("ListenerArn") or f"{lb_arn}#port-{port}"
        lb = self._lb_by_arn(lb_arn)
        if lb is None:  # created before the data plane was listening: learn it from its ARN
            lb = self._new_lb(_safe("load balancer name", _lb_name_from_arn(lb_arn or "")), lb_arn)
        lb["arn"] = lb.get("arn") or lb_arn
        lb["listeners"][listener_arn] = port
        _write_json(self._lb_path(lb["name"]), lb)
        self._bind(lb, listener_arn, port)

    def _modify_listener(self, call: ApiCall) -> None:
        listener_arn = call.param("ListenerArn")
        new_port = call.param("Port")
        lb = self._lb_by_listener(listener_arn)
        if lb is None or listener_arn is None or not new_port:
            return
        if int(lb["listeners"][listener_arn]) != int(new_port):
            self._unbind(listener_arn)
            lb["listeners"][listener_arn] = int(new_port)
            _write_json(self._lb_path(lb["name"]), lb)
            self._bind(lb, listener_arn, int(new_port))

    def _delete_listener(self, call: ApiCall) -> None:
        listener_arn = call.param("ListenerArn")
        lb = self._lb_by_listener(listener_arn)
        if lb is None or listener_arn is None:
            return
        self._unbind(listener_arn)
        del lb["listeners"][listener_arn]
        _write_json(self._lb_path(lb["name"]), lb)

    def _delete_lb(self, call: ApiCall) -> None:
        lb = self._lb_by_arn(call.param("LoadBalancerArn"))
        if lb is None:
            return
        for listener_arn in lb["listeners"]:  # AWS deletes the listeners with it
            self._unbind(listener_arn)
        self._lb_path(lb["name"]).unlink(missing_ok=True)
        self._release("load_balancers", lb["name"])
        self._log(f"local-cloud load balancer {lb['name']} deleted; {lb['host']} released")

    def _cloud_context(self) -> CloudContext:
        # Created on a stand-in's first request, never inside on_api_call.
        with self._cloud_lock:
            if self._cloud is None:
                self._cloud = CloudContext(self.endpoint, self.region)
            return self._cloud

    def _bind(self, lb: dict[str, Any], listener_arn: str, port: int) -> None:
        current = self._stand_ins.get(listener_arn)
        if current is not None and current.running and current.port == port:
            return
        stand_in = AppStandIn(lb["host"], port, lb["arn"], self._cloud_context, self._log)
        try:
            stand_in.start()
        except OSError as exc:
            raise DataplaneError(
                f"load balancer {lb['name']}: cannot listen on {lb['host']}:{port} ({exc}); "
                "free that port (ports below 1024 need root)"
            ) from None
        self._stand_ins[listener_arn] = stand_in
        self._log(f"local-cloud load balancer {lb['name']} serves the app on {lb['host']}:{port}")

    def _unbind(self, listener_arn: str) -> None:
        stand_in = self._stand_ins.pop(listener_arn, None)
        if stand_in is not None:
            stand_in.stop()

    # --- loopback addresses --------------------------------------------------------------------

    @contextmanager
    def _addresses(self) -> Iterator[dict[str, dict[str, str]]]:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.dir / "addresses.json"
        with (self.dir / ".addresses.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # a `cloud stop` process may read it meanwhile
            data = _read_json(path)
            table: dict[str, dict[str, str]] = {"databases": {}, "load_balancers": {}}
            if isinstance(data, dict):
                for kind in table:
                    table[kind].update(data.get(kind) or {})
            before = json.dumps(table, sort_keys=True)
            yield table
            if json.dumps(table, sort_keys=True) != before:
                _write_json(path, table)

    def _address(self, kind: str, name: str) -> str:
        """The loopback address of `name` (allocated once, from the pool databases and load
        balancers share; skipping addresses another program, such as a second local cloud,
        listens on now)."""
        with self._addresses() as table:
            found = table[kind].get(name)
            if found is not None:
                return found
            used = {a for names in table.values() for a in names.values()}
            used |= _listening_addresses()
            candidate, last = address_pool(self.root)
            while str(candidate) in used or str(candidate).endswith((".0", ".255")):
                candidate += 1
                if candidate > last:
                    raise DataplaneError(
                        f"no loopback address left for {name}: {self.dir / 'addresses.json'} "
                        f"holds {len(used)}; remove entries of deleted resources"
                    )
            table[kind][name] = str(candidate)
            return str(candidate)

    def _release(self, kind: str, name: str) -> None:
        with self._addresses() as table:
            table[kind].pop(name, None)
