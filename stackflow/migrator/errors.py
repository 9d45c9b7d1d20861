"""The migration runner's errors: small subclasses of one `MigrationError` (a retry will not fix
them), and `TransientDatabaseError` (worth retrying), all under stackflow's `StackflowError`."""

from __future__ import annotations

from stackflow.errors import StackflowError

# Defined with the root errors: the engine's retry predicate names it too. Gathered here as well.
from stackflow.errors import TransientDatabaseError as TransientDatabaseError


class MigrationError(StackflowError):
    """A schema migration problem that a retry will not fix."""


class MigrationFileError(MigrationError):
    """A migration file or folder is malformed (bad name, duplicate version, empty, unreadable)."""


class MigrationChecksumError(MigrationError):
    """An applied migration's file has changed since it was applied."""


class MigrationOrderError(MigrationError):
    """A new migration's version is below the latest applied one and out-of-order is off."""


class MigrationFailedBefore(MigrationError):
    """A previous run left a migration recorded as failed; it must be repaired first."""


class MigrationInterrupted(MigrationError):
    """A run stopped between a statement MySQL commits implicitly (DDL) and its progress record."""


class MigrationMissingFiles(MigrationError):
    """Applied migrations whose files are gone from the folder."""


class MigrationSQLError(MigrationError):
    """A statement in a migration file failed."""


class MigrationRefused(MigrationError):
    """A pending file would destroy the runner's own history (the target database or the history
    table) or holds a mysql client command the server cannot run; nothing was changed."""


class MigrationDestructiveChange(MigrationError):
    """A pending file can lose data (or runs SQL the lint cannot check) in a protected
    environment, and neither carries the marker nor was approved."""


class MigrationPlanChanged(MigrationError):
    """The pending files differ from the ones that were approved (pinned checksums)."""


class MigrationStatementTooLarge(MigrationError):
    """A statement is larger than the server's max_allowed_packet."""


class MigrationDefinerError(MigrationError):
    """A file names a DEFINER other than the migration user."""


class MigrationBaselineError(MigrationError):
    """A baseline was asked for a schema that already has migration history."""


class MigrationLockTimeout(MigrationError):
    """Another migration runner held the schema's lock for longer than the lock timeout."""


class DatabaseAuthError(MigrationError):
    """The database refused the credentials."""


class DatabaseTLSError(MigrationError):
    """The TLS handshake with the database failed (certificate not trusted, TLS unsupported)."""


class DatabaseUnreachable(MigrationError):
    """The database did not accept connections within the wait timeout."""


class DatabaseWaitStopped(MigrationError):
    """The run was interrupted while it waited for the database: nothing was applied."""
