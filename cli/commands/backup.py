"""`python flows/run.py server backup FILE` / `server restore FILE`: the project's own PostgreSQL
(team mode on this machine: Prefect's database, the Pulumi state, stackflow's records) into one
file and back (stackflow.postgres.backup does the work)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from stackflow.errors import StackflowError

if TYPE_CHECKING:
    from stackflow.settings import Settings


class NoTeamDatabase(StackflowError, ValueError):
    """The state folder runs no PostgreSQL of the project's to back up or restore into."""


class PrefectStillRunning(StackflowError, ValueError):
    """A restore would replace Prefect's database under the running server."""


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Back up or restore; 0.

    Raises:
        NoTeamDatabase, PrefectStillRunning: refused, nothing was changed (exit 2).
        BackupFileError: not a stackflow backup (exit 2).
        BackupError: pg_dump or pg_restore failed (exit 1; a restore replaced nothing).
    """
    from stackflow.postgres import ensure_postgres, postgres_status
    from stackflow.postgres.backup import backup, read_manifest, restore

    folder = settings.state.postgres
    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    if args.action == "backup":
        server = postgres_status(folder)
        if server is None:
            raise NoTeamDatabase(
                f"no PostgreSQL of the project runs from {folder}: start it with `python flows/run.py "
                "server start --database postgres` (a team's own PostgreSQL: see docs/guides/team-mode.md). "
                "Nothing was written."
            )
        manifest = backup(server, args.file, say=say)
        say(
            f"backed up {', '.join(manifest.names)} (PostgreSQL {manifest.server_version}) at "
            f"{manifest.created} into {args.file.expanduser().resolve()}"
        )
    else:
        manifest = read_manifest(args.file)  # a file that is not a backup is refused first
        if _prefect_running(settings):
            raise PrefectStillRunning(
                "the local Prefect server runs on the databases a restore replaces: stop it with "
                "`python flows/run.py server stop` (and the workers), then restore. Nothing was "
                "changed."
            )
        say(
            f"{args.file} holds {', '.join(manifest.names)}, taken {manifest.created} "
            f"(PostgreSQL {manifest.server_version}, stackflow {manifest.stackflow})"
        )
        settings.state.give_passage()  # the server's OS user passes through the state folder
        server = ensure_postgres(folder)  # on a new machine: a new cluster, then the restore
        restore(server, args.file, say=say)
        say(
            f"restored {', '.join(manifest.names)}; start the server again with `python "
            "flows/run.py server start --database postgres`"
        )
    if args.json:
        print(json.dumps(manifest.as_dict(), indent=2, sort_keys=True))
    return 0


def _prefect_running(settings: Settings) -> bool:
    from stackflow.localprefect import server_record
    from stackflow.processes import pid_alive

    pid = int((server_record(settings.state_dir) or {}).get("pid", 0))
    return pid > 0 and pid_alive(pid)
