"""`python flows/run.py migrate`: schema migrations from the command line, without a flow.

The table of commands (cli/commands/__init__.py) gives `migrate` these options and
`run_on_environment`. Nothing heavy is imported until `run` is called, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from stackflow.migrator.admin import MigrationStatus
    from stackflow.migrator.apply import AppliedMigration
    from stackflow.migrator.connection import WaitAttempt
    from stackflow.migrator.plan import MigrationPlanReport
    from stackflow.migrator.target import MysqlTarget
    from stackflow.settings import Settings

URL_VARIABLE = "STACKFLOW_DATABASE_URL"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the migrate command's options to `parser`."""
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help=(
            "mysql://user:password@host:port/database to migrate (default: the environment's "
            f"database stack). Prefer the {URL_VARIABLE} variable: a command line is visible to "
            "other users of the machine"
        ),
    )
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="FOLDER",
        help="folder of V<version>__<description>.sql and R__<description>.sql files (default: "
        "[migrations] dir in the environment's file)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--status", action="store_true", help="show each migration's state and change nothing"
    )
    action.add_argument(
        "--repair",
        action="store_true",
        help=(
            "clear failed records (after you checked the schema and fixed the file) and "
            "interrupted statements (they run again; see --mark-ran)"
        ),
    )
    action.add_argument(
        "--dry-run",
        action="store_true",
        help="print the statements each pending file would run, and change nothing",
    )
    action.add_argument(
        "--baseline",
        type=_version,
        metavar="VERSION",
        help="record an existing schema as migrated up to VERSION (1, 1.1, 2.0.1; only without "
        "history)",
    )
    parser.add_argument(
        "--mark-ran",
        action="store_true",
        help="with --repair: the interrupted statement took effect (you checked); record it done",
    )
    parser.add_argument(
        "--allow-out-of-order",
        action="store_true",
        help="apply a new file whose version is below the latest applied one",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="go on although applied files are gone from the folder ([migrations] allow_missing)",
    )
    parser.add_argument(
        "--strip-definer",
        action="store_true",
        help="drop DEFINER= clauses naming another user ([migrations] strip_definer)",
    )
    parser.add_argument(
        "--approve-destructive",
        type=_approved,
        action="append",
        default=[],
        metavar="VERSION",
        help="in a protected environment, run this version's destructive statements (a "
        "repeatable file: R__<description>; the option repeats)",
    )


def _version(text: str) -> str:
    from stackflow.migrator.version import EXAMPLES, Version, VersionError

    try:
        parsed = Version.parse(text)
    except VersionError as exc:
        raise argparse.ArgumentTypeError(
            f"not a migration version: {exc} (versions look like {EXAMPLES})"
        ) from None
    if parsed.parts == (0,):
        raise argparse.ArgumentTypeError(f"not a migration version: {text!r} (1 or more)")
    return parsed.text


def _approved(text: str) -> str:
    """The key of the file whose findings are approved: `V<version>` or `R__<description>`."""
    from stackflow.migrator.version import Version

    if text.startswith("R__"):
        return "R__" + text[3:].removesuffix(".sql").replace("_", " ")
    return f"V{Version.parse(_version(text)).canonical}"


def _target(
    args: argparse.Namespace, target_from_stack: Callable[[], MysqlTarget] | None
) -> MysqlTarget:
    from stackflow.errors import SettingsError
    from stackflow.migrator.target import parse_mysql_url

    url = args.database_url or os.environ.get(URL_VARIABLE)
    if url:
        try:
            return parse_mysql_url(url)
        except ValueError as exc:
            raise SettingsError(f"--database-url / {URL_VARIABLE}: {exc}") from None
    if target_from_stack is None:
        raise SettingsError(
            f"no database to migrate: set {URL_VARIABLE}=mysql://user:password@host:port/database "
            "or pass --database-url"
        )
    return target_from_stack()


def status_table(rows: list[MigrationStatus]) -> str:
    """The `--status` table: version, state, description."""
    lines = [f"{'version':>8}  {'state':<8}  description", f"{'-' * 8}  {'-' * 8}  {'-' * 30}"]
    lines += [f"{r.version or 'R'!s:>8}  {r.state:<8}  {r.description}" for r in rows]
    return "\n".join(lines)


def plan_text(report: MigrationPlanReport) -> str:
    """The `--dry-run` listing: each pending file's statements, numbered, and its findings."""
    if not report.pending:
        return "nothing to apply: the schema is up to date"
    lines: list[str] = []
    for p in report.pending:
        n = len(p.statements)
        resumed = f", resumes at statement {p.resume_from}" if p.resume_from > 1 else ""
        lines.append(f"-- {p.name} ({n} statement{'s' * (n != 1)}{resumed})")
        for number, sql in enumerate(p.statements, 1):
            if number >= p.resume_from:
                lines.append(f"-- statement {number}\n{sql};")
        for f in p.findings:
            note = "allowed by the file's marker" if f.allowed else f.label
            lines.append(f"-- {note}: {f.describe()}")
    return "\n".join(lines)


def run(
    args: argparse.Namespace,
    settings: Settings,
    target_from_stack: Callable[[], MysqlTarget] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run `migrate` (or `--status` / `--repair`) as the parsed arguments say.

    Args:
        args: parsed options from `add_arguments`.
        settings: stackflow settings (the migrations section is used).
        target_from_stack: resolves the environment's database when no URL is given.
        out: where progress goes (default stdout).
        err: where the one-line error goes (default stderr).

    Returns:
        0 on success, 1 when migrating failed, 2 for bad input (URL, folder, settings).
    """
    from stackflow.errors import SettingsError, StackflowError
    from stackflow.migrator.errors import MigrationFileError
    from stackflow.redact import Redactor

    out = out or sys.stdout
    err = err or sys.stderr
    redact = Redactor()

    def say(text: str) -> None:
        print(redact(text), file=out, flush=True)

    try:
        target = _target(args, target_from_stack)
        redact.add(target.password.get_secret_value())
        return _run(args, settings, target, say)
    except StackflowError as exc:
        code = EXIT_USAGE if isinstance(exc, SettingsError | MigrationFileError) else EXIT_FAILED
        print(f"error: {redact(str(exc))}", file=err, flush=True)
        return code


def _run(
    args: argparse.Namespace, settings: Settings, target: MysqlTarget, say: Callable[[str], None]
) -> int:
    from stackflow.migrator import admin, command
    from stackflow.migrator.plan import ALLOW_MISSING, destructive_refusal, pending_plan

    folder: Path | None = args.dir
    mig = settings.migrations
    flags = {"allow_out_of_order", "allow_missing", "strip_definer"}
    mig = mig.model_copy(update={f: True for f in flags if getattr(args, f, False)})
    where = target.address
    protected = settings.profile.protected  # from the environment's kind, as the flow's step
    if args.status:
        rows = admin.status(target, mig, folder)
        say(f"migrations on {where}:")
        say(status_table(rows))
        gone = [
            f"V{r.version}" if r.version else f"R__{r.description}"
            for r in rows
            if r.state == "missing"
        ]
        if gone:
            say(
                f"applied but gone from the folder: {', '.join(gone)}; a run refuses unless "
                f"{ALLOW_MISSING}"
            )
        return EXIT_OK
    if args.repair:
        cleared = admin.repair(target, mig, mark_ran=args.mark_ran)
        if cleared:
            what = "recorded as run" if args.mark_ran else "cleared failed records"
            say(f"{what} on {where}: {', '.join(cleared)}")
            say("run `python flows/run.py migrate` to go on")
        else:
            say(f"no failed or interrupted records on {where}; nothing to repair")
        return EXIT_OK
    if args.dry_run:
        preview = pending_plan(target, mig, protected, folder)
        say(f"dry run on {where}: {len(preview.pending)} pending, nothing changed")
        say(plan_text(preview))
        if preview.blocking:
            say(destructive_refusal(preview.blocking))
        return EXIT_OK
    if args.baseline is not None:
        done = admin.baseline(target, mig, args.baseline, folder)
        n = len(done.covered)
        files = f"{n} file{'s' * (n != 1)}"
        say(f"baseline recorded on {where}: {files} up to V{done.record.version} will never run:")
        for m in done.covered:
            say(f"  {m.filename}")
        return EXIT_OK

    def on_attempt(attempt: WaitAttempt) -> None:
        if attempt.error is not None and attempt.next_delay_s is not None:
            say(f"waiting for {where} (attempt {attempt.number}): {attempt.error}")

    def on_applied(applied: AppliedMigration) -> None:
        n = applied.statements
        resumed = f", resumed at {applied.first_statement}" if applied.first_statement > 1 else ""
        say(
            f"applied {applied.filename} ({n} statement{'s' * (n != 1)}{resumed}, "
            f"{applied.duration_s:.3f}s)"
        )

    report = command.migrate(
        target,
        mig,
        protected=protected,
        folder=folder,
        approved_destructive=args.approve_destructive,
        on_attempt=on_attempt,
        on_applied=on_applied,
    )
    if report.adopted_from_flyway:
        say(
            f"adopted {report.adopted_from_flyway} record(s) from flyway_schema_history: what "
            "Flyway applied counts as applied (checksums matched)"
        )
    if report.missing:
        say(f"applied but gone from the folder (allowed): {', '.join(report.missing)}")
    say(
        f"migrations on {where}: {len(report.applied)} applied, {report.already_applied} already "
        f"applied ({report.duration_s:.2f}s)"
    )
    return EXIT_OK


def run_on_environment(args: argparse.Namespace, settings: Settings) -> int:
    """`migrate` as the command line runs it: without --database-url or STACKFLOW_DATABASE_URL,
    on the database the environment's database stack serves."""

    def target_from_stack() -> MysqlTarget:
        from tasks.migrate import database_target  # it imports Prefect: only without a URL

        return database_target(settings)

    return run(args, settings, target_from_stack=target_from_stack)
