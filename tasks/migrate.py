"""The Prefect task that brings a database schema to the latest migration.

Safe to retry by construction: applied files and statements are recorded and skipped, and the
run holds the schema's GET_LOCK. Only transient database errors are retried: before a file
started, or inside one while a data statement ran (it commits with its progress record, so the
retry resumes at that statement). A connection lost while a DDL statement ran is
`MigrationInterrupted`, never retried. A bad file, a refused password or a failed statement fail
at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.logging import get_run_logger
from prefect.tasks import Task

from programs.database import DatabaseOutputs
from stackflow.engine import Operation
from stackflow.errors import MissingOutputError, OperationCancelled
from stackflow.migrator.apply import AppliedMigration, MigrateReport
from stackflow.migrator.command import migrate
from stackflow.migrator.connection import WaitAttempt
from stackflow.migrator.errors import (
    DatabaseUnreachable,
    DatabaseWaitStopped,
    MigrationError,
    TransientDatabaseError,
)
from stackflow.migrator.files import load_migrations
from stackflow.migrator.plan import MigrationPlanReport, offline_plan, pending_plan
from stackflow.migrator.target import MysqlTarget
from stackflow.outcome import NodeOutcome, Status
from stackflow.plan import DeployPlan
from stackflow.progress import NodeState
from stackflow.retry import migration_policy
from stackflow.settings import MigrationSettings, Settings
from stackflow.status.records import record_migrations
from tasks.context import RunContext


def retry_if_transient_database(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect retry condition: retry only when the task failed with a TransientDatabaseError."""
    try:
        state.result(raise_on_failure=True)
    except TransientDatabaseError:
        return True
    except Exception:
        return False
    return False


def migrations_artifact_markdown(
    report: MigrateReport, target: str = "", environment: str = ""
) -> str:
    """A markdown summary of a run: applied versions with durations. Holds no credentials.

    Args:
        report: what the run did.
        target: where it ran, as host:port/database (no user, no password).
        environment: the environment name, for the heading.
    """
    heading = f"# Schema migrations: {environment}" if environment else "# Schema migrations"
    lines = [heading, ""]
    if target:
        lines += [f"Database: `{target}`", ""]
    lines.append(
        f"{len(report.applied)} applied in this run, {report.already_applied} applied before; "
        f"took {report.duration_s:.2f}s."
    )
    if report.applied:
        lines += [
            "",
            "| version | description | file | statements | seconds |",
            "|---:|---|---|---:|---:|",
        ]
        lines += [
            f"| {a.version or 'repeatable'} | {_cell(a.description)} | `{_cell(a.filename)}` "
            f"| {a.statements} "
            f"| {a.duration_s:.3f} |"
            for a in report.applied
        ]
    else:
        lines += ["", "Nothing to apply: the schema is up to date."]
    if report.adopted_from_flyway:
        lines += [
            "",
            f"Adopted {report.adopted_from_flyway} record(s) from Flyway's flyway_schema_history.",
        ]
    if report.missing:
        gone = ", ".join(report.missing)
        lines += ["", f"Applied before but gone from the migrations folder (allowed): {gone}."]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@task(
    name="run-migrations",
    task_run_name="migrations-{environment}",
    retry_condition_fn=retry_if_transient_database,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def run_migrations(
    target: MysqlTarget,
    settings: MigrationSettings,
    environment: str,
    protected: bool,
    pinned: Mapping[str, str] | None = None,
    stop: threading.Event | None = None,
) -> MigrateReport:
    """Wait for the database, apply pending migrations, and publish a `migrations-<env>` artifact.

    Retries come from the caller: `run_migrations.with_options(**migration_policy(n)
    .task_options())`; only transient database errors are retried.

    Args:
        target: the database (its password is a SecretStr and never logged).
        settings: migrations folder, timeouts, TLS, lock, out-of-order and missing-file policy.
        environment: the environment name, for the task run name and artifact key.
        protected: the environment is protected (its kind's profile, `settings.profile.protected`):
            unapproved findings refuse the run.
        pinned: key (`V1.1`, `R__views`) -> checksum of the pending files an approval showed (from
            `pending_plan(...).pinned`); other pending files are refused
            (`MigrationPlanChanged`), and these files' findings count as approved.
        stop: the run's interruption: the wait for the database ends when it is set.

    Raises:
        TransientDatabaseError: retried by Prefect. Any MigrationError fails at once.
    """
    logger = get_run_logger()
    where = target.address

    def on_attempt(attempt: WaitAttempt) -> None:
        if attempt.error is not None and attempt.next_delay_s is not None:
            logger.info(
                "database %s not ready (attempt %d): %s; next try in %.1fs",
                where,
                attempt.number,
                attempt.error,
                attempt.next_delay_s,
            )

    def on_applied(applied: AppliedMigration) -> None:
        resumed = f", resumed at {applied.first_statement}" if applied.first_statement > 1 else ""
        logger.info(
            "applied %s (%d statement(s)%s) in %.3fs",
            applied.filename,
            applied.statements,
            resumed,
            applied.duration_s,
        )

    report = migrate(
        target,
        settings,
        protected=protected,
        pinned=pinned,
        on_attempt=on_attempt,
        on_applied=on_applied,
        stop=stop,
    )
    if report.adopted_from_flyway:
        logger.info(
            "adopted %d record(s) from flyway_schema_history on %s (checksums matched)",
            report.adopted_from_flyway,
            where,
        )
    if report.missing:
        logger.warning(
            "applied migrations whose files are gone (allowed): %s",
            ", ".join(report.missing),
        )
    logger.info(
        "migrations on %s: %d applied, %d already applied (%.2fs)",
        where,
        len(report.applied),
        report.already_applied,
        report.duration_s,
    )
    create_markdown_artifact(
        key=f"migrations-{environment}",
        markdown=migrations_artifact_markdown(report, where, environment),
        description=f"Schema migrations for {environment}: {len(report.applied)} applied",
    )
    return report


def _database(upstream: Mapping[str, NodeOutcome]) -> NodeOutcome | None:
    """The upstream stack whose outputs are a database's (the step reads it by type, not name)."""
    return next((o for o in upstream.values() if isinstance(o.typed, DatabaseOutputs)), None)


@task(name="migrate", task_run_name="migrate-{node}", cache_policy=NO_CACHE, persist_result=False)
def migrate_step(
    ctx: RunContext,
    node: str,
    upstream: dict[str, NodeOutcome],
    plan: DeployPlan | None = None,
) -> NodeOutcome:
    """Bring the database schema to the latest version (a nested task with its own retries).

    `plan`: what an approval covered; its migration files (key -> checksum) are the only ones
    that may run (any other pending file stops the run: MigrationPlanChanged), and their
    findings count as approved. Protected or not is the environment kind's, as at the CLI.
    """
    ctx.check_not_cancelled(node)
    started = time.monotonic()
    database = _database(upstream)
    if database is None or database.placeholder:
        ctx.publish(node, NodeState.SKIPPED, status=Status.SKIPPED, detail="database not deployed")
        note = "database not deployed yet (preview)"
        return NodeOutcome(node, Operation.UP, Status.SKIPPED, note=note)
    assert isinstance(database.typed, DatabaseOutputs)
    target = MysqlTarget.from_outputs(database.typed)
    ctx.publish(node, NodeState.RUNNING)
    ctx.redactor.add(target.password.get_secret_value())
    settings = ctx.settings
    try:
        policy = migration_policy(settings.migrations.retries)
        report = run_migrations.with_options(**policy.task_options())(
            target,
            settings.migrations,
            settings.environment,
            settings.protected,
            pinned=plan.pinned if plan is not None else None,
            stop=ctx.progress.stop_event,
        )
    except DatabaseWaitStopped:
        ctx.publish(node, NodeState.CANCELLED, detail="interrupted while waiting for the database")
        raise OperationCancelled(
            f"{settings.environment}/{node}",
            "not started: the run was interrupted while it waited for the database",
        ) from None
    except Exception as exc:
        ctx.publish(node, NodeState.FAILED, detail=ctx.redactor(str(exc)))
        raise
    applied = len(report.applied)
    if ctx.records is not None:  # `status` reads the schema's version here, not from the database
        version = None if report.version is None else report.version.number_or_text
        record_migrations(ctx.records, settings.environment, version, applied, ctx.commit)
    note = f"{applied} applied, {report.already_applied} already applied"
    status = Status.MIGRATED if applied else Status.UNCHANGED
    ctx.publish(node, NodeState.DONE, status=status, detail=note)
    took = time.monotonic() - started
    return NodeOutcome(node, Operation.UP, status, duration_s=took, note=note)


def check_migration_files(settings: Settings) -> None:
    """The migration folder's files read and checked (names, versions, not empty), before an
    `up` changes anything.

    Raises:
        MigrationFileError: naming the file or folder and what is accepted.
    """
    load_migrations(settings.migrations.dir)


def migration_plan(ctx: RunContext, upstream: Mapping[str, NodeOutcome]) -> MigrationPlanReport:
    """The pending migrations as an approval or a preview shows them: read from the environment's
    database (read-only, nothing created), or every file when it is not deployed yet.

    `upstream`: outcomes of this run's stacks; a database not among them is read from state.
    """
    settings = ctx.settings
    protected = True  # an approval shows findings whether or not they would block
    database = _database(upstream)
    if database is None:  # not targeted: its outputs come from state
        stack = next((n for n in ctx.graph.stacks if ctx.graph[n].outputs is DatabaseOutputs), None)
        try:
            database = ctx.stored_outcome(stack, Operation.PREVIEW) if stack else None
        except MissingOutputError:  # not deployed yet
            database = None
    db = database.typed if database is not None else None
    if database is None or database.placeholder or not isinstance(db, DatabaseOutputs):
        return offline_plan(
            settings.migrations, protected, settings.database.username, settings.database.name
        )
    target = MysqlTarget.from_outputs(db)
    ctx.redactor.add(target.password.get_secret_value())
    try:
        return pending_plan(target, settings.migrations, protected)
    except DatabaseUnreachable as exc:
        raise MigrationError(f"the database cannot be read to plan its migrations: {exc}") from exc


def database_target(settings: Settings) -> MysqlTarget:
    """The environment's database, from the outputs of the stack of the project's graph that
    deploys it (for `migrate` at the command line).

    Raises:
        MissingOutputError: the graph has no database stack, or it is not deployed.
    """
    from stackflow.dag import parse_outputs
    from stackflow.engine import get_engine
    from stackflow.graphs import graph_of

    graph = graph_of(settings)
    stack = next((n for n in graph.stacks if graph[n].outputs is DatabaseOutputs), None)
    if stack is None:
        raise MissingOutputError(
            f"{settings.environment}/migrate",
            f"the project's graph ({settings.graph}) has no stack whose outputs are a "
            "database's (DatabaseOutputs): give migrate --database-url",
        )
    outputs = get_engine(settings).outputs(graph.bare_spec(settings, stack))
    db = parse_outputs(graph[stack], outputs)
    assert isinstance(db, DatabaseOutputs)
    return MysqlTarget.from_outputs(db)
