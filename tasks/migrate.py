"""The Prefect task that brings a database schema to the latest migration.

Safe to retry by construction: applied files and statements are recorded and skipped, and the
run holds the schema's GET_LOCK. Only transient database errors are retried: before a file
started, or inside one while a data statement ran (it commits with its progress record, so the
retry resumes at that statement). A connection lost while a DDL statement ran is
`MigrationInterrupted`, never retried. A bad file, a refused password or a failed statement fail
at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.logging import get_run_logger
from prefect.tasks import Task

from stackflow.migrations.apply import AppliedMigration, MigrateReport
from stackflow.migrations.command import migrate
from stackflow.migrations.connection import WaitAttempt
from stackflow.migrations.errors import TransientDatabaseError
from stackflow.migrations.target import MysqlTarget
from stackflow.retry import RetryPolicy
from stackflow.settings import MigrationSettings

# Seconds before the first retry; later ones double (2, 4, 8 ...), each with jitter.
_FIRST_RETRY_DELAY_S = 2.0


def migration_retry_policy(settings: MigrationSettings) -> RetryPolicy:
    """How the migrate task is retried on transient database errors: `settings.retries` times,
    2 s doubling, each drawn within ±50%; apply it with
    `run_migrations.with_options(**policy.task_options())`."""
    return RetryPolicy(settings.retries, _FIRST_RETRY_DELAY_S, factor=2.0, jitter=0.5)


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
            f"| {a.version} | {_cell(a.description)} | `{_cell(a.filename)}` | {a.statements} "
            f"| {a.duration_s:.3f} |"
            for a in report.applied
        ]
    else:
        lines += ["", "Nothing to apply: the schema is up to date."]
    if report.missing:
        gone = ", ".join(f"V{v}" for v in report.missing)
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
    pinned: Mapping[int, str] | None = None,
) -> MigrateReport:
    """Wait for the database, apply pending migrations, and publish a `migrations-<env>` artifact.

    Retries come from the caller: `run_migrations.with_options(**migration_retry_policy(settings)
    .task_options())`; only transient database errors are retried.

    Args:
        target: the database (its password is a SecretStr and never logged).
        settings: migrations folder, timeouts, TLS, lock, out-of-order and missing-file policy.
        environment: the environment name, for the task run name and artifact key.
        protected: the environment is protected (its kind's profile, `settings.profile.protected`):
            unapproved findings refuse the run.
        pinned: version -> checksum of the pending files an approval showed (from
            `pending_plan(...).pinned`); other pending files are refused
            (`MigrationPlanChanged`), and these files' findings count as approved.

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
    )
    if report.missing:
        logger.warning(
            "applied migrations whose files are gone (allowed): %s",
            ", ".join(f"V{v}" for v in report.missing),
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
