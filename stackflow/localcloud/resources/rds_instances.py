"""RDS DB instances of the local cloud (id = the DbiResourceId, as pulumi-aws >= 6).

The entry behaves as pulumi-aws 7 (the Terraform AWS provider 6 underneath) does: the same id,
the same inputs forcing replacement, the same API calls. A DB instance's client endpoint
(`address`, `endpoint`) is where the data plane serves its MariaDB, not moto's DNS name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.errors import ControlApiError
from stackflow.localcloud.registry import Props, Registry, ResourceType, tags_of
from stackflow.localcloud.resources._declared import RDS_TAGGING, first
from stackflow.localcloud.resources._rds_offerings import check_mysql_instance
from stackflow.localcloud.resources._shared import keep_observed, refuse_unserved, unless_gone

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

# The data plane registers a database while the cloud server answers CreateDBInstance.
DATAPLANE_WAIT_S = 5.0

INSTANCE = "aws:rds/instance:Instance"
_GONE = ("DBInstanceNotFound",)


def _int(value: Any) -> int:
    return int(value)  # the engine sends numbers as floats (20.0)


def _bool(value: Any) -> bool:
    return bool(value)


def _str(value: Any) -> str:
    return str(value)


def _strings(value: Any) -> list[str]:
    return [str(item) for item in value]


# --- aws:rds/instance:Instance (id = the DbiResourceId, as pulumi-aws >= 6) --------------------

Convert = Callable[[Any], Any]

# Input -> CreateDBInstance parameter. ModifyDBInstance takes the same names except _RENAMED.
_INSTANCE_PARAMETERS: dict[str, tuple[str, Convert]] = {
    "identifier": ("DBInstanceIdentifier", _str),
    "engine": ("Engine", _str),
    "engineVersion": ("EngineVersion", _str),
    "instanceClass": ("DBInstanceClass", _str),
    "allocatedStorage": ("AllocatedStorage", _int),
    "maxAllocatedStorage": ("MaxAllocatedStorage", _int),
    "storageType": ("StorageType", _str),
    "storageEncrypted": ("StorageEncrypted", _bool),
    "kmsKeyId": ("KmsKeyId", _str),
    "iops": ("Iops", _int),
    "storageThroughput": ("StorageThroughput", _int),
    "dbName": ("DBName", _str),
    "username": ("MasterUsername", _str),
    "password": ("MasterUserPassword", _str),
    "port": ("Port", _int),
    "dbSubnetGroupName": ("DBSubnetGroupName", _str),
    "parameterGroupName": ("DBParameterGroupName", _str),
    "optionGroupName": ("OptionGroupName", _str),
    "vpcSecurityGroupIds": ("VpcSecurityGroupIds", _strings),
    "availabilityZone": ("AvailabilityZone", _str),
    "multiAz": ("MultiAZ", _bool),
    "publiclyAccessible": ("PubliclyAccessible", _bool),
    "backupRetentionPeriod": ("BackupRetentionPeriod", _int),
    "backupWindow": ("PreferredBackupWindow", _str),
    "maintenanceWindow": ("PreferredMaintenanceWindow", _str),
    "deletionProtection": ("DeletionProtection", _bool),
    "copyTagsToSnapshot": ("CopyTagsToSnapshot", _bool),
    "autoMinorVersionUpgrade": ("AutoMinorVersionUpgrade", _bool),
    "characterSetName": ("CharacterSetName", _str),
    "ncharCharacterSetName": ("NcharCharacterSetName", _str),
    "licenseModel": ("LicenseModel", _str),
    "caCertIdentifier": ("CACertificateIdentifier", _str),
    "iamDatabaseAuthenticationEnabled": ("EnableIAMDatabaseAuthentication", _bool),
    "monitoringInterval": ("MonitoringInterval", _int),
    "monitoringRoleArn": ("MonitoringRoleArn", _str),
    "performanceInsightsEnabled": ("EnablePerformanceInsights", _bool),
    "performanceInsightsKmsKeyId": ("PerformanceInsightsKMSKeyId", _str),
    "performanceInsightsRetentionPeriod": ("PerformanceInsightsRetentionPeriod", _int),
    "enabledCloudwatchLogsExports": ("EnableCloudwatchLogsExports", _strings),
    "networkType": ("NetworkType", _str),
    "timezone": ("Timezone", _str),
    "customIamInstanceProfile": ("CustomIamInstanceProfile", _str),
    "backupTarget": ("BackupTarget", _str),
}
_RENAMED = {"identifier": "NewDBInstanceIdentifier", "port": "DBPortNumber"}
# Inputs pulumi-aws keeps in the state only: they steer updates and the delete.
_STATE_ONLY = (
    "applyImmediately",
    "allowMajorVersionUpgrade",
    "skipFinalSnapshot",
    "finalSnapshotIdentifier",
    "deleteAutomatedBackups",
)
_INSTANCE_INPUTS = (*_INSTANCE_PARAMETERS, *_STATE_ONLY, "identifierPrefix", "tags")

# The Terraform AWS provider 6 marks these ForceNew (aws_db_instance); `identifier` is not:
# a new identifier renames the instance in place (ModifyDBInstance NewDBInstanceIdentifier).
INSTANCE_FORCE_NEW = frozenset(
    {
        "availabilityZone",
        "backupTarget",
        "characterSetName",
        "customIamInstanceProfile",
        "dbName",
        "engine",
        "kmsKeyId",
        "ncharCharacterSetName",
        "region",
        "restoreToPointInTime",
        "s3Import",
        "snapshotIdentifier",
        "storageEncrypted",
        "timezone",
        "username",
    }
)


def _dataplane_endpoint(
    ctx: CloudContext, identifier: str, wait_s: float
) -> tuple[str, int] | None:
    """Where the data plane serves the instance's database, or None if it does not."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            databases = ctx.dataplane().get("databases") or {}
        except ControlApiError:
            # A bare moto server (unit tests) has no /_stackflow/dataplane: keep moto's address.
            return None
        entry = databases.get(identifier)
        if entry:
            return str(entry["host"]), int(entry["port"])
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.25)


def _find_instance(
    ctx: CloudContext, resource_id: str, identifier: str | None
) -> dict[str, Any] | None:
    """The instance by its identifier, else by its resource id (renamed out of band); None if
    neither finds exactly one instance with that resource id."""
    client = ctx.client("rds")
    found: list[dict[str, Any]] = []
    if identifier:
        by_name = first(
            _GONE,
            lambda: client.describe_db_instances(DBInstanceIdentifier=identifier),
            "DBInstances",
        )
        found = [by_name] if by_name else []
    if not found and resource_id.startswith("db-"):
        found = client.describe_db_instances(
            Filters=[{"Name": "dbi-resource-id", "Values": [resource_id]}]
        )["DBInstances"]
    matching = [db for db in found if db.get("DbiResourceId") == resource_id]
    return matching[0] if len(matching) == 1 else None


def _instance_view(
    ctx: CloudContext, db: Mapping[str, Any], known: Mapping[str, Any], wait_s: float = 0.0
) -> Props:
    """What pulumi-aws reads back of an instance; `known` (inputs or state) decides between a
    configured engine version ("8.0") and the actual one ("8.0.35"), as pulumi-aws does."""
    identifier = str(db["DBInstanceIdentifier"])
    endpoint = db.get("Endpoint") or {}
    # The data plane's host and port when it serves the database (it follows DBPortNumber,
    # which moto 5.2.5 does not), else the cloud's own endpoint.
    address, port = _dataplane_endpoint(ctx, identifier, wait_s) or (
        str(endpoint.get("Address", "")),
        int(endpoint.get("Port") or db.get("DbInstancePort") or 0),
    )
    actual_version = str(db.get("EngineVersion", ""))
    configured = str(known.get("engineVersion") or "")
    version = configured if actual_version.startswith(f"{configured}.") else actual_version
    parameter_groups = db.get("DBParameterGroups") or [{}]
    option_groups = db.get("OptionGroupMemberships") or [{}]
    tags = tags_of(db.get("TagList"))
    return {
        "identifier": identifier,
        "resourceId": db.get("DbiResourceId"),
        "arn": db.get("DBInstanceArn"),
        "address": address,
        "port": port,
        "endpoint": f"{address}:{port}" if address else None,
        "hostedZoneId": endpoint.get("HostedZoneId"),
        "status": db.get("DBInstanceStatus"),
        "engine": db.get("Engine"),
        "engineVersion": version,
        "engineVersionActual": actual_version,
        "instanceClass": db.get("DBInstanceClass"),
        "allocatedStorage": db.get("AllocatedStorage"),
        "maxAllocatedStorage": db.get("MaxAllocatedStorage"),
        "storageType": db.get("StorageType"),
        "storageEncrypted": db.get("StorageEncrypted"),
        "kmsKeyId": db.get("KmsKeyId"),
        "iops": db.get("Iops"),
        "storageThroughput": db.get("StorageThroughput"),
        "dbName": db.get("DBName"),
        "username": db.get("MasterUsername"),
        "dbSubnetGroupName": (db.get("DBSubnetGroup") or {}).get("DBSubnetGroupName"),
        "parameterGroupName": parameter_groups[0].get("DBParameterGroupName"),
        "optionGroupName": option_groups[0].get("OptionGroupName"),
        "vpcSecurityGroupIds": [g["VpcSecurityGroupId"] for g in db.get("VpcSecurityGroups") or []],
        "availabilityZone": db.get("AvailabilityZone"),
        "multiAz": db.get("MultiAZ"),
        "publiclyAccessible": db.get("PubliclyAccessible"),
        "backupRetentionPeriod": db.get("BackupRetentionPeriod"),
        "backupWindow": db.get("PreferredBackupWindow"),
        "maintenanceWindow": db.get("PreferredMaintenanceWindow"),
        "deletionProtection": db.get("DeletionProtection"),
        "copyTagsToSnapshot": db.get("CopyTagsToSnapshot"),
        "autoMinorVersionUpgrade": db.get("AutoMinorVersionUpgrade"),
        "characterSetName": db.get("CharacterSetName"),
        "licenseModel": db.get("LicenseModel"),
        "caCertIdentifier": db.get("CACertificateIdentifier"),
        "iamDatabaseAuthenticationEnabled": db.get("IAMDatabaseAuthenticationEnabled"),
        "monitoringInterval": db.get("MonitoringInterval"),
        "monitoringRoleArn": db.get("MonitoringRoleArn"),
        "performanceInsightsEnabled": db.get("PerformanceInsightsEnabled"),
        "enabledCloudwatchLogsExports": db.get("EnabledCloudwatchLogsExports"),
        "networkType": db.get("NetworkType"),
        "replicas": db.get("ReadReplicaDBInstanceIdentifiers"),
        "tags": tags,
        "tagsAll": tags,
    }


def _create_instance(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, INSTANCE, inputs, _INSTANCE_INPUTS)
    check_mysql_instance(ctx, "CreateDBInstance", inputs, None)
    request: dict[str, Any] = {
        aws_name: convert(inputs[key])
        for key, (aws_name, convert) in _INSTANCE_PARAMETERS.items()
        if inputs.get(key) is not None
    }
    if inputs.get("tags"):
        request["Tags"] = RDS_TAGGING.wire(inputs["tags"])
    db = ctx.client("rds").create_db_instance(**request)["DBInstance"]
    view = _instance_view(ctx, db, inputs, wait_s=DATAPLANE_WAIT_S)
    return str(db["DbiResourceId"]), keep_observed(view, inputs)


def _read_instance(ctx: CloudContext, id: str, state: Props) -> Props | None:
    db = _find_instance(ctx, id, state.get("identifier"))
    return None if db is None else keep_observed(_instance_view(ctx, db, state), state)


def _modify_request(state: Props, inputs: Props, changed: frozenset[str]) -> dict[str, Any]:
    """The ModifyDBInstance parameters for the inputs that changed (none: nothing to modify)."""
    request: dict[str, Any] = {}
    for key in sorted(changed - INSTANCE_FORCE_NEW):
        if key not in _INSTANCE_PARAMETERS or inputs.get(key) is None:
            continue  # state-only inputs, tags, or an input dropped back to the cloud's value
        aws_name, convert = _INSTANCE_PARAMETERS[key]
        if key == "enabledCloudwatchLogsExports":
            old, new = set(state.get(key) or []), set(inputs[key])
            request["CloudwatchLogsExportConfiguration"] = {
                "EnableLogTypes": sorted(new - old),
                "DisableLogTypes": sorted(old - new),
            }
            continue
        request[_RENAMED.get(key, aws_name)] = convert(inputs[key])
    if "engineVersion" in request and inputs.get("allowMajorVersionUpgrade") is not None:
        request["AllowMajorVersionUpgrade"] = bool(inputs["allowMajorVersionUpgrade"])
    return request


def _update_instance(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, INSTANCE, inputs, _INSTANCE_INPUTS)
    check_mysql_instance(ctx, "ModifyDBInstance", inputs, changed)
    identifier = str(state["identifier"])
    request = _modify_request(state, inputs, changed)
    client = ctx.client("rds")
    if request:
        modified = client.modify_db_instance(
            DBInstanceIdentifier=identifier,
            ApplyImmediately=bool(inputs.get("applyImmediately", False)),
            **request,
        )
        identifier = str(modified["DBInstance"]["DBInstanceIdentifier"])
    # A vanished instance: DescribeDBInstances refuses in AWS's words (DBInstanceNotFound).
    db = client.describe_db_instances(DBInstanceIdentifier=identifier)["DBInstances"][0]
    if "tags" in changed:
        RDS_TAGGING.sync(client, str(db["DBInstanceArn"]), inputs)
        db = client.describe_db_instances(DBInstanceIdentifier=identifier)["DBInstances"][0]
    return keep_observed(_instance_view(ctx, db, inputs), inputs)


def _delete_instance(ctx: CloudContext, id: str, state: Props) -> None:
    db = _find_instance(ctx, id, state.get("identifier"))
    if db is None:
        return
    skip = bool(state.get("skipFinalSnapshot", False))
    request: dict[str, Any] = {
        "DBInstanceIdentifier": db["DBInstanceIdentifier"],
        "SkipFinalSnapshot": skip,
        "DeleteAutomatedBackups": bool(state.get("deleteAutomatedBackups", True)),
    }
    if not skip and state.get("finalSnapshotIdentifier"):
        request["FinalDBSnapshotIdentifier"] = str(state["finalSnapshotIdentifier"])
    # Deletion protection: InvalidParameterCombination, in AWS's words.
    with unless_gone(_GONE):
        ctx.client("rds").delete_db_instance(**request)


def register(aws: Registry) -> None:
    """Add the RDS instance type to the local cloud's `aws` provider."""
    aws.add(
        ResourceType(
            token=INSTANCE,
            create=_create_instance,
            read=_read_instance,
            update=_update_instance,
            delete=_delete_instance,
            force_new=INSTANCE_FORCE_NEW,
            # Outputs the program does not set; an input the cloud defaults (port, identifier, ...)
            # is left out so that a preview keeps the program's own value.
            computed=(
                "address",
                "arn",
                "endpoint",
                "hostedZoneId",
                "resourceId",
                "status",
                "engineVersionActual",
                "replicas",
                "tagsAll",
                "availabilityZone",
                "backupWindow",
                "maintenanceWindow",
                "caCertIdentifier",
                "licenseModel",
                "kmsKeyId",
                "optionGroupName",
                "autoMinorVersionUpgrade",
                "iamDatabaseAuthenticationEnabled",
                "monitoringInterval",
            ),
            auto_name="identifier",
            name_prefix="identifierPrefix",
            auto_name_max=63,
            drift_inputs=frozenset({"tags"}),
            defaults={
                "publiclyAccessible": False,
                "skipFinalSnapshot": False,
                "copyTagsToSnapshot": False,
                "deleteAutomatedBackups": True,
            },
        ),
    )
