"""Which environments a run may act on: a deployment made for `dev` acts on dev only, and one
made for the ephemeral kind on ephemeral names only (pr-<n>, ...), never dev, staging or prod.

A deployment says its scope in its tags (`env:<name>`, or `env-kind:ephemeral`); the deployment's
own tags are read from the server (a run's parameters and tags can be edited when it is created,
the deployment's cannot). A run asking for another environment is refused before anything
starts: no engine call, no lock, no record. Served deployments also freeze the parameter, so
the Prefect UI refuses such a run when it is created; `prefect deploy` rebuilds the schema from
the flow's signature, which is why the flow checks again.

Self-hosted Prefect has no access control: this guards against mistakes (a Quick run of
deploy/dev with environment=prod), not against someone who can create deployments.
"""

from __future__ import annotations

from stackflow.errors import SettingsError
from stackflow.settings import EnvironmentKind, kind_of

SCOPE_TAG = "env:"
KIND_TAG = "env-kind:"


class OutOfScope(SettingsError):
    """A run of a deployment asked for an environment the deployment does not act on."""


def deployment_tags() -> tuple[str, list[str]] | None:
    """(deployment name, its tags) of the current flow run's deployment; None outside one."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    deployment_id = getattr(getattr(context, "flow_run", None), "deployment_id", None)
    if deployment_id is None:
        return None
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment(deployment_id)
    return deployment.name, list(deployment.tags or [])


def check_scope(environment: str, kind: EnvironmentKind | None = None) -> None:
    """Refuse a run whose deployment does not act on `environment`.

    Args:
        environment: the environment the run asks for.
        kind: its kind, when known (else the kind its name implies).

    Raises:
        OutOfScope: naming the deployment, what it acts on and what was asked.
    """
    found = deployment_tags()
    if found is None:
        return  # not a deployment's run: the command line, a test, a parent flow
    name, tags = found
    scopes = {t.removeprefix(SCOPE_TAG) for t in tags if t.startswith(SCOPE_TAG)}
    kinds = {t.removeprefix(KIND_TAG) for t in tags if t.startswith(KIND_TAG)}
    actual = (kind or kind_of(environment)).value
    if len(scopes) == 1 and not kinds:
        (scope,) = scopes
        if environment == scope:
            return
        raise OutOfScope(
            f"deployment {name!r} acts on environment {scope!r} only, and this run asked for "
            f"{environment!r}: run the deployment made for {environment!r} instead. Nothing was "
            "changed."
        )
    if kinds and not scopes:
        if actual in kinds:
            return
        raise OutOfScope(
            f"deployment {name!r} acts on {', '.join(sorted(kinds))} environments only, and "
            f"{environment!r} is a {actual} environment: run the deployment made for it. "
            "Nothing was changed."
        )
    raise OutOfScope(
        f"deployment {name!r} does not say which environment it acts on (one tag "
        f"{SCOPE_TAG}<environment>, or {KIND_TAG}ephemeral; it has {sorted(tags)}): register it "
        "with deployments/serve.py or deployments/prefect.yaml. Nothing was changed."
    )
