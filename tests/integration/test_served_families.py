"""The families of AWS types the local cloud serves for rehearsals, through the real Pulumi
engine (CLI v3.259.0, Automation API) on the **local cloud** (moto on loopback behind the
project's own provider plugins, not AWS).

Three programs of the test's own (tests/integration/served_programs.py) group the families:
messaging and data (DynamoDB, SQS, SNS, EventBridge, Kinesis, KMS, CloudWatch, IAM users and
policies, getPolicyDocument), APIs and compute (Lambda and what connects to it, API Gateway REST
and v2, S3 access, EC2 instances and getAmi, EKS), and the edge (Route 53 and getZone, ACM and
its validation, CloudFront, AppSync). Each deploys, a preview right after changes nothing, reading the cloud back finds no
drift, a second version updates in place (tags, descriptions, settings: nothing replaced), and
the destroy leaves zero resources.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stackflow.engine import Listener, Operation, StackSpec
from stackflow.engine.automation import AutomationEngine
from tests.fixtures.localcloud import LocalCloud
from tests.integration.served_programs import Program, apis, edge, messaging
from tests.realenv import unique

pytestmark = pytest.mark.integration

PROJECT = "families"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, local_cloud: LocalCloud) -> AutomationEngine:
    """One engine on the session's local cloud, with a state folder of its own."""
    return AutomationEngine(local_cloud.settings(tmp_path_factory.mktemp("families-state")))


def lifecycle(engine: AutomationEngine, node: str, program: Program) -> dict[str, Any]:
    """Deploy version 1, preview (0 changes), read back (no drift), deploy version 2 (updates in
    place only), destroy (everything); the outputs of version 2."""
    version = {"n": 1}
    spec = StackSpec(PROJECT, unique("dev"), node, lambda: program(version["n"]))
    up = engine.run(Operation.UP, spec, Listener())
    assert up.changes.create > 0 and up.changes.changed == up.changes.create
    try:
        preview = engine.run(Operation.PREVIEW, spec, Listener())
        assert preview.changes.changed == 0, preview.resource_changes
        drift = engine.run(Operation.DRIFT, spec, Listener())
        assert drift.changes.changed == 0, drift
        version["n"] = 2
        second = engine.run(Operation.UP, spec, Listener())
        assert second.changes.update > 0 and second.changes.replace == 0, second.resource_changes
        assert second.changes.create == 0 and second.changes.delete == 0
        again = engine.run(Operation.PREVIEW, spec, Listener())
        assert again.changes.changed == 0, again.resource_changes
    finally:
        down = engine.run(Operation.DESTROY, spec, Listener())
    assert down.changes.delete == up.changes.create
    engine.remove(spec)
    return {key: value.value for key, value in second.outputs.items()}


def test_messaging_and_data_families_deploy_update_in_place_and_destroy_on_the_local_cloud(
    engine: AutomationEngine, local_cloud: LocalCloud
) -> None:
    """DynamoDB, SQS, SNS, EventBridge, Kinesis, KMS, CloudWatch and IAM users and policies;
    getPolicyDocument, getArn and getPartition are computed as pulumi-aws computes them; the
    access key's secret is secret."""
    outputs = lifecycle(engine, "messaging", messaging)
    assert outputs["table"].startswith("arn:aws:dynamodb:")
    assert (outputs["table_service"], outputs["partition"]) == ("dynamodb", "amazonaws.com")
    statement = json.loads(outputs["document"])["Statement"][0]
    assert statement["Action"] == "sqs:SendMessage" and statement["Effect"] == "Allow"
    assert statement["Principal"] == {"Service": "sns.amazonaws.com"}
    tables = local_cloud.client("dynamodb").list_tables()["TableNames"]
    assert not [name for name in tables if name.startswith("orders-")], tables  # destroyed


def test_api_and_compute_families_deploy_update_in_place_and_destroy_on_the_local_cloud(
    engine: AutomationEngine, local_cloud: LocalCloud, tmp_path: Path
) -> None:
    """Lambda with an event source mapping and a permission, API Gateway REST and v2, S3
    ownership controls and ACL, an EC2 instance from getAmi, EKS's control plane."""
    code = tmp_path / "hello"
    code.mkdir()
    (code / "hello.py").write_text("def handler(event, context):\n    return 'hello'\n")
    outputs = lifecycle(engine, "apis", apis(code))
    assert outputs["invoke_url"].endswith("/live")
    assert outputs["http_endpoint"].startswith("https://")
    assert outputs["instance_state"] == "running" and outputs["certificate"]
    clusters = local_cloud.client("eks").list_clusters()["clusters"]
    assert not [name for name in clusters if name.startswith("eks-")], clusters  # destroyed


def test_edge_families_deploy_update_in_place_and_destroy_on_the_local_cloud(
    engine: AutomationEngine, local_cloud: LocalCloud
) -> None:
    """Route 53 zones and records (getZone finds a zone that exists already by its name, as a
    domain you own), an ACM certificate (made as an assumed role, as the provider's
    assumeRoles say) validated by its DNS record, a CloudFront distribution
    with that certificate behind an alias record, an AppSync API (named with a RandomString) and
    its key (a secret)."""
    route53 = local_cloud.client("route53")
    owned = f"{unique('owned')}.test"
    made = route53.create_hosted_zone(Name=owned, CallerReference=owned)["HostedZone"]["Id"]
    try:
        outputs = lifecycle(engine, "edge", edge(owned))
        records = route53.list_resource_record_sets(HostedZoneId=made)["ResourceRecordSets"]
    finally:
        route53.delete_hosted_zone(Id=made)
    assert outputs["certificate"] == "ISSUED" and outputs["cdn"].endswith(".cloudfront.net")
    assert outputs["api"].startswith("api.") and len(outputs["name_servers"]) == 4
    assert outputs["graphql"] and outputs["key"] and len(outputs["graph_name"]) == len("graph-") + 8
    assert ":assumed-role/edge-deployer-" in outputs["caller"], outputs["caller"]
    assert outputs["caller"].endswith("/edge")  # the session the provider named
    assert sorted(r["Type"] for r in records) == ["NS", "SOA"]  # its records went with it
    zones = [z["Name"] for z in route53.list_hosted_zones()["HostedZones"]]
    assert not [name for name in zones if ".internal.test" in name], zones  # destroyed


def test_cloud_ls_lists_what_the_edge_families_leave_behind_on_the_local_cloud(
    local_cloud: LocalCloud,
) -> None:
    """A zone, a certificate, a distribution and a GraphQL API left in the local cloud (made here
    with boto3, as a rehearsal stopped midway would leave them) are each listed, none placed in
    an environment."""
    from stackflow.localcloud.inventory import list_resources

    name = f"{unique('leak')}.test"
    zone = local_cloud.client("route53").create_hosted_zone(Name=name, CallerReference=name)
    acm = local_cloud.client("acm")
    certificate = acm.request_certificate(DomainName=name, ValidationMethod="DNS")
    cloudfront = local_cloud.client("cloudfront")
    origin = {"Id": "o", "DomainName": f"origin.{name}", "CustomOriginConfig": CUSTOM_ORIGIN}
    distribution = cloudfront.create_distribution(
        DistributionConfig={
            "CallerReference": name,
            "Comment": "",
            "Enabled": False,
            "Origins": {"Quantity": 1, "Items": [origin]},
            "DefaultCacheBehavior": {"TargetOriginId": "o", "ViewerProtocolPolicy": "allow-all"},
        }
    )["Distribution"]
    appsync = local_cloud.client("appsync")
    api = appsync.create_graphql_api(name=name.replace(".", "-"), authenticationType="API_KEY")
    try:
        rows = list_resources(local_cloud.url, local_cloud.region)
    finally:
        local_cloud.client("route53").delete_hosted_zone(Id=zone["HostedZone"]["Id"])
        acm.delete_certificate(CertificateArn=certificate["CertificateArn"])
        cloudfront.delete_distribution(Id=distribution["Id"], IfMatch="any")
        appsync.delete_graphql_api(apiId=api["graphqlApi"]["apiId"])
    made = {distribution["ARN"], api["graphqlApi"]["arn"]}
    listed = {(r.kind, r.environment) for r in rows if name in r.name + r.id or r.id in made}
    assert listed == {
        ("hosted-zone", "-"),
        ("certificate", "-"),
        ("distribution", "-"),
        ("graphql-api", "-"),
    }, listed


CUSTOM_ORIGIN = {"HTTPPort": 80, "HTTPSPort": 443, "OriginProtocolPolicy": "http-only"}
