"""The one door to migrating a database: load the files, wait for the database, apply what is
pending. The Prefect task (tasks/migrate.py), the `migrate` command and the benchmark all call
`migrate`; each caller decides `protected` from the environment's kind and passes it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from stackflow.migrator.apply import AppliedMigration, MigrateReport, apply_pending
from stackflow.migrator.connection import WaitAttempt, wait_for_database
from stackflow.migrator.files import load_migrations
from stackflow.migrator.target import MysqlTarget

if TYPE_CHECKING:
    from stackflow.settings import MigrationSettings


def migrate(
    target: MysqlTarget,
    settings: MigrationSettings,
    *,
    protected: bool,
    folder: Path | None = None,
    pinned: Mapping[str, str] | None = None,
    approved_destructive: Collection[str] = (),
    on_attempt: Callable[[WaitAttempt], None] | None = None,
    on_applied: Callable[[AppliedMigration], None] | None = None,
    stop: threading.Event | None = None,
) -> MigrateReport:
    """Load the migration files (a bad file fails before any waiting), wait until the database
    accepts connections, then apply every pending file under the schema's lock.

    Args:
        target: the database.
        settings: the migrations section (folder, timeouts, TLS, lock and file policies).
        protected: the environment is protected (its kind's profile): findings then refuse the
            run unless a file's marker allows them or they were approved.
        folder: the migrations folder (default: settings.dir).
        pinned: key (`V1.1`, `R__views`) -> checksum of the files an approval showed; any other
            pending set is refused (`MigrationPlanChanged`), and these files' findings count as
            approved.
        approved_destructive: keys of files whose findings were approved (the CLI's option).
        on_attempt: called after each connection attempt while waiting.
        on_applied: called after each file is applied and recorded.
        stop: set when the run is interrupted: the wait for the database ends at once
            (`DatabaseWaitStopped`).

    Raises:
        MigrationFileError: a bad file or folder (before any waiting).
        DatabaseUnreachable, DatabaseAuthError: while waiting.
        MigrationError and TransientDatabaseError: see `apply_pending`.
    """
    migrations = load_migrations(folder or settings.dir)
    wait_for_database(target, settings, on_attempt=on_attempt, stop=stop)
    return apply_pending(
        target,
        settings,
        migrations,
        protected=protected,
        on_applied=on_applied,
        approved_destructive=approved_destructive,
        pinned=pinned,
    )
