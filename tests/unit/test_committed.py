"""Tests of the team's own project: the stackflow.toml, graph and environment files at the top of
this checkout, which a team edits (a stack added, a project node, a third AZ). Each test is
derived from what is there, so it holds for any content, and a node or an environment added gets
its own test ids: every environment loads; in each, every program stack's arguments are built
from its upstream outputs as a first preview projects them (UNKNOWN where only an `up` knows) and
from the values that arrive while it runs when it starts early, and its program runs under
Pulumi's mock runtime as a preview does (no engine, no cloud: the mocks answer every resource);
every project node is a Pulumi Python project stackflow can run.

The framework's own tests run the fixture project instead (tests/fixtures/template/).
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from stackflow import PROJECT_ROOT
from stackflow.dag import NodeKind
from stackflow.graphs import project_graph
from stackflow.later import placeholders
from stackflow.projection import project_outputs, untyped
from stackflow.settings import EnvironmentKind, Settings, declared_environments, get_settings
from tests.unit.pulumi_mocks import AwsMocks, run_program

pytestmark = pytest.mark.unit

GRAPH = project_graph(PROJECT_ROOT)  # the graph the team's stackflow.toml names
DECLARED = declared_environments(PROJECT_ROOT)
A_NAME_OF_KIND = {
    EnvironmentKind.DEV: "dev-1",
    EnvironmentKind.STAGING: "staging-1",
    EnvironmentKind.PROD: "prod-1",
    EnvironmentKind.EPHEMERAL: "pr-1",
}  # a name each kind's template (environments/templates/<kind>.toml) gives its settings
TEMPLATES = sorted(
    A_NAME_OF_KIND[kind]
    for kind in EnvironmentKind
    if (PROJECT_ROOT / "environments" / "templates" / f"{kind.value}.toml").is_file()
    and A_NAME_OF_KIND[kind] not in DECLARED
)
ENVIRONMENTS = DECLARED + TEMPLATES
PROGRAMS = [n for n in GRAPH.stacks if GRAPH[n].project is None]
PROJECTS = [n for n in GRAPH.stacks if GRAPH[n].project is not None]


def settings_of(environment: str) -> Settings:
    """What the committed files say of `environment`, read with no machine's variables (a
    passphrase stands in for the machine's, which an environment on AWS needs)."""
    return get_settings(
        environment, project_dir=PROJECT_ROOT, environ={"STACKFLOW_STATE_PASSPHRASE": "derived"}
    )


def first_preview(settings: Settings, stack: str) -> dict[str, BaseModel]:
    """The upstream outputs a first preview hands `stack`: each upstream stack's outputs as its
    preview projects them with nothing deployed (what settings know, else UNKNOWN)."""
    return {
        up: project_outputs(GRAPH[up], settings, {}, {}).outputs
        for up in GRAPH.upstream_stacks(stack)
    }


def each(names: list[str]) -> list[pytest.ParameterSet]:
    """(environment, node) for every environment and each of `names`, with ids env/node."""
    return [pytest.param(e, n, id=f"{e}/{n}") for e in ENVIRONMENTS for n in names]


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_every_environment_loads_from_its_file(environment: str) -> None:
    settings = settings_of(environment)
    assert settings.environment == environment
    kind = settings.environment_kind.value
    own = f"environments/{environment}.toml"
    assert settings.source.environment_file == (
        own if environment in DECLARED else f"environments/templates/{kind}.toml"
    )


@pytest.mark.parametrize(("environment", "stack"), each(PROGRAMS))
def test_every_stack_takes_its_upstream_outputs(environment: str, stack: str) -> None:
    """As a first preview hands them, and, for a stack that starts before an upstream stack has
    ended (`early`), as values that arrive while its update runs."""
    settings = settings_of(environment)
    spec, _ = GRAPH.spec(stack, settings, first_preview(settings, stack))
    assert (spec.node, spec.environment) == (stack, environment)
    node = GRAPH[stack]
    arriving = {
        up: placeholders(up, model)
        for up in node.early
        if (model := GRAPH[up].outputs) is not None and GRAPH[up].kind is NodeKind.STACK
    }
    if arriving:
        early, _ = GRAPH.spec(stack, settings, first_preview(settings, stack) | arriving)
        assert early.node == stack


@pytest.mark.parametrize(("environment", "stack"), each(PROGRAMS))
def test_every_program_previews_under_pulumis_mock_runtime(environment: str, stack: str) -> None:
    """Its program runs to its end with the arguments of a first preview, and exports every
    output its model declares (UNKNOWN where only an update knows it)."""
    settings = settings_of(environment)
    spec, _ = GRAPH.spec(stack, settings, first_preview(settings, stack))
    mocks = AwsMocks(spec.pulumi_project, environment, settings.aws.region)
    assert callable(spec.program)
    run = run_program(
        spec.program, mocks, project=spec.pulumi_project, stack=environment, preview=True
    )
    assert run.resources, f"{stack} declared no resource"
    model = GRAPH[stack].outputs
    if model is not None and not untyped(GRAPH[stack]):
        missing = set(model.model_fields) - set(run.exports)
        assert not missing, f"{stack} does not export {sorted(missing)}"


@pytest.mark.parametrize(("environment", "project"), each(PROJECTS))
def test_every_project_node_is_a_pulumi_python_project_of_its_own_name(
    environment: str, project: str
) -> None:
    settings = settings_of(environment)
    source = GRAPH[project].project
    assert source is not None
    loaded = source.load()  # ProjectError: not a Pulumi Python project, naming the file
    assert not loaded.name.startswith(f"{settings.project}-"), (
        f"{loaded.file}: {loaded.name!r} is a name of stackflow's own projects"
    )
    spec = GRAPH.bare_spec(settings, project)
    assert (spec.pulumi_project, spec.environment) == (loaded.name, environment)
