"""deployments/: what serve.py registers (a parameter form the UI can render, schedules) and
deployments/prefect.yaml kept in step with it. The flows behind them run on the real engine in
test_real_engine.py and the browser tests; here nothing runs, deployments are only registered and
read back.

prefect.yaml is the team's (generated from its own environments): the tests of it are derived
from the committed project. serve.py's own rules are tested on the fixture project the unit
tier runs (tests/fixtures/template/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from deployments.serve import (
    DEFAULT_CLEANUP_CRON,
    DEFAULT_DRIFT_CRON,
    build_deployments,
    deployment_specs,
    main,
    triggers,
)

ROOT = Path(__file__).resolve().parents[2]
PREFECT_YAML = ROOT / "deployments" / "prefect.yaml"


def _committed() -> list[str]:
    """The environments the team's project declares (what its prefect.yaml serves)."""
    from stackflow.settings import declared_environments

    return declared_environments(ROOT)


def _prefect_yaml() -> dict[str, Any]:
    data = yaml.safe_load(PREFECT_YAML.read_text())
    assert isinstance(data, dict)
    return data


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    section, name = ref.removeprefix("#/").split("/")
    resolved = schema[section][name]
    assert isinstance(resolved, dict)
    return resolved


# --- serve.py as data ----------------------------------------------------------------------------


@pytest.mark.unit
def test_specs_cover_every_environment_and_schedule_only_drift_and_cleanup() -> None:
    specs = {s.full_name: s for s in deployment_specs(["dev", "staging", "dev"])}
    assert sorted(specs) == sorted(
        [f"{f}/{e}" for e in ("dev", "staging") for f in ("deploy", "preview", "destroy", "drift")]
        + [f"{f}/ephemeral" for f in ("deploy", "preview", "destroy")]
        + ["cleanup-expired/hourly"]
    )
    assert {n for n, s in specs.items() if s.cron} == {
        "drift/dev",
        "drift/staging",
        "cleanup-expired/hourly",
    }
    assert specs["drift/staging"].cron == DEFAULT_DRIFT_CRON == "0 3 * * *"
    assert specs["cleanup-expired/hourly"].cron == DEFAULT_CLEANUP_CRON == "0 * * * *"
    assert specs["deploy/staging"].parameters == {"environment": "staging"}
    assert specs["cleanup-expired/hourly"].parameters == {}
    # each acts on its own environment (its tag), the ephemeral ones on that kind only
    assert specs["deploy/staging"].tags == ("stackflow", "env:staging")
    assert specs["deploy/ephemeral"].tags == ("stackflow", "env-kind:ephemeral")
    assert specs["deploy/ephemeral"].parameters == {}
    assert specs["cleanup-expired/hourly"].tags == ("stackflow", "env-kind:ephemeral")


@pytest.mark.unit
def test_by_default_every_declared_environment_is_served() -> None:
    names = {s.name for s in deployment_specs(None)}
    assert {"dev", "staging", "prod", "ephemeral", "hourly"} == names


@pytest.mark.unit
def test_an_undeclared_or_ephemeral_name_is_not_served_on_its_own() -> None:
    from stackflow.settings import UnknownEnvironment

    with pytest.raises(UnknownEnvironment, match=r"environments/demo\.toml"):
        deployment_specs(["demo"])
    with pytest.raises(UnknownEnvironment, match="deploy/ephemeral"):
        deployment_specs(["pr-12"])


@pytest.mark.unit
def test_prefect_yaml_is_the_one_serve_py_generates() -> None:
    """Work pools get exactly what serve.py serves: `--write-prefect-yaml` regenerates it."""
    from deployments.prefect_yaml import prefect_yaml

    served = deployment_specs(None, project_dir=ROOT)
    assert PREFECT_YAML.read_text() == prefect_yaml(served), (
        "deployments/prefect.yaml is stale: run python deployments/serve.py --write-prefect-yaml"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "Prod_1"], "environment name 'Prod_1' is not accepted"),
        (["--drift-cron", "61 * * * *"], "61 * * * *"),
        (["--cleanup-cron", "hourly"], "hourly"),
    ],
)
def test_serve_refuses_bad_input_before_registering_anything(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err


# --- prefect.yaml ----------------------------------------------------------------------------------


@pytest.mark.unit
def test_prefect_yaml_is_accepted_by_prefect_deploys_own_model() -> None:
    # prefect's model ignores unknown keys, so also check every key is one it reads
    from prefect.cli.deploy._models import DeploymentConfig, PrefectYamlModel

    data = _prefect_yaml()
    model = PrefectYamlModel.model_validate(data)
    assert len(model.deployments) == len(data["deployments"]) > 0
    known = set(DeploymentConfig.model_fields)
    for raw in data["deployments"]:
        assert set(raw) <= known, f"unknown keys in {raw['entrypoint']}: {set(raw) - known}"
    review = {"branches", "ephemeral", "hourly"}  # review, ephemeral and cleanup runs
    for deployment in model.deployments:
        assert deployment.work_pool is not None
        wanted = "stackflow-review" if deployment.name in review else "stackflow"
        assert deployment.work_pool.name == wanted, (deployment.name, deployment.work_pool.name)
    steps = data["pull"]
    assert [next(iter(s)) for s in steps] == ["prefect.deployments.steps.set_working_directory"]


@pytest.mark.unit
def test_prefect_yaml_entrypoints_import_and_name_flows() -> None:
    from prefect import Flow
    from prefect.flows import load_flow_from_entrypoint

    for raw in _prefect_yaml()["deployments"]:
        path, _, func = raw["entrypoint"].partition(":")
        assert (ROOT / path).is_file(), raw["entrypoint"]
        assert func, f"{raw['entrypoint']}: no ':function' part"
        flow = load_flow_from_entrypoint(f"{ROOT / path}:{func}")
        assert isinstance(flow, Flow), f"{raw['entrypoint']} is not a Prefect flow"


@pytest.mark.unit
def test_prefect_yaml_schedules_are_valid_utc_crons() -> None:
    from prefect.schedules import validate_cron_string

    seen = 0
    for raw in _prefect_yaml()["deployments"]:
        for schedule in raw.get("schedules", []):
            assert set(schedule) == {"cron", "timezone"}, schedule
            validate_cron_string(schedule["cron"])
            assert schedule["timezone"] == "UTC"
            seen += 1
    assert seen == len(_committed()) + 1  # the drift of each environment, and the cleanup


@pytest.mark.unit
def test_prefect_yaml_matches_what_serve_registers() -> None:
    from prefect.events import DeploymentEventTrigger
    from prefect.flows import load_flow_from_entrypoint

    in_yaml = set()
    for raw in _prefect_yaml()["deployments"]:
        path, _, func = raw["entrypoint"].partition(":")
        flow_name = load_flow_from_entrypoint(f"{ROOT / path}:{func}").name
        crons = tuple(s["cron"] for s in raw.get("schedules", []))
        params = tuple(sorted((raw.get("parameters") or {}).items()))
        automations = tuple(
            DeploymentEventTrigger.model_validate(t).model_dump_json()
            for t in raw.get("triggers", [])
        )
        in_yaml.add(
            (flow_name, raw["name"], params, crons, tuple(raw.get("tags", [])), automations)
        )
    served = {
        (
            s.flow,
            s.name,
            tuple(sorted(s.parameters.items())),
            (s.cron,) if s.cron else (),
            s.tags,
            tuple(t.model_dump_json() for t in triggers(s)),
        )
        for s in deployment_specs(None, project_dir=ROOT)
    }
    assert in_yaml == served
    assert sum(bool(t[-1]) for t in served) == len(_committed())  # preview/<env>: on its drift


# --- registered on a real Prefect server ----------------------------------------------------------


@pytest.mark.integration
def test_served_deployments_expose_a_typed_described_parameter_form(
    prefect_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the UI's run form is built from: types, defaults, descriptions and the stack enum
    (the nodes of the graph this process's flows were declared with), for the fixture project's
    dev environment."""
    from prefect.client.orchestration import get_client

    from flows.pipeline import StackName
    from tests.fixtures.template import TEMPLATE

    monkeypatch.setenv("STACKFLOW_PROJECT_DIR", str(TEMPLATE))
    for deployment in build_deployments(["dev"]):
        deployment.apply()
    with get_client(sync_client=True) as client:
        got = {
            name: client.read_deployment_by_name(name)
            for name in ("deploy/dev", "preview/dev", "destroy/dev", "drift/dev")
        }
        cleanup = client.read_deployment_by_name("cleanup-expired/hourly")

    deploy = got["deploy/dev"]
    assert deploy.entrypoint == "flows.pipeline.deploy"
    assert deploy.parameters == {"environment": "dev"}
    assert deploy.enforce_parameter_schema is True
    schema = deploy.parameter_openapi_schema
    assert schema is not None
    props = schema["properties"]
    assert list(props) == ["environment", "stacks", "force", "cloud", "recreate"]
    assert props["environment"]["type"] == "string" and props["environment"]["default"] == "dev"
    # frozen: the UI shows it read-only and the server refuses a run that asks for another
    assert props["environment"]["readOnly"] is True and props["environment"]["enum"] == ["dev"]
    assert props["force"]["type"] == "boolean" and props["force"]["default"] is False
    assert props["recreate"]["type"] == "boolean" and props["recreate"]["default"] is False
    # where to deploy: empty (None) means what the environment's file says
    assert props["cloud"]["default"] is None
    clouds = [c for c in props["cloud"]["anyOf"] if c.get("type") != "null"]
    assert [_resolve(schema, c).get("enum") for c in clouds] == [["local", "aws"]]
    assert "file" in props["cloud"]["description"]
    for name, prop in props.items():
        assert len(prop.get("description", "")) > 10, f"{name} has no description"
    arrays = [a for a in props["stacks"]["anyOf"] if a.get("type") == "array"]
    assert len(arrays) == 1
    enum = _resolve(schema, arrays[0]["items"])
    assert enum["enum"] == [name.value for name in StackName] and enum["enum"]

    destroy_props = got["destroy/dev"].parameter_openapi_schema["properties"]
    assert destroy_props["confirm"]["type"] == "boolean"
    assert "prod" in destroy_props["confirm"]["description"]

    for name in ("deploy/dev", "preview/dev", "destroy/dev"):
        assert got[name].schedules == [], f"{name} should run on demand only"
    [drift] = got["drift/dev"].schedules
    assert (drift.schedule.cron, drift.schedule.timezone) == ("0 3 * * *", "UTC")  # type: ignore[union-attr]
    [hourly] = cleanup.schedules
    assert (hourly.schedule.cron, hourly.schedule.timezone) == ("0 * * * *", "UTC")  # type: ignore[union-attr]
    assert "dry_run" in cleanup.parameter_openapi_schema["properties"]

    # the drift automation is owned by preview/dev and runs it
    with get_client(sync_client=True) as client:
        owned = client.read_resource_related_automations(
            f"prefect.deployment.{got['preview/dev'].id}"
        )
    [automation] = [a for a in owned if a.name == "preview/dev on stackflow.drift.detected"]
    assert automation.enabled
    assert automation.trigger.expect == {"stackflow.drift.detected"}  # type: ignore[union-attr]
    assert automation.trigger.match.model_dump() == {"stackflow.environment": "dev"}  # type: ignore[union-attr]
    [action] = automation.actions
    assert action.type == "run-deployment"
    assert action.deployment_id == got["preview/dev"].id  # type: ignore[union-attr]


@pytest.mark.integration
def test_server_refuses_a_run_with_a_stack_outside_the_enum(prefect_server: Any) -> None:
    """The form's enum is enforced: a run asking for an unknown stack is never created."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import PrefectHTTPStatusError

    [preview] = [
        d for d in build_deployments(["dev"]) if d.flow_name == "preview" and d.name == "dev"
    ]
    deployment_id = preview.apply()
    with get_client(sync_client=True) as client:
        with pytest.raises(PrefectHTTPStatusError, match="nope"):
            client.create_flow_run_from_deployment(deployment_id, parameters={"stacks": ["nope"]})
        run = client.create_flow_run_from_deployment(
            deployment_id, parameters={"stacks": ["networking"]}
        )
        assert run.parameters["stacks"] == ["networking"]
        client.delete_flow_run(run.id)  # nothing serves it here; leave no scheduled run behind


@pytest.mark.integration
def test_a_served_deployment_refuses_a_run_for_another_environment(prefect_server: Any) -> None:
    """deploy/dev acts on dev only: a run asking for prod is never created (the frozen parameter's
    enum), and a run of deploy/ephemeral may name ephemeral environments only."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import PrefectHTTPStatusError

    ids = {f"{d.flow_name}/{d.name}": d.apply() for d in build_deployments(["dev"])}
    with get_client(sync_client=True) as client:
        with pytest.raises(PrefectHTTPStatusError, match="prod"):
            client.create_flow_run_from_deployment(
                ids["deploy/dev"], parameters={"environment": "prod"}
            )
        before = client.read_flow_runs()
        assert not [r for r in before if r.parameters.get("environment") == "prod"]


@pytest.mark.integration
def test_the_server_schedules_the_nightly_drift_check(prefect_server: Any) -> None:
    """Schedules fire: the server's scheduler creates the drift deployment's upcoming runs (Prefect
    3.8.8's scheduler cannot insert them on SQLAlchemy 2.1, which is why it is pinned to 2.0)."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    [drift] = [d for d in build_deployments(["dev"]) if d.flow_name == "drift"]
    deployment_id = drift.apply()
    deadline = time.monotonic() + 120  # the scheduler's loop for recent deployments: 5 s
    runs: list[Any] = []
    with get_client(sync_client=True) as client:
        only = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
        while not runs and time.monotonic() < deadline:
            runs = client.read_flow_runs(deployment_filter=only)
            if not runs:
                time.sleep(1)
        assert runs, "the scheduler created no run of drift/dev"
        assert all(r.state is not None and r.state.is_scheduled() for r in runs)
        assert {r.expected_start_time.hour for r in runs if r.expected_start_time} == {3}
        client.pause_deployment(deployment_id)  # nothing serves it: pausing drops its runs
