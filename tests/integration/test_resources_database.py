"""The database stack's resource types (RDS subnet groups, parameter groups and instances, Secrets
Manager secrets and versions, RandomPassword) against the local cloud (moto, in-process on
loopback), not AWS: create, read back unchanged, update in place, the inputs that replace, delete,
AWS's own refusals, and the whole of programs/database.py through Pulumi's mock runtime whose
resources are created by these entries; last, one instance through the real cloud server, whose
data plane serves it as a MariaDB."""

from __future__ import annotations

import string
import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from botocore.exceptions import ClientError
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from programs.database import PASSWORD_LENGTH, PASSWORD_SPECIALS, DatabaseArgs, database
from stackflow.localcloud import resources
from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.plugin import diff_inputs
from stackflow.localcloud.registry import Props, Registry, ResourceType, auto_name
from stackflow.localcloud.resources import random as random_resources
from stackflow.localcloud.resources import rds_groups, rds_instances, secretsmanager
from tests.fixtures.localcloud import LocalCloud
from tests.integration.test_resources_app import assert_clean, assert_deleted, refreshed, unique
from tests.unit.pulumi_mocks import AwsMocks, run_program

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
TAGS = {"project": "sf", "environment": "dev", "stack": "database", "managed-by": "stackflow"}
SUBNET_GROUP = "aws:rds/subnetGroup:SubnetGroup"
PARAMETER_GROUP = "aws:rds/parameterGroup:ParameterGroup"
INSTANCE = "aws:rds/instance:Instance"
SECRET = "aws:secretsmanager/secret:Secret"
SECRET_VERSION = "aws:secretsmanager/secretVersion:SecretVersion"
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"
NAME_PREFIX_SUFFIX = 26  # what Check appends to a namePrefix


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cloud(bare_moto: CloudContext) -> CloudContext:
    return bare_moto


@pytest.fixture(scope="module")
def aws() -> Registry:
    registry = Registry("aws")
    rds_groups.register(registry)
    rds_instances.register(registry)
    secretsmanager.register(registry)
    return registry


@pytest.fixture(scope="module")
def random_registry() -> Registry:
    registry = Registry("random")
    random_resources.register(registry)
    return registry


@pytest.fixture(scope="module")
def network(cloud: CloudContext) -> dict[str, Any]:
    """What the networking stack would have made: a VPC, two private subnets and the database's
    security group."""
    return make_network(cloud, "10.50")


def make_network(cloud: CloudContext, prefix: str) -> dict[str, Any]:
    ec2 = cloud.client("ec2")
    vpc = ec2.create_vpc(CidrBlock=f"{prefix}.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(
            VpcId=vpc, CidrBlock=f"{prefix}.{i}.0/24", AvailabilityZone=f"{REGION}{az}"
        )["Subnet"]["SubnetId"]
        for i, az in enumerate("ab")
    ]
    db_sg = ec2.create_security_group(GroupName=unique("db"), Description="db", VpcId=vpc)
    return {"vpc": vpc, "private": subnets, "db_sg": db_sg["GroupId"]}


# --- the servicer's part, done here ---------------------------------------------------------


def checked(rtype: ResourceType, logical: str, inputs: Props, seed: bytes) -> Props:
    """The inputs after Check: an auto-name from the namePrefix or the logical name."""
    news = dict(inputs)
    key = rtype.auto_name
    if key and not news.get(key):
        prefix = news.get(rtype.name_prefix) if rtype.name_prefix else None
        if prefix:
            news[key] = prefix + auto_name("", seed, NAME_PREFIX_SUFFIX).lstrip("-")
        else:
            news[key] = auto_name(logical, seed, max_length=rtype.auto_name_max)
    return news


def create(rtype: ResourceType, cloud: CloudContext, inputs: Props) -> tuple[str, Props]:
    """Create as the servicer does: the id and the outputs ({**inputs, **computed}). (The app
    tests' helper also holds computed to `rtype.computed`; these entries return every
    attribute they read back, so that create and read agree on the keys.)"""
    resource_id, computed = rtype.create(cloud, inputs)
    return resource_id, {**inputs, **computed}


def update(
    rtype: ResourceType,
    cloud: CloudContext,
    resource_id: str,
    state: Props,
    old_inputs: Props,
    news: Props,
) -> Props:
    """Diff and update in place as the servicer does; return the new outputs."""
    changed, replaces = diff_inputs(rtype, old_inputs, news)
    assert changed and not replaces, f"{replaces} would replace {rtype.token}"
    assert rtype.update is not None
    computed = rtype.update(cloud, resource_id, state, news, frozenset(changed))
    kept = {k: v for k, v in state.items() if k not in old_inputs and k not in news}
    return {**kept, **news, **computed}


def replaces(rtype: ResourceType, old_inputs: Props, **changes: Any) -> list[str]:
    return diff_inputs(rtype, old_inputs, {**old_inputs, **changes})[1]


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


# --- RDS ------------------------------------------------------------------------------------


def test_registries_serve_the_database_types() -> None:
    """The provider registries built by resources/ serve every type programs/database.py uses."""
    assert {SUBNET_GROUP, PARAMETER_GROUP, INSTANCE, SECRET, SECRET_VERSION} <= set(
        resources.registry("aws").resources
    )
    assert RANDOM_PASSWORD in resources.registry("random").resources


def test_subnet_group(cloud: CloudContext, aws: Registry, network: dict[str, Any]) -> None:
    """A subnet group: id = name; description, subnets and tags update in place; a console tag
    is drift; a new name replaces."""
    rtype = aws.resource(SUBNET_GROUP)
    inputs = {
        "name": unique("sf-dev-db-subnets"),
        "subnetIds": list(network["private"]),
        "description": "Private subnets of sf dev",
        "tags": TAGS,
    }
    group_id, state = create(rtype, cloud, inputs)
    assert group_id == inputs["name"]
    assert state["arn"] == f"arn:aws:rds:{REGION}:{cloud.account_id}:subgrp:{group_id}"
    assert state["vpcId"] == network["vpc"] and state["tagsAll"] == TAGS
    assert_clean(rtype, cloud, group_id, state)

    news = {**inputs, "description": "changed", "subnetIds": network["private"][:1]}
    news["tags"] = {**TAGS, "owner": "data"}
    state = update(rtype, cloud, group_id, state, inputs, news)
    group = cloud.client("rds").describe_db_subnet_groups(DBSubnetGroupName=group_id)
    assert group["DBSubnetGroups"][0]["DBSubnetGroupDescription"] == "changed"
    assert state["subnetIds"] == network["private"][:1] and state["tags"]["owner"] == "data"
    assert_clean(rtype, cloud, group_id, state)

    cloud.client("rds").add_tags_to_resource(
        ResourceName=state["arn"], Tags=[{"Key": "console", "Value": "yes"}]
    )
    assert refreshed(rtype, cloud, group_id, state)["tags"]["console"] == "yes"
    assert replaces(rtype, news, name=unique("other")) == ["name"]
    assert replaces(rtype, news, description="again") == []
    assert_deleted(rtype, cloud, group_id, state)


def test_parameter_group(cloud: CloudContext, aws: Registry) -> None:
    """A parameter group: id = name; only the listed parameters read back (AWS has hundreds);
    parameters and tags update in place; a console change of a value is drift; a new family or
    description replaces."""
    rtype = aws.resource(PARAMETER_GROUP)
    parameters = [
        {"name": "character_set_server", "value": "utf8mb4"},
        {"name": "collation_server", "value": "utf8mb4_unicode_ci"},
    ]
    inputs = {
        "name": unique("sf-dev-mysql8-0"),
        "family": "mysql8.0",
        "description": "MySQL settings of sf dev",
        "parameters": parameters,
        "tags": TAGS,
    }
    group_id, state = create(rtype, cloud, inputs)
    assert group_id == inputs["name"] and state["parameters"] == parameters
    assert state["arn"] == f"arn:aws:rds:{REGION}:{cloud.account_id}:pg:{group_id}"
    assert_clean(rtype, cloud, group_id, state)

    secure = {"name": "require_secure_transport", "value": "ON", "applyMethod": "immediate"}
    news = {**inputs, "parameters": [*parameters, secure], "tags": {**TAGS, "stack": "db"}}
    state = update(rtype, cloud, group_id, state, inputs, news)
    assert state["parameters"] == [*parameters, secure] and state["tags"]["stack"] == "db"
    observed = cloud.client("rds").describe_db_parameters(DBParameterGroupName=group_id)
    assert {p["ParameterName"]: p["ParameterValue"] for p in observed["Parameters"]} == {
        "character_set_server": "utf8mb4",
        "collation_server": "utf8mb4_unicode_ci",
        "require_secure_transport": "ON",
    }
    assert_clean(rtype, cloud, group_id, state)

    state = update(rtype, cloud, group_id, state, news, inputs)  # require_secure_transport goes
    assert state["parameters"] == parameters
    assert_clean(rtype, cloud, group_id, state)

    cloud.client("rds").modify_db_parameter_group(
        DBParameterGroupName=group_id,
        Parameters=[{"ParameterName": "character_set_server", "ParameterValue": "latin1"}],
    )
    drifted = refreshed(rtype, cloud, group_id, state)["parameters"]
    assert drifted[0] == {"name": "character_set_server", "value": "latin1"}
    assert replaces(rtype, inputs, family="mysql8.4") == ["family"]
    assert replaces(rtype, inputs, description="other") == ["description"]
    assert_deleted(rtype, cloud, group_id, state)


def instance_inputs(network: dict[str, Any], subnet_group: str, parameter_group: str) -> Props:
    """An instance as programs/database.py declares it (dev: no protection, no final snapshot)."""
    identifier = unique("sf-dev-mysql")
    return {
        "identifier": identifier,
        "engine": "mysql",
        "engineVersion": "8.0.40",
        "instanceClass": "db.t3.micro",
        "allocatedStorage": 20.0,  # the engine sends numbers as floats
        "storageType": "gp3",
        "storageEncrypted": True,
        "dbName": "app",
        "username": "stackflow",
        "password": "first-Pa55word",
        "port": 3306.0,
        "dbSubnetGroupName": subnet_group,
        "parameterGroupName": parameter_group,
        "vpcSecurityGroupIds": [network["db_sg"]],
        "publiclyAccessible": False,
        "multiAz": False,
        "backupRetentionPeriod": 1.0,
        "deletionProtection": False,
        "skipFinalSnapshot": True,
        "copyTagsToSnapshot": True,
        "applyImmediately": True,
        "tags": TAGS,
    }


@pytest.fixture
def groups(
    cloud: CloudContext, aws: Registry, network: dict[str, Any]
) -> Iterator[tuple[str, str]]:
    """A subnet group and a parameter group for an instance; deleted after the test."""
    subnet_type, parameter_type = aws.resource(SUBNET_GROUP), aws.resource(PARAMETER_GROUP)
    subnet_id, subnet_state = create(
        subnet_type, cloud, {"name": unique("sf-db-subnets"), "subnetIds": network["private"]}
    )
    parameter_id, parameter_state = create(
        parameter_type, cloud, {"name": unique("sf-mysql8-0"), "family": "mysql8.0"}
    )
    yield subnet_id, parameter_id
    parameter_type.delete(cloud, parameter_id, parameter_state)
    subnet_type.delete(cloud, subnet_id, subnet_state)


def test_instance(
    cloud: CloudContext, aws: Registry, network: dict[str, Any], groups: tuple[str, str]
) -> None:
    """An instance: id = its DbiResourceId (pulumi-aws >= 6); the outputs the program reads;
    no password in what the cloud reports; password, protection, backups, class, storage,
    Multi-AZ and tags update in place; engine, dbName, username and encryption replace; a
    protected instance's delete is AWS's refusal; the final snapshot is taken."""
    rtype = aws.resource(INSTANCE)
    inputs = instance_inputs(network, *groups)
    identifier = inputs["identifier"]
    resource_id, computed = rtype.create(cloud, inputs)
    state = {**inputs, **computed}
    assert resource_id == computed["resourceId"] and resource_id.startswith("db-")
    assert "password" not in computed
    # A bare moto has no data plane: the address is moto's own DNS name.
    assert state["address"] == f"{identifier}.aaaaaaaaaa.{REGION}.rds.amazonaws.com"
    assert state["endpoint"] == f"{state['address']}:3306" and state["port"] == 3306
    assert (state["dbName"], state["username"], state["identifier"]) == (
        "app",
        "stackflow",
        identifier,
    )
    assert state["arn"] == f"arn:aws:rds:{REGION}:{cloud.account_id}:db:{identifier}"
    assert state["status"] == "available" and state["tagsAll"] == TAGS
    observed = rtype.read(cloud, resource_id, state)
    assert observed is not None and "password" not in observed
    assert_clean(rtype, cloud, resource_id, state)

    news = {
        **inputs,
        "password": "second-Pa55word",
        "deletionProtection": True,
        "backupRetentionPeriod": 7.0,
        "instanceClass": "db.t3.small",
        "allocatedStorage": 30.0,
        "multiAz": True,
        "skipFinalSnapshot": False,
        "finalSnapshotIdentifier": f"{identifier}-final",
        "tags": {**TAGS, "tier": "gold"},
    }
    state = update(rtype, cloud, resource_id, state, inputs, news)
    db = cloud.client("rds").describe_db_instances(DBInstanceIdentifier=identifier)["DBInstances"][
        0
    ]
    assert (db["DBInstanceClass"], db["AllocatedStorage"], db["BackupRetentionPeriod"]) == (
        "db.t3.small",
        30,
        7,
    )
    assert db["MultiAZ"] and db["DeletionProtection"]
    assert state["tags"]["tier"] == "gold" and state["password"] == "second-Pa55word"
    assert_clean(rtype, cloud, resource_id, state)

    for key, value in {
        "engine": "postgres",
        "dbName": "other",
        "username": "admin",
        "storageEncrypted": False,
        "availabilityZone": f"{REGION}b",
    }.items():
        assert replaces(rtype, news, **{key: value}) == [key]
    assert replaces(rtype, news, identifier="renamed", port=3307.0) == []

    with pytest.raises(ClientError) as refused:
        rtype.delete(cloud, resource_id, state)
    assert code_of(refused) == "InvalidParameterCombination"
    assert "deletion protection" in str(refused.value)

    unprotected = {**news, "deletionProtection": False}
    state = update(rtype, cloud, resource_id, state, news, unprotected)
    assert_deleted(rtype, cloud, resource_id, state)
    snapshots = cloud.client("rds").describe_db_snapshots(
        DBSnapshotIdentifier=f"{identifier}-final"
    )
    assert snapshots["DBSnapshots"][0]["DBInstanceIdentifier"] == identifier


def test_instance_renames_in_place(
    cloud: CloudContext, aws: Registry, network: dict[str, Any], groups: tuple[str, str]
) -> None:
    """A new identifier renames the instance (pulumi-aws >= 6): same id, new address."""
    rtype = aws.resource(INSTANCE)
    inputs = instance_inputs(network, *groups)
    resource_id, state = create(rtype, cloud, inputs)
    news = {**inputs, "identifier": unique("sf-dev-mysql")}
    state = update(rtype, cloud, resource_id, state, inputs, news)
    assert state["identifier"] == news["identifier"]
    assert state["address"].startswith(f"{news['identifier']}.")
    assert_clean(rtype, cloud, resource_id, state)
    assert_deleted(rtype, cloud, resource_id, state)


def test_instance_address_is_the_data_planes(
    cloud: CloudContext,
    aws: Registry,
    network: dict[str, Any],
    groups: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a cloud server around moto, address, port and endpoint are where the data plane
    serves the database, in create and read alike."""
    rtype = aws.resource(INSTANCE)
    inputs = instance_inputs(network, *groups)
    served = {inputs["identifier"]: {"host": "127.0.0.7", "port": 3306, "running": True}}
    monkeypatch.setattr(cloud, "dataplane", lambda: {"databases": served, "load_balancers": {}})
    resource_id, state = create(rtype, cloud, inputs)
    assert (state["address"], state["port"], state["endpoint"]) == (
        "127.0.0.7",
        3306,
        "127.0.0.7:3306",
    )
    assert_clean(rtype, cloud, resource_id, state)
    assert_deleted(rtype, cloud, resource_id, state)


def test_instance_unserved_input_is_refused(
    cloud: CloudContext, aws: Registry, network: dict[str, Any], groups: tuple[str, str]
) -> None:
    """An input the entry would silently ignore (a read replica's source) is refused, named."""
    rtype = aws.resource(INSTANCE)
    inputs = {**instance_inputs(network, *groups), "replicateSourceDb": "elsewhere"}
    with pytest.raises(NotImplementedError, match="replicateSourceDb"):
        rtype.create(cloud, inputs)


# --- Secrets Manager ------------------------------------------------------------------------


def test_secret(cloud: CloudContext, aws: Registry) -> None:
    """A secret named from its namePrefix (prefix + 26 characters): id = ARN; description and
    tags update in place; a console tag is drift; a new name or prefix replaces; delete waits
    out the 30-day recovery window (the secret reads as gone, its name stays taken), and a
    window of 0 deletes at once."""
    rtype = aws.resource(SECRET)
    prefix = f"sf/{uuid.uuid4().hex[:6]}/mysql-password-"
    inputs = checked(
        rtype,
        "db-password",
        {"namePrefix": prefix, "description": "MySQL password", "tags": TAGS},
        uuid.uuid4().bytes,
    )
    assert inputs["name"].startswith(prefix) and len(inputs["name"]) == len(prefix) + 26
    secret_id, state = create(rtype, cloud, inputs)
    described = cloud.client("secretsmanager").describe_secret(SecretId=secret_id)
    assert secret_id == state["arn"] == described["ARN"] and state["name"] == inputs["name"]
    assert state["tagsAll"] == TAGS
    assert_clean(rtype, cloud, secret_id, state)

    news = {**inputs, "description": "changed", "tags": {**TAGS, "rotation": "manual"}}
    state = update(rtype, cloud, secret_id, state, inputs, news)
    assert cloud.client("secretsmanager").describe_secret(SecretId=secret_id)["Description"] == (
        "changed"
    )
    assert_clean(rtype, cloud, secret_id, state)
    cloud.client("secretsmanager").tag_resource(
        SecretId=secret_id, Tags=[{"Key": "console", "Value": "yes"}]
    )
    assert refreshed(rtype, cloud, secret_id, state)["tags"]["console"] == "yes"
    assert replaces(rtype, news, name="other") == ["name"]
    assert replaces(rtype, news, namePrefix="other-") == ["namePrefix"]

    assert_deleted(rtype, cloud, secret_id, state)
    with pytest.raises(ClientError) as taken:
        cloud.client("secretsmanager").create_secret(Name=inputs["name"])
    assert code_of(taken) == "ResourceExistsException"

    now = {"name": unique("sf/dev/now"), "recoveryWindowInDays": 0.0}
    now_id, now_state = create(rtype, cloud, now)
    assert_deleted(rtype, cloud, now_id, now_state)
    cloud.client("secretsmanager").create_secret(Name=now["name"])  # the name is free again


def test_secret_version(cloud: CloudContext, aws: Registry) -> None:
    """A secret version: id = "<secret arn>|<version id>", AWSCURRENT; the value reads back as
    it is; staging labels update in place; a new value put in the console moves AWSCURRENT
    away (drift); a new value replaces; the version goes with its secret."""
    rtype = aws.resource(SECRET_VERSION)
    secret_type = aws.resource(SECRET)
    secret_id, secret_state = create(secret_type, cloud, {"name": unique("sf/dev/pw")})
    inputs = {"secretId": secret_id, "secretString": "s3cret-Value"}
    version_id, state = create(rtype, cloud, inputs)
    assert version_id == f"{secret_id}|{state['versionId']}"
    assert state["arn"] == state["secretArn"] == secret_id
    assert state["versionStages"] == ["AWSCURRENT"]
    assert_clean(rtype, cloud, version_id, state)

    news = {**inputs, "versionStages": ["AWSCURRENT", "blue"]}
    state = update(rtype, cloud, version_id, state, inputs, news)
    assert sorted(state["versionStages"]) == ["AWSCURRENT", "blue"]
    assert_clean(rtype, cloud, version_id, state)

    cloud.client("secretsmanager").put_secret_value(SecretId=secret_id, SecretString="console")
    drifted = refreshed(rtype, cloud, version_id, state)
    assert "AWSCURRENT" not in drifted["versionStages"]
    assert drifted["secretString"] == "s3cret-Value"
    assert replaces(rtype, news, secretString="other") == ["secretString"]
    assert replaces(rtype, news, secretId="other") == ["secretId"]

    rtype.delete(cloud, version_id, drifted)  # takes "blue" off the version
    stages = cloud.client("secretsmanager").describe_secret(SecretId=secret_id)
    assert "blue" not in stages["VersionIdsToStages"][state["versionId"]]
    assert_deleted(secret_type, cloud, secret_id, secret_state)
    assert rtype.read(cloud, version_id, state) is None
    rtype.delete(cloud, version_id, state)


# --- random ---------------------------------------------------------------------------------


def test_random_password(cloud: CloudContext, random_registry: Registry) -> None:
    """RandomPassword as pulumi-random makes it: id "none", exactly the classes and minimums
    asked for, nothing to read back, and every input replaces it."""
    rtype = random_registry.resource(RANDOM_PASSWORD)
    program = {
        "length": float(PASSWORD_LENGTH),
        "special": True,
        "overrideSpecial": PASSWORD_SPECIALS,
    }
    allowed = set(string.ascii_letters + string.digits + PASSWORD_SPECIALS)
    results = set()
    for _ in range(50):
        resource_id, computed = rtype.create(cloud, program)
        assert resource_id == "none" and set(computed) == {"result"}
        assert len(computed["result"]) == PASSWORD_LENGTH and set(computed["result"]) <= allowed
        results.add(computed["result"])
    assert len(results) == 50
    assert rtype.read(cloud, "none", {**program, **computed}) == {}

    strict = {
        "length": 12.0,
        "special": False,
        "upper": False,
        "minNumeric": 4.0,
        "minSpecial": 2.0,
    }
    result = rtype.create(cloud, strict)[1]["result"]
    assert sum(c.isdigit() for c in result) >= 4
    assert sum(c in "!@#$%&*()-_=+[]{}<>:?" for c in result) == 2  # minimums even when switched off
    assert not any(c.isupper() for c in result)

    assert rtype.update is None
    assert replaces(rtype, program, keepers={"rotate": "1"}) == ["keepers"]
    with pytest.raises(random_resources.RandomInputError, match="minSpecial"):
        rtype.create(cloud, {"length": 3.0, "minSpecial": 4.0})
    with pytest.raises(random_resources.RandomInputError, match="switched off"):
        rtype.create(
            cloud,
            {"length": 8.0, "upper": False, "lower": False, "numeric": False, "special": False},
        )


# --- the whole database program -------------------------------------------------------------


def unwrapped(value: Any) -> Any:
    """`value` with the mock runtime's secret wrappers taken off, as the engine hands inputs
    to a provider that does not accept secrets."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return unwrapped(value["value"])
        return {k: unwrapped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrapped(v) for v in value]
    return value


class LocalCloudMocks(AwsMocks):
    """Pulumi's mock runtime, with every resource created by the registry entries against the
    local cloud (Check's auto-naming done here as the servicer does it)."""

    def __init__(self, cloud: CloudContext, registries: dict[str, Registry], project: str) -> None:
        super().__init__(project, "dev", REGION)
        self.cloud, self.registries = cloud, registries
        self.seed = uuid.uuid4().bytes
        self.created: dict[tuple[str, str], tuple[ResourceType, str, Props, Props]] = {}

    def new_resource(
        self, args: pulumi_mocks.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        rtype = self.registries[args.typ.split(":", 1)[0]].resource(args.typ)
        inputs = checked(rtype, args.name, unwrapped(dict(args.inputs)), self.seed)
        resource_id, state = create(rtype, self.cloud, inputs)
        with self._lock:
            self.registered.append((args.typ, args.name, inputs))
            self.created[(args.typ, args.name)] = (rtype, resource_id, inputs, state)
        return resource_id, state


def test_database_program_end_to_end(
    cloud: CloudContext, aws: Registry, random_registry: Registry, network: dict[str, Any]
) -> None:
    """programs/database.py, every resource created by these entries in the local cloud: the
    exports resolve to what the cloud holds, the secret holds the password, a refresh changes
    nothing, and everything deletes in reverse order."""
    project = f"sf{uuid.uuid4().hex[:4]}"
    args = DatabaseArgs(
        project=project,
        environment="dev",
        private_subnet_ids=network["private"],
        db_security_group_id=network["db_sg"],
        engine_version="8.0.40",
        instance_class="db.t3.micro",
        allocated_storage_gb=20,
        backup_retention_days=1,
        multi_az=False,
        deletion_protection=False,
        final_snapshot=False,
        publicly_accessible=False,
        db_name="app",
        username="stackflow",
        port=3306,
    )
    mocks = LocalCloudMocks(
        cloud, {"aws": aws, "random": random_registry}, f"stackflow-database-{project}"
    )
    result = run_program(lambda: database(args), mocks, project=mocks.project, stack="dev")
    exports = {k: v.value for k, v in result.exports.items()}
    assert len(mocks.created) == 6

    _, _, _, instance = mocks.created[(INSTANCE, "mysql")]
    _, secret_id, _, _ = mocks.created[(SECRET, "db-password")]
    _, _, _, password = mocks.created[(RANDOM_PASSWORD, "db-password")]
    assert exports["host"] == instance["address"]
    assert exports["port"] == 3306
    assert (exports["database"], exports["user"]) == ("app", "stackflow")
    assert exports["instance_id"] == instance["identifier"] == f"{project}-dev-mysql"
    assert exports["password"] == password["result"]
    assert exports["password_secret_arn"] == secret_id
    value = cloud.client("secretsmanager").get_secret_value(SecretId=secret_id)
    assert value["SecretString"] == password["result"]
    assert value["Name"].startswith(f"{project}/dev/mysql-password-")

    for rtype, resource_id, _, state in mocks.created.values():
        assert_clean(rtype, cloud, resource_id, state)
    for rtype, resource_id, _, state in reversed(list(mocks.created.values())):
        rtype.delete(cloud, resource_id, state)
        if rtype.token not in (SECRET_VERSION, RANDOM_PASSWORD):
            assert rtype.read(cloud, resource_id, state) is None


# --- through the cloud server ---------------------------------------------------------------


def test_instance_through_the_cloud_server(local_cloud: LocalCloud, aws: Registry) -> None:
    """Through the real cloud server, the instance's address is the loopback host its data plane
    serves a MariaDB on; the master user logs in with the password, and with the new one after
    an in-place password change; delete stops it."""
    cloud = local_cloud.context
    network = make_network(cloud, "10.60")
    subnet_type, instance_type = aws.resource(SUBNET_GROUP), aws.resource(INSTANCE)
    subnet_id, subnet_state = create(
        subnet_type, cloud, {"name": unique("sf-db-subnets"), "subnetIds": network["private"]}
    )
    inputs = instance_inputs(network, subnet_id, "default.mysql8.0")
    resource_id, state = create(instance_type, cloud, inputs)
    served = cloud.dataplane()["databases"][inputs["identifier"]]
    assert (state["address"], state["port"]) == (served["host"], served["port"])
    assert state["address"].startswith("127.") and state["address"] != "127.0.0.1"
    assert_clean(instance_type, cloud, resource_id, state)

    def login(password: str) -> Any:
        connection = pymysql.connect(
            host=state["address"],
            port=state["port"],
            user=state["username"],
            password=password,
            database=state["dbName"],
            connect_timeout=10,
        )
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone()

    assert login(inputs["password"]) == (1,)
    news = {**inputs, "password": "second-Pa55word"}
    state = update(instance_type, cloud, resource_id, state, inputs, news)
    assert login("second-Pa55word") == (1,)
    with pytest.raises(pymysql.err.OperationalError):
        login(inputs["password"])

    assert_deleted(instance_type, cloud, resource_id, state)
    assert inputs["identifier"] not in cloud.dataplane()["databases"]
    assert_deleted(subnet_type, cloud, subnet_id, subnet_state)
