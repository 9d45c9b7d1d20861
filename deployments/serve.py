"""Register and serve stackflow's deployments in one process: `python deployments/serve.py`.

Per environment the project declares (environments/<name>.toml): deploy, preview and destroy (on
demand from the UI or `prefect deployment run`) and drift on a cron (nightly by default), each
acting on that environment only; preview also runs, through a Prefect automation, when a
`stackflow.drift.detected` event names its environment. An environment that follows a branch gets
sync (run when a `stackflow.git.pushed` event names its branch, and by gitops/poll, one run per
interval for all of them, when it finds the branch moved). For the ephemeral kind (pr-<n>, ...):
deploy, preview and destroy that accept names of that kind only, and the hourly cleanup of
expired ones. Runs execute in this process; for work pools and workers, deployments/prefect.yaml
declares the same set (`--write-prefect-yaml` regenerates it from this module).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events import DeploymentTriggerTypes, TriggerTypes

from deployments.specs import (  # noqa: F401  (what callers import from here)
    DEFAULT_CLEANUP_CRON,
    DEFAULT_DRIFT_CRON,
    DRIFT_EVENT,
    PREFECT_YAML,
    TIMEZONE,
    TRIGGER_WITHIN_S,
    DeploymentSpec,
    deployment_specs,
)


def build_deployments(
    environments: list[str] | None = None,
    drift_cron: str = DEFAULT_DRIFT_CRON,
    cleanup_cron: str = DEFAULT_CLEANUP_CRON,
    role: str | None = None,
) -> list[RunnerDeployment]:
    """The RunnerDeployments to serve; the environment parameter of an environment's own
    deployments is frozen, so the UI refuses a run that asks for another.

    Args:
        role: "review" serves only the review, ephemeral and cleanup deployments (a review
            worker's), "trusted" all the others; None: all of them (one person, one machine).

    Raises:
        ValueError: an invalid or undeclared environment name, or an invalid cron string.
    """
    from prefect.schedules import Cron, Interval
    from prefect.types.entrypoint import EntrypointType
    from prefect.utilities.annotations import freeze

    from flows.cleanup import cleanup_expired
    from flows.pipeline import deploy, destroy, drift, preview
    from flows.poll import poll_branches
    from flows.review import review_branches
    from flows.sync import sync_environment

    flows = {
        f.name: f
        for f in (
            deploy,
            preview,
            destroy,
            drift,
            cleanup_expired,
            sync_environment,
            review_branches,
            poll_branches,
        )
    }

    def schedules(spec: DeploymentSpec) -> list[Any] | None:
        if spec.cron:
            return [Cron(spec.cron, timezone=TIMEZONE)]
        if spec.interval_s:
            return [Interval(timedelta(seconds=spec.interval_s))]
        return None

    # to_deployment is dispatched: called from sync code it returns the deployment itself
    return [
        cast(
            "RunnerDeployment",
            flows[spec.flow].to_deployment(
                name=spec.name,
                parameters={k: freeze(v) for k, v in spec.parameters.items()},
                tags=list(spec.tags),
                description=spec.description,
                schedules=schedules(spec),
                entrypoint_type=EntrypointType.MODULE_PATH,
                triggers=triggers(spec) or None,
            ),
        )
        for spec in deployment_specs(environments, drift_cron, cleanup_cron)
        if role is None or spec.review == (role == "review")
    ]


def triggers(spec: DeploymentSpec) -> list[DeploymentTriggerTypes | TriggerTypes]:
    """The automations that run `spec` when an event matches (its drift, its branch's push)."""
    from prefect.events import DeploymentEventTrigger

    return [
        DeploymentEventTrigger(
            name=f"{spec.full_name} on {' or '.join(t.events)}",
            description=f"run {spec.full_name} when {t.about}",
            expect=set(t.events),
            match=dict(t.match),
            posture="Reactive",
            threshold=1,
            within=timedelta(seconds=t.within_s),
        )
        for t in spec.triggers
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python deployments/serve.py", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--env",
        "-e",
        action="append",
        dest="environments",
        help="environment to serve (repeatable; default: every environment the project declares)",
    )
    parser.add_argument(
        "--drift-cron",
        default=DEFAULT_DRIFT_CRON,
        help=f"cron for drift, {TIMEZONE} (default '{DEFAULT_DRIFT_CRON}': nightly at 03:00)",
    )
    parser.add_argument(
        "--cleanup-cron",
        default=DEFAULT_CLEANUP_CRON,
        help=f"cron for cleanup, {TIMEZONE} (default '{DEFAULT_CLEANUP_CRON}': hourly)",
    )
    parser.add_argument(
        "--role",
        choices=("trusted", "review"),
        help="serve only the review, ephemeral and cleanup deployments (review: on a worker of "
        "their own, docs/operations/trust-model.md) or only the others (trusted); default: all",
    )
    parser.add_argument("--limit", type=int, default=4, help="flow runs at once (default 4)")
    parser.add_argument(
        "--write-prefect-yaml",
        action="store_true",
        help="regenerate deployments/prefect.yaml (work pools) from the same data, then exit",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.write_prefect_yaml:
        from deployments.prefect_yaml import prefect_yaml

        PREFECT_YAML.write_text(prefect_yaml(deployment_specs(None)))
        print(f"wrote {PREFECT_YAML}")
        return 0
    from stackflow import arenas
    from stackflow.crashes import send_heartbeats

    send_heartbeats()  # runs this process starts inherit it: the zombie automation spares them
    arenas.limit()
    for name, value in arenas.environment().items():  # and the runs it starts: two arenas
        os.environ.setdefault(name, value)
    try:
        deployments = build_deployments(
            args.environments, args.drift_cron, args.cleanup_cron, args.role
        )
        install_notices()
    except ValueError as exc:  # a bad environment name or cron: say which, serve nothing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    serve_bounded(deployments, limit=args.limit)
    return 0


def install_notices() -> None:
    """The notification automations `[notifications] block` asks for, on the server this process
    serves to (see `stackflow.notifications`); nothing when it is unset.

    Raises:
        SettingsError: a bad setting, or a block the server does not have.
    """
    from prefect.client.orchestration import get_client

    from stackflow.notifications import install_notifications
    from stackflow.settings import get_settings

    block = get_settings(strict=False).notifications.block
    if block is None:
        return
    with get_client(sync_client=True) as client:
        for line in install_notifications(client, block):
            print(line)


PAUSE_WITHIN_S = (
    5.0  # pausing the schedules at shutdown is best effort: a gone server never answers
)
EXIT_WITHIN_S = 10.0  # after SIGTERM the process ends by then, whatever still waits


def serve_bounded(deployments: list[RunnerDeployment], limit: int) -> None:
    """Prefect's `serve`, except that a SIGTERM ends the process within EXIT_WITHIN_S even when
    the Prefect server is gone: pausing the deployments' schedules is tried for PAUSE_WITHIN_S,
    and what still waits after that (the client's retries of a server that never answers) is
    cut short, the runs this process started told to stop first."""
    import asyncio
    import threading

    import anyio
    from prefect.exceptions import TerminationSignal
    from prefect.runner import Runner

    names = ", ".join(sorted(f"{d.flow_name}/{d.name}" for d in deployments))

    class BoundedRunner(Runner):
        async def __aenter__(self) -> BoundedRunner:
            await super().__aenter__()
            print(f"serving {len(deployments)} deployments: {names} (Ctrl-C or SIGTERM stops)")
            return self

        def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
            timer = threading.Timer(EXIT_WITHIN_S, _exit_now)
            timer.daemon = True
            timer.start()
            super().handle_sigterm(*args, **kwargs)

        async def _pause_schedules(self) -> None:
            with anyio.move_on_after(PAUSE_WITHIN_S) as scope:
                await super()._pause_schedules()  # type: ignore[no-untyped-call]
            if scope.cancelled_caught:
                self._logger.warning(
                    "the Prefect server did not answer within %gs: deployments left unpaused",
                    PAUSE_WITHIN_S,
                )

    runner = BoundedRunner(pause_on_shutdown=True, limit=limit)
    for deployment in deployments:
        runner.add_deployment(deployment)
    with contextlib.suppress(KeyboardInterrupt, TerminationSignal):
        asyncio.run(runner.start())


def _exit_now() -> None:
    """The end of a SIGTERM that took too long: the runs this process started get SIGTERM (each
    ends cancelled), then the process exits without waiting for anything else."""
    import signal
    from pathlib import Path

    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = stat.read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if parent == me:
            with contextlib.suppress(OSError):
                os.kill(int(stat.parent.name), signal.SIGTERM)
    print("serve: stopped after SIGTERM without waiting for the Prefect server", file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
