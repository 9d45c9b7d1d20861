"""Every command of `python flows/run.py`, one module each, and the one table that names them:
its order is `--help`'s. An entry gives the command's name, its help line, the function that runs
it and the options it takes (the shared ones from cli/options.py, then its module's own).
docs/development/commands.md says how to add one.
"""

from __future__ import annotations

from cli.command import CodeCommand, Command
from cli.commands import (
    approve,
    audit,
    cloud,
    destroy,
    drift,
    graph,
    migrate,
    outputs,
    preview,
    refresh,
    rehearse,
    server,
    status,
    team,
    up,
)
from cli.options import cloud as cloud_option
from cli.options import environment, json_object, live, stacks, tags

RUN = (environment, cloud_option, stacks, live, tags)  # the options of a command that runs a flow
COMMANDS: tuple[Command | CodeCommand, ...] = (
    Command(
        "up",
        "deploy the environment: networking, database, migrations, app, verification",
        up.run,
        (*RUN, up.add_arguments),
    ),
    Command(
        "approve",
        "sign the plan a run of the environment waits on at its approval gate and approve it "
        "(or --reject it, or --print-signature for the Prefect UI's form)",
        approve.run,
        (environment, cloud_option, approve.add_arguments),
    ),
    Command("preview", "show what `up` would change, changing nothing", preview.run, RUN),
    Command("refresh", "update state from what exists in the cloud", refresh.run, RUN),
    Command(
        "destroy",
        "destroy the environment's stacks in reverse order",
        destroy.run,
        (*RUN, destroy.add_arguments),
    ),
    Command("drift", "check every stack for drift; exits 3 when drift is found", drift.run, RUN),
    Command(
        "outputs",
        "print the stacks' outputs (secrets masked)",
        outputs.run,
        (environment, cloud_option, stacks, outputs.add_arguments),
    ),
    CodeCommand(
        "graph",
        "print the stack graph as Mermaid",
        graph.run,
        (environment, cloud_option, json_object),
    ),
    Command(
        "migrate",
        "run schema migrations against the environment's database or --database-url",
        migrate.run_on_environment,
        (environment, cloud_option, migrate.add_arguments),
    ),
    Command(
        "server",
        "start, stop or show the local Prefect server the CLI starts when PREFECT_API_URL is "
        "unset; stop also stops the local cloud",
        server.run,
        (environment, cloud_option, server.add_arguments),
    ),
    Command(
        "cloud",
        "start, stop, show or list the local cloud (moto's AWS APIs on loopback, a MariaDB per "
        "database); `up` starts it on demand",
        cloud.run,
        (environment, cloud_option, cloud.add_arguments),
    ),
    Command(
        "team",
        "team operations: import a one-machine state folder into the team's backend, rotate the "
        "team's passphrase, adopt a project deployed from its own backend",
        team.run,
        (environment, cloud_option, team.add_arguments),
    ),
    Command(
        "status",
        "every recorded environment: per stack its last operation, result, commit and condition "
        "(ready, reconciling, failed, drifted, expired, waiting for approval)",
        status.run,
        (environment, cloud_option, status.add_arguments),
    ),
    Command(
        "audit",
        "the audit log: every run started, approval, refusal, lock broken, pending operation "
        "imported or cleared, environment expired or destroyed and team operation, and whether "
        "its chain of hashes holds",
        audit.run,
        (environment, cloud_option, audit.add_arguments),
    ),
    Command(
        "rehearse",
        "deploy a Pulumi Python project of your own (a folder with Pulumi.yaml) with stackflow's "
        "engine, on the local cloud unless --cloud aws",
        rehearse.run,
        (rehearse.add_cloud, live, rehearse.add_arguments),
        default_cloud="local",  # a rehearsal reaches AWS only when told to
    ),
)
