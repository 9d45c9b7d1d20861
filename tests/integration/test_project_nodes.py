"""Project nodes: a team's existing Pulumi Python projects as members of the graph, on the real
Pulumi engine and the session's **local cloud** (moto on loopback, not AWS).

The fixture graph (tests/fixtures/projects/graph.py, chosen by `graph = ...` in the test project's
stackflow.toml) is stackflow's networking program and two project folders: `edge` reads the
networking stack through a StackReference, `site` gets networking's outputs as its stack config.
One environment, in file order: a first preview says the projects are not previewable before
networking exists; `up` deploys all three; a second `up` skips every stack with no engine call; a
change to networking is previewed downstream as the guide says (the deployed values, "upstream
changes not projected"), then applied; a console change to the site's bucket is drift; `destroy`
takes the projects down before networking. A second graph whose project reads networking
without naming it upstream is refused at its preview, naming both.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stackflow import exits
from tests.realenv import (
    ROOT,
    cli,
    declare,
    process_env,
    project_file,
    real_variables,
    unique,
)

pytestmark = pytest.mark.integration

FIXTURE = "tests.fixtures.projects.graph"


def _history(state: Path, project: str, environment: str) -> list[dict[str, Any]]:
    """Pulumi's record of each finished update of one Pulumi project's stack, oldest first."""
    folder = state / "pulumi-local" / ".pulumi" / "history" / project / environment
    found = [json.loads(p.read_text()) for p in folder.glob("*.history.json")]
    return sorted(found, key=lambda r: r["startTime"])


def _with_graph(variables: dict[str, str], module: str) -> None:
    project = Path(variables["STACKFLOW_PROJECT_DIR"])
    (project / "stackflow.toml").write_text(project_file(module))


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any
) -> Iterator[dict[str, Any]]:
    """A project whose stackflow.toml names the fixture graph, and one environment of its own."""
    folder = tmp_path_factory.mktemp("projects")
    variables = real_variables(folder / "state", local_cloud, prefect_server)
    _with_graph(variables, FIXTURE)
    name = unique("dev")
    declare(variables, name)
    yield {
        "env": process_env(variables),
        "variables": variables,
        "name": name,
        "state": folder / "state",
        "cloud": local_cloud,
    }


def _run(team: dict[str, Any], *args: str) -> tuple[int, dict[str, Any], str]:
    done = cli(team["env"], *args, "--env", team["name"], "--json", timeout=600)
    summary = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, summary, done.stdout + done.stderr


def _by_stack(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["stack"]: s for s in summary["stacks"]}


def _tags(team: dict[str, Any], bucket: str) -> dict[str, str]:
    s3 = team["cloud"].client("s3")
    return {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket)["TagSet"]}


def test_the_graph_draws_both_kinds_of_node(team: dict[str, Any]) -> None:
    done = cli(team["env"], "graph", "--json")
    assert done.returncode == 0, done.stderr
    nodes = {n["name"]: n for n in json.loads(done.stdout)["nodes"]}
    assert list(nodes) == ["networking", "edge", "site"]
    assert "project" not in nodes["networking"]
    assert nodes["edge"]["project"] == str(ROOT / "tests/fixtures/projects/edge")
    assert nodes["site"]["upstream"] == ["networking"]
    drawn = cli(team["env"], "graph").stdout
    assert 'edge[/"edge<br/>edge/"/]' in drawn and "networking --> site" in drawn


def test_before_networking_exists_the_projects_are_not_previewable_yet(
    team: dict[str, Any],
) -> None:
    """Local cloud: networking previews its creates; each project says plainly it waits for
    networking, with no engine call of its own, and the preview succeeds."""
    code, summary, said = _run(team, "preview")
    assert code == exits.OK, said
    stacks = _by_stack(summary)
    assert stacks["networking"]["changes"]["create"] > 0
    for project in ("edge", "site"):
        assert "not previewable until networking is deployed" in stacks[project]["note"]
    assert summary["engine_calls"] == ["preview:networking"]


def test_up_deploys_the_projects_through_a_stack_reference_and_through_config(
    team: dict[str, Any],
) -> None:
    """Local cloud: edge's security group is in the VPC it read through the StackReference, and
    site's bucket is tagged with the VPC given to it as config; both live under their own
    Pulumi project names in stackflow's backend."""
    code, summary, said = _run(team, "up")
    assert code == exits.OK, said
    stacks = _by_stack(summary)
    assert [stacks[n]["status"] for n in ("networking", "edge", "site")] == ["updated"] * 3
    vpc = stacks["networking"]["outputs"]["vpc_id"]
    assert stacks["edge"]["outputs"]["vpc_id"] == vpc
    group = stacks["edge"]["outputs"]["security_group_id"]
    ec2 = team["cloud"].client("ec2")
    assert ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]["VpcId"] == vpc
    bucket = stacks["site"]["outputs"]["bucket"]
    assert _tags(team, bucket) == {"vpc": vpc, "subnets": "2", "greeting": "hello"}
    for project in ("team-edge", "team-site"):
        assert len(_history(team["state"], project, team["name"])) == 1
    team["bucket"], team["vpc"] = bucket, vpc


def test_a_second_up_skips_every_stack_with_no_engine_call(team: dict[str, Any]) -> None:
    code, summary, said = _run(team, "up")
    assert code == exits.OK, said
    assert {s["status"] for s in summary["stacks"]} == {"unchanged"}, summary["stacks"]
    assert summary["engine_calls"] == []


def _status(team: dict[str, Any]) -> dict[str, Any]:
    done = cli(team["env"], "status", "--env", team["name"], "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    (found,) = json.loads(done.stdout)["environments"]
    return dict(found)


def test_status_shows_the_project_nodes_beside_the_stacks(team: dict[str, Any]) -> None:
    """Local cloud: after the ups, `status` lists both projects as ready with the outputs their
    stacks hold (edge's VPC is networking's), like stackflow's own stack."""
    found = _status(team)
    stacks = {s["stack"]: s for s in found["stacks"]}
    assert list(stacks) == ["networking", "edge", "site"]
    assert {s["condition"] for s in stacks.values()} == {"ready"}, stacks
    assert found["condition"] == "ready"
    assert found["outputs"]["edge"]["vpc_id"] == team["vpc"]
    assert found["outputs"]["site"]["bucket"] == team["bucket"]


def test_a_change_upstream_is_previewed_downstream_with_the_deployed_values(
    team: dict[str, Any],
) -> None:
    """Local cloud: a third availability zone adds subnets to networking; the projects' previews
    show the values deployed now, saying the upstream changes are not projected; the up then
    gives site the new subnet count and edge its unchanged VPC."""
    declare(team["variables"], team["name"], network={"az_count": 3})
    code, summary, said = _run(team, "preview")
    assert code == exits.OK, said
    stacks = _by_stack(summary)
    assert stacks["networking"]["changes"]["create"] > 0
    for project in ("edge", "site"):
        note = stacks[project]["note"]
        assert "upstream changes not projected (networking: " in note, note
        assert "public_subnet_ids" in note and stacks[project]["changes"]["update"] == 0
    code, summary, said = _run(team, "up")
    assert code == exits.OK, said
    stacks = _by_stack(summary)
    assert stacks["site"]["status"] == "updated" and stacks["site"]["changes"]["update"] == 1
    assert stacks["edge"]["status"] == "unchanged"  # it ran: its upstream's outputs moved
    assert "up:edge" in summary["engine_calls"]
    assert _tags(team, team["bucket"])["subnets"] == "3"


def test_a_console_change_to_a_projects_resource_is_drift(team: dict[str, Any]) -> None:
    """Local cloud: the site bucket's tags changed with boto3, as in the console."""
    s3 = team["cloud"].client("s3")
    s3.put_bucket_tagging(
        Bucket=team["bucket"], Tagging={"TagSet": [{"Key": "greeting", "Value": "changed"}]}
    )
    code, summary, said = _run(team, "drift")
    assert code == exits.DRIFT, said
    stacks = _by_stack(summary)
    assert stacks["site"]["status"] == "drift"
    assert stacks["edge"]["status"] == "no-drift" and stacks["networking"]["status"] == "no-drift"
    status = {s["stack"]: s["condition"] for s in _status(team)["stacks"]}
    assert status == {"networking": "ready", "edge": "ready", "site": "drifted"}, status


def test_destroy_takes_the_projects_down_before_networking(team: dict[str, Any]) -> None:
    code, summary, said = _run(team, "destroy")
    assert code == exits.OK, said
    assert {s["status"] for s in summary["stacks"]} == {"destroyed"}
    ends = {
        project: _history(team["state"], project, team["name"])[-1]
        for project in ("team-edge", "team-site", "stackflow-networking")
    }
    assert all(r["kind"] == "destroy" for r in ends.values()), ends
    networking = ends["stackflow-networking"]["startTime"]
    assert ends["team-edge"]["endTime"] <= networking
    assert ends["team-site"]["endTime"] <= networking
    vpcs = team["cloud"].client("ec2").describe_vpcs(VpcIds=[])["Vpcs"]
    assert team["vpc"] not in [v["VpcId"] for v in vpcs]


def test_a_stack_reference_that_is_not_an_edge_is_refused_at_preview_naming_both(
    tmp_path: Path, local_cloud: Any, prefect_server: Any
) -> None:
    """Local cloud: `edge` reads networking through a StackReference without naming it among its
    upstream nodes; its preview fails, naming edge, the stack and the node that deploys it, and
    nothing of edge's is created."""
    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    _with_graph(variables, "tests.fixtures.projects.hidden")
    name = unique("dev")
    declare(variables, name)
    done = cli(process_env(variables), "preview", "--env", name, "--json", timeout=600)
    assert done.returncode == exits.FAILED, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    failed = summary["failed"]
    assert (
        f"edge reads the stack organization/stackflow-networking/{name} (deployed by the node "
        "networking) through a StackReference, but it is not among edge's upstream nodes"
    ) in failed, failed
    assert "add networking to edge's upstream" in failed
    assert "Traceback" not in done.stderr


def test_an_adopted_project_deployed_from_its_own_backend_is_not_created_again(
    tmp_path: Path, local_cloud: Any, prefect_server: Any
) -> None:
    """Local cloud: the team deployed its site project from its own backend (with its own
    passphrase), wired to stackflow's networking by hand; `team adopt` moves that stack into
    stackflow's backend as the environment's `site`; the first `up` of site changes nothing
    (the same bucket, no second one), and the next skips it with no engine call."""
    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    _with_graph(variables, FIXTURE)
    name = unique("dev")
    declare(variables, name)
    env = process_env(variables)
    done = cli(env, "up", "--env", name, "--stacks", "networking", "--json", timeout=600)
    assert done.returncode == exits.OK, done.stdout + done.stderr
    vpc = _by_stack(json.loads(done.stdout))["networking"]["outputs"]["vpc_id"]

    theirs = tmp_path / "team-site"
    shutil.copytree(ROOT / "tests/fixtures/projects/site", theirs)
    (theirs / "Pulumi.dev.yaml").write_text(
        f"config:\n  team-site:greeting: hello\n  team-site:vpc_id: {vpc}\n"
        "  team-site:subnets: '2'\n"
    )
    backend = tmp_path / "teams-backend"
    backend.mkdir()
    own = {
        **env,
        "STACKFLOW_BACKEND_URL": f"file://{backend}",
        "STACKFLOW_STATE_PASSPHRASE": "the-teams-own-passphrase",
    }
    deployed = cli(own, "rehearse", str(theirs), "--stack", "dev", "--json", timeout=600)
    assert deployed.returncode == exits.OK, deployed.stdout + deployed.stderr
    bucket = json.loads(deployed.stdout)["stacks"][0]["outputs"]["bucket"]
    s3 = local_cloud.client("s3")
    buckets = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])

    def adopt(*extra: str) -> Any:
        return cli(
            {**env, "PULUMI_CONFIG_PASSPHRASE": "the-teams-own-passphrase"},
            *("team", "adopt", "--env", name, "--node", "site", "--from-backend"),
            f"file://{backend}",
            *extra,
        )

    adopted = adopt("--json")
    assert adopted.returncode == exits.OK, adopted.stdout + adopted.stderr
    report = json.loads(adopted.stdout)
    assert report["target"] == f"team-site/{name}" and report["resources"] == 1, report

    code, summary, said = _run({"env": env, "name": name}, "up", "--stacks", "site")
    assert code == exits.OK, said
    site = _by_stack(summary)["site"]
    assert site["status"] == "unchanged", site
    assert site["changes"] == {"create": 0, "update": 0, "replace": 0, "delete": 0, "same": 2}
    assert site["outputs"]["bucket"] == bucket
    assert sorted(b["Name"] for b in s3.list_buckets()["Buckets"]) == buckets
    code, summary, said = _run({"env": env, "name": name}, "up", "--stacks", "site")
    assert code == exits.OK and summary["engine_calls"] == [], said
    again = adopt()
    assert again.returncode == exits.USAGE, again.stdout + again.stderr
    assert "holds 3 resource(s) in stackflow's backend already" in again.stderr
