"""The data plane's databases: a real MariaDB per RDS instance, on a loopback address of its own.

`CreateDBInstance` starts a `mariadbd` of its own (detached: it outlives the cloud server) at the
requested port, from a copy of a data folder initialised once (prepared before the cloud creates
the instance, so a failed bootstrap fails the create), and creates the master user and the
database. `ModifyDBInstance` changes the password (or port, or identifier),
`Reboot`/`Stop`/`StartDBInstance` do what they say, and `DeleteDBInstance` dumps a final snapshot
(unless skipped), stops the server and removes its data. The master password is sent to the server
over its Unix socket only: it is never written to disk or logged.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from stackflow.errors import StackflowError
from stackflow.localcloud.dataplane.addresses import DATABASES, Addresses
from stackflow.localcloud.dataplane.calls import RDS, ApiCall
from stackflow.localcloud.dataplane.files import SAFE_NAME, read_json, safe, write_json
from stackflow.localcloud.errors import DataplaneError
from stackflow.localdb import (
    admin_connection,
    dump_local_mariadb,
    forget_server,
    prepare_template,
    quote_identifier,
    running_server,
    set_user,
    start_local_mariadb,
    stop_local_mariadb,
)

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


class Databases:
    """The RDS instances' servers of one data plane (the caller serialises the calls).

    Args:
        folder: the data plane's folder (`<root>/dataplane`).
        addresses: its address table.
        log: receives one-line progress messages.
    """

    def __init__(self, folder: Path, addresses: Addresses, log: Callable[[str], None]) -> None:
        self.dir = folder
        self.addresses = addresses
        self._log = log
        self.start_times: dict[str, float] = {}
        self.template_seconds: float | None = None

    def handlers(self) -> dict[tuple[str, str], Callable[[ApiCall], None]]:
        """The RDS actions the databases follow."""
        return {
            (RDS, "CreateDBInstance"): self._create,
            (RDS, "ModifyDBInstance"): self._modify,
            (RDS, "RebootDBInstance"): self._reboot,
            (RDS, "StopDBInstance"): self._stop,
            (RDS, "StartDBInstance"): self._start,
            (RDS, "DeleteDBInstance"): self._delete,
        }

    def prepare(self, call: ApiCall) -> None:
        """Before the cloud creates an instance: the data folder it will copy.

        Raises:
            LocalDatabaseError: the data folder could not be initialised (names the log).
        """
        if (call.service, call.action) != (RDS, "CreateDBInstance"):
            return
        if (call.param("Engine") or "mysql").lower() in MYSQL_ENGINES:
            self._template()

    # --- the records -------------------------------------------------------------------------

    def base(self, identifier: str) -> Path:
        """The folder of an instance's server (data, socket, logs, record)."""
        return self.dir / "db" / identifier

    def record(self, identifier: str | None) -> DatabaseRecord | None:
        if not identifier or not SAFE_NAME.match(identifier):
            return None
        data = read_json(self.base(identifier) / "instance.json")
        return DatabaseRecord(**data) if isinstance(data, dict) else None

    def records(self) -> list[DatabaseRecord]:
        folder = self.dir / "db"
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        return [r for r in map(self.record, names) if r is not None]

    def _save(self, record: DatabaseRecord) -> None:
        write_json(self.base(record.identifier) / "instance.json", asdict(record))

    # --- all of them -------------------------------------------------------------------------

    def start_all(self) -> list[str]:
        """Start every recorded database not stopped through the API; one message per failure."""
        problems = []
        for record in self.records():
            if record.stopped:
                continue
            try:
                self.ensure_running(record)
            except StackflowError as exc:
                problems.append(f"database {record.identifier}: {exc}")
        return problems

    def stop_all(self) -> None:
        """Stop every database server; their records stay."""
        for record in self.records():
            if stop_local_mariadb(self.base(record.identifier)):
                self._log(f"stopped local-cloud database {record.identifier}")

    def endpoints(self) -> dict[str, Any]:
        """Where each database is served, and whether its server runs."""
        return {
            r.identifier: {
                "host": r.host,
                "port": r.port,
                "running": running_server(self.base(r.identifier)) is not None,
            }
            for r in self.records()
        }

    # --- one server --------------------------------------------------------------------------

    def _template(self) -> Path:
        """The data folder every database copies, initialised on first use."""
        template = self.dir / "template"
        started = time.monotonic()
        if prepare_template(template, server_args=SERVER_ARGS, log=self._log):
            self.template_seconds = time.monotonic() - started
            self._log(f"initialised the data plane's template in {self.template_seconds:.2f}s")
        return template

    def ensure_running(self, record: DatabaseRecord) -> None:
        """Start the instance's server unless it runs on its address and port."""
        template = self._template()
        base = self.base(record.identifier)
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
        with admin_connection(self.base(record.identifier)) as conn:
            set_user(conn, record.user, password, MASTER_HOSTS)
            with conn.cursor() as cur:
                for host in MASTER_HOSTS:
                    # RDS's master user administers the instance: every database, new users.
                    cur.execute(
                        "GRANT ALL PRIVILEGES ON *.* TO %s@%s WITH GRANT OPTION",
                        (record.user, host),
                    )

    # --- the RDS actions ---------------------------------------------------------------------

    def _create(self, call: ApiCall) -> None:
        identifier = safe("DB instance identifier", call.param("DBInstanceIdentifier"))
        engine = (call.param("Engine") or "mysql").lower()
        if engine not in MYSQL_ENGINES:
            self._log(f"DB instance {identifier}: engine {engine} has no local-cloud data plane")
            return
        record = DatabaseRecord(
            identifier=identifier,
            host=self.addresses.of(DATABASES, identifier),
            port=int(call.param("Port") or DEFAULT_DB_PORT),
            engine=engine,
            user=call.param("MasterUsername"),
            database=call.param("DBName"),
        )
        self._save(record)  # first: start_all retries an instance whose start failed
        self.ensure_running(record)
        password = call.param("MasterUserPassword")
        if password:
            self._set_master(record, password)
        if record.database:
            with admin_connection(self.base(identifier)) as conn, conn.cursor() as cur:
                cur.execute(
                    f"CREATE DATABASE IF NOT EXISTS {quote_identifier(record.database)} "
                    "CHARACTER SET utf8mb4"
                )

    def _known(self, call: ApiCall) -> DatabaseRecord | None:
        record = self.record(call.param("DBInstanceIdentifier"))
        if record is None:
            self._log(
                f"{call.action} of {call.param('DBInstanceIdentifier')}: "
                "not served by the local cloud's data plane; ignored"
            )
        return record

    def _modify(self, call: ApiCall) -> None:
        record = self._known(call)
        if record is None:
            return
        new_id = call.param("NewDBInstanceIdentifier")
        if new_id and new_id != record.identifier:
            record = self._rename(record, safe("DB instance identifier", new_id))
        new_port = call.param("DBPortNumber")
        if new_port and int(new_port) != record.port:
            record = replace(record, port=int(new_port))
            self._save(record)
        if not record.stopped:
            self.ensure_running(record)  # restarts it on a new port
        password = call.param("MasterUserPassword")
        if password:
            if record.stopped:
                self.ensure_running(record)
                self._set_master(record, password)
                stop_local_mariadb(self.base(record.identifier))
            else:
                self._set_master(record, password)
            self._log(f"local-cloud database {record.identifier}: master password changed")

    def _rename(self, record: DatabaseRecord, new_id: str) -> DatabaseRecord:
        old_dir, new_dir = self.base(record.identifier), self.base(new_id)
        if new_dir.exists():
            raise DataplaneError(f"DB instance {new_id} already has data in {new_dir}")
        stop_local_mariadb(old_dir)
        forget_server(old_dir)  # its socket and records name the old folder
        old_dir.rename(new_dir)
        renamed = replace(record, identifier=new_id, host=self.addresses.of(DATABASES, new_id))
        self._save(renamed)
        self._log(f"local-cloud database {record.identifier} renamed to {new_id}")
        return renamed

    def _reboot(self, call: ApiCall) -> None:
        record = self._known(call)
        if record is not None and not record.stopped:
            stop_local_mariadb(self.base(record.identifier))
            self.ensure_running(record)

    def _stop(self, call: ApiCall) -> None:
        record = self._known(call)
        if record is not None:
            self._save(replace(record, stopped=True))
            stop_local_mariadb(self.base(record.identifier))

    def _start(self, call: ApiCall) -> None:
        record = self._known(call)
        if record is not None:
            record = replace(record, stopped=False)
            self._save(record)
            self.ensure_running(record)

    def _delete(self, call: ApiCall) -> None:
        record = self._known(call)
        if record is None:
            return
        base = self.base(record.identifier)
        if not call.flag("SkipFinalSnapshot"):
            final = call.param("FinalDBSnapshotIdentifier") or f"{record.identifier}-final"
            target = self.dir / "snapshots" / f"{safe('final snapshot identifier', final)}.sql"
            self.ensure_running(record)  # a stopped instance still gets its snapshot
            databases = dump_local_mariadb(base, target)
            self._log(
                f"local-cloud database {record.identifier}: final snapshot of "
                f"{', '.join(databases) or 'no databases'} in {target}"
            )
        stop_local_mariadb(base)
        shutil.rmtree(base)
        self.start_times.pop(record.identifier, None)
        self._log(f"local-cloud database {record.identifier} deleted")
