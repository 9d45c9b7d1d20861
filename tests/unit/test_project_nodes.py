"""Project nodes as data, with no engine: the config a node's entry maps (secret upstream values
secure), the stacks its program may read and how a refusal names both ends, its untyped outputs,
the URN renaming that adoption does, and the `graph` setting's module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from programs.common import UNKNOWN, UNKNOWN_WIRE
from programs.networking import NetworkingOutputs
from stackflow.dag import Untyped, parse_outputs, project_outputs
from stackflow.engine import OutputValue
from stackflow.engine.hosted import HostedProgram, reference_key
from stackflow.errors import SettingsError
from stackflow.graphs import load_graph
from stackflow.settings import get_settings
from stackflow.teamops.adopting import renamed

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "projects"
NETWORK = NetworkingOutputs(
    vpc_id="vpc-1",
    vpc_cidr="10.0.0.0/16",
    public_subnet_ids=["subnet-a", "subnet-b"],
    private_subnet_ids=["subnet-c", "subnet-d"],
    alb_security_group_id="sg-1",
    app_security_group_id="sg-2",
    db_security_group_id="sg-3",
)


def _fixture() -> Any:
    return load_graph(Path("/nonexistent"), "tests.fixtures.projects.graph")


@pytest.fixture
def settings_of(tmp_path: Path) -> Any:
    """Settings of a fixture project (templates per kind), never the committed environments."""
    from tests.realenv import test_project

    project = test_project(tmp_path / "project")
    return lambda name: get_settings(name, "local", environ={}, project_dir=project)


def test_a_project_nodes_spec_maps_upstream_outputs_into_its_stack_config(
    settings_of: Any,
) -> None:
    """Its own stack file's values, then the mapped ones under the project's namespace; the
    stack lives under the project's own name, labelled by environment and node."""
    graph = _fixture()
    settings = settings_of("dev-abc123")
    spec, inputs = graph.spec("site", settings, {"networking": NETWORK})
    assert spec.pulumi_project == "team-site" and spec.label == "dev-abc123/site"
    config = {k: (v.value, v.secret) for k, v in spec.config.items()}
    assert config["team-site:greeting"] == ("hello", False)  # Pulumi.dev.yaml (by kind)
    assert config["team-site:vpc_id"] == ("vpc-1", False)
    assert config["team-site:subnets"] == ("2", False)
    assert inputs.stack_file == "Pulumi.dev.yaml"
    assert set(inputs.files) == {"Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py", "naming.py"}
    program = spec.program
    assert isinstance(program, HostedProgram) and program.folder == FIXTURES / "site"
    assert program.readable == {"stackflow-networking/dev-abc123": "networking"}
    assert program.known == {
        "stackflow-networking/dev-abc123": "networking",
        "team-edge/dev-abc123": "edge",
        "team-site/dev-abc123": "site",
    }


def test_secret_values_become_secure_config_and_change_the_fingerprint_inputs(
    settings_of: Any,
) -> None:
    """A SecretStr the mapping returns, and a value holding a secret upstream output, are
    secure; a secret upstream output that changes changes what the fingerprint covers."""
    from graph.kinds import project
    from stackflow.dag import StackGraph

    def mapped(_: Any, up: Any) -> dict[str, Any]:
        return {"token": up["vault"].token, "url": f"https://user:{up['vault'].raw}@x", "n": 3}

    graph = StackGraph(
        [
            project("vault", "a secret", folder=FIXTURES / "edge"),
            project("site", "reads it", folder=FIXTURES / "site", upstream=("vault",)),
        ],
    )
    object.__setattr__(graph["site"].project, "config", mapped)
    settings = settings_of("dev-abc123")
    vault = Untyped.model_validate({"token": SecretStr("s3cr3t-token"), "raw": "pa55word"})
    spec, first = graph.spec("site", settings, {"vault": vault}, secrets=["pa55word"])
    config = {k: (v.value, v.secret) for k, v in spec.config.items()}
    assert config["team-site:token"] == ("s3cr3t-token", True)
    assert config["team-site:url"] == ("https://user:pa55word@x", True)
    assert config["team-site:n"] == ("3", False)
    other = Untyped.model_validate({"token": SecretStr("another-token"), "raw": "pa55word"})
    _, second = graph.spec("site", settings, {"vault": other}, secrets=["pa55word"])
    assert first.upstream != second.upstream
    assert "s3cr3t-token" not in first.model_dump_json()


def test_a_reference_outside_the_upstream_is_refused_naming_both_ends() -> None:
    program = HostedProgram(
        FIXTURES / "edge",
        FIXTURES / "edge" / "__main__.py",
        "edge",
        readable={"team-site/dev": "site"},
        known={"stackflow-networking/dev": "networking", "team-site/dev": "site"},
    )
    assert program.refusal("organization/team-site/dev", "team-edge", "dev") == ""
    assert program.refusal("team-site/dev", "team-edge", "dev") == ""
    why = program.refusal("organization/stackflow-networking/dev", "team-edge", "dev")
    assert why.startswith(
        "edge reads the stack organization/stackflow-networking/dev (deployed by the node "
        "networking) through a StackReference, but it is not among edge's upstream nodes "
        "(upstream stacks: site)"
    )
    assert "add networking to edge's upstream" in why
    assert "the node that deploys it" in program.refusal("elsewhere/prod", "team-edge", "dev")
    assert HostedProgram(FIXTURES, FIXTURES, "x").refusal("any/thing", "p", "s") == ""
    assert reference_key("prod", "team-edge", "dev") == "team-edge/prod"


def test_untyped_outputs_are_handed_on_as_they_are_and_projected_by_name(
    settings_of: Any,
) -> None:
    graph = _fixture()
    outputs = {"bucket": OutputValue("site-1"), "key": OutputValue("k-123456", secret=True)}
    typed = parse_outputs(graph["site"], outputs)
    assert isinstance(typed, Untyped)
    assert typed.bucket == "site-1" and isinstance(typed.key, SecretStr)  # type: ignore[attr-defined]
    settings = settings_of("dev-abc123")
    moved = project_outputs(graph["site"], settings, outputs, {"bucket": OutputValue(UNKNOWN_WIRE)})
    assert moved.unknown == ("bucket",) and moved.outputs.bucket is UNKNOWN  # type: ignore[attr-defined]


def test_adoption_renames_every_urn_of_the_stack_and_its_root_resource() -> None:
    deployment = {
        "resources": [
            {"urn": "urn:pulumi:dev::team-site::pulumi:pulumi:Stack::team-site-dev"},
            {
                "urn": "urn:pulumi:dev::team-site::pulumi:pulumi:Stack$aws:s3/bucket:Bucket::site",
                "parent": "urn:pulumi:dev::team-site::pulumi:pulumi:Stack::team-site-dev",
                "provider": "urn:pulumi:dev::team-site::pulumi:providers:aws::default::abc",
                "outputs": {"bucket": "team-site-dev-bucket"},
            },
        ]
    }
    moved = renamed(deployment, "team-site", "dev", "dev-1a2b3c")
    root, bucket = moved["resources"]
    assert (
        root["urn"] == "urn:pulumi:dev-1a2b3c::team-site::pulumi:pulumi:Stack::team-site-dev-1a2b3c"
    )
    assert bucket["parent"] == root["urn"]
    assert bucket["urn"].startswith("urn:pulumi:dev-1a2b3c::team-site::pulumi:pulumi:Stack$aws")
    assert bucket["provider"].startswith("urn:pulumi:dev-1a2b3c::team-site::pulumi:providers")
    assert bucket["outputs"] == {"bucket": "team-site-dev-bucket"}  # values are not names


def test_the_graph_setting_names_a_module_beside_the_project_or_is_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "teamgraph.py").write_text(
        "from graph.kinds import project\nfrom stackflow.dag import StackGraph\n"
        f"GRAPH = StackGraph([project('web', 'w', folder={str(FIXTURES / 'site')!r})])\n"
    )
    assert load_graph(tmp_path, "teamgraph").order() == ["web"]
    (tmp_path / "empty.py").write_text("X = 1\n")
    with pytest.raises(SettingsError, match=r"graph = 'empty' .*declares no GRAPH"):
        load_graph(tmp_path, "empty")
    with pytest.raises(SettingsError, match=r"graph = 'no.such': no such module in "):
        load_graph(tmp_path, "no.such")


def test_the_graph_command_refuses_a_graph_setting_that_names_no_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main
    from stackflow import exits

    (tmp_path / "stackflow.toml").write_text('project = "stackflow"\ngraph = "nope.mod"\n')
    monkeypatch.setenv("STACKFLOW_PROJECT_DIR", str(tmp_path))
    assert main(["graph"]) == exits.USAGE
    said = capsys.readouterr().err
    assert "error: graph = 'nope.mod': no such module in " in said and "Traceback" not in said
