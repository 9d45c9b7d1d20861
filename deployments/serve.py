"""Register and serve stackflow's deployments in one process: `python deployments/serve.py`.

Per environment: deploy, preview and destroy (run on demand from the UI or `prefect deployment
run`) and drift on a cron (nightly by default); plus one hourly cleanup of expired ephemeral
environments. Runs execute in this process's machine with its STACKFLOW_* settings; for work pools
use deployments/prefect.yaml instead.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_DRIFT_CRON = "0 3 * * *"
DEFAULT_CLEANUP_CRON = "0 * * * *"


def build_deployments(
    environments: list[str],
    drift_cron: str = DEFAULT_DRIFT_CRON,
    cleanup_cron: str = DEFAULT_CLEANUP_CRON,
) -> list[Any]:
    """The RunnerDeployments to serve; names are `<flow>/<environment>`."""
    from flows.cleanup import cleanup_expired
    from flows.pipeline import deploy, destroy, drift, preview
    from stackflow.settings import validate_environment_name

    result = []
    for env in environments:
        validate_environment_name(env)
        tags = ["stackflow", f"env:{env}"]
        for flow_obj, what in ((deploy, "deploy"), (preview, "preview"), (destroy, "destroy")):
            result.append(
                flow_obj.to_deployment(
                    name=env,
                    parameters={"environment": env},
                    tags=tags,
                    description=f"{what} the {env} environment (on demand)",
                )
            )
        result.append(
            drift.to_deployment(
                name=env,
                parameters={"environment": env},
                tags=tags,
                cron=drift_cron,
                description=f"nightly drift check of {env}: a failed run and a stackflow.drift.detected event on drift",
            )
        )
    result.append(
        cleanup_expired.to_deployment(
            name="hourly",
            tags=["stackflow"],
            cron=cleanup_cron,
            description="destroy ephemeral environments (pr-123, ...) whose TTL has passed",
        )
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python deployments/serve.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--env",
        "-e",
        action="append",
        dest="environments",
        help="environment to serve (repeatable; default: dev)",
    )
    parser.add_argument(
        "--drift-cron",
        default=DEFAULT_DRIFT_CRON,
        help=f"cron for drift (default '{DEFAULT_DRIFT_CRON}')",
    )
    parser.add_argument(
        "--cleanup-cron", default=DEFAULT_CLEANUP_CRON, help="cron for cleanup (default hourly)"
    )
    parser.add_argument("--limit", type=int, default=4, help="flow runs at once (default 4)")
    args = parser.parse_args(argv)
    from prefect import serve

    from stackflow.errors import StackflowError

    try:
        deployments = build_deployments(
            args.environments or ["dev"], args.drift_cron, args.cleanup_cron
        )
    except (StackflowError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    serve(*deployments, limit=args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
