"""What AWS offers for RDS MySQL, from a vendored snapshot (`data/rds-mysql.json`), and AWS's own
refusals of what it does not offer: an engine version it does not have, an instance class it does
not sell for MySQL, allocated storage outside the bounds of the storage type.

moto 5.2.5 accepts any of these; AWS refuses them in CreateDBInstance and ModifyDBInstance with
the codes and messages below (InvalidParameterCombination), so the entry refuses them the same
way before it calls moto. Engines other than mysql are not in the snapshot and are not checked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "rds-mysql.json"
ENGINE = "mysql"


@dataclass(frozen=True)
class MysqlOfferings:
    """The snapshot: versions (full and major), instance classes, storage bounds, and its date."""

    versions: frozenset[str]
    majors: frozenset[str]
    classes: frozenset[str]
    default_storage_type: str
    storage_bounds: Mapping[str, tuple[int, int]]
    snapshot_date: str

    def has_version(self, version: str) -> bool:
        """AWS takes a full version it offers, or a major version ("8.0") it offers one of."""
        return version in self.versions or version in self.majors

    def latest(self, major: str) -> str | None:
        """The newest offered version of a major version ("8.0" -> "8.0.43")."""
        found = [v for v in self.versions if v.startswith(f"{major}.")]
        return max(found, key=lambda v: [int(p) for p in v.split(".")]) if found else None


@cache
def mysql_offerings(path: Path = SNAPSHOT) -> MysqlOfferings:
    """The snapshot, read once per process."""
    data = json.loads(path.read_text())
    versions = frozenset(str(v["EngineVersion"]) for v in data["DBEngineVersions"])
    return MysqlOfferings(
        versions=versions,
        majors=frozenset(str(v["MajorEngineVersion"]) for v in data["DBEngineVersions"]),
        classes=frozenset(str(c) for c in data["OrderableDBInstanceClasses"]),
        default_storage_type=str(data["DefaultStorageType"]),
        storage_bounds={
            str(kind): (int(low), int(high))
            for kind, (low, high) in data["AllocatedStorageGiB"].items()
        },
        snapshot_date=str(data["SnapshotDate"]),
    )


def _refusal(ctx: CloudContext, operation: str, code: str, message: str) -> ClientError:
    """AWS's refusal as botocore raises it for an RDS call (the servicer names the service)."""
    if ctx.on_call is not None:
        ctx.on_call("RDS")
    return ClientError(
        {
            "Error": {"Code": code, "Message": message, "Type": "Sender"},
            "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": str(uuid.uuid4())},
        },
        operation,
    )


def check_mysql_instance(
    ctx: CloudContext, operation: str, inputs: Mapping[str, Any], changed: frozenset[str] | None
) -> None:
    """Refuse, as AWS does, a MySQL instance AWS would not create or modify.

    Args:
        ctx: the cloud the call goes to (its service is named in the error).
        operation: "CreateDBInstance" or "ModifyDBInstance".
        inputs: the instance's inputs (pulumi-aws's names).
        changed: the inputs a modify changes (None: a create checks everything).

    Raises:
        ClientError: InvalidParameterCombination, in AWS's words.
    """
    if str(inputs.get("engine") or "") != ENGINE:
        return
    offered = mysql_offerings()

    def checking(key: str) -> bool:
        return changed is None or key in changed

    version = str(inputs.get("engineVersion") or "")
    if version and checking("engineVersion") and not offered.has_version(version):
        raise _refusal(
            ctx,
            operation,
            "InvalidParameterCombination",
            f"Cannot find version {version} for {ENGINE}",
        )
    instance_class = str(inputs.get("instanceClass") or "")
    if (
        instance_class
        and (checking("instanceClass") or checking("engineVersion"))
        and instance_class not in offered.classes
    ):
        shown = offered.latest(version) if version in offered.majors else version
        raise _refusal(
            ctx,
            operation,
            "InvalidParameterCombination",
            "RDS does not support creating a DB instance with the following combination: "
            f"DBInstanceClass={instance_class}, Engine={ENGINE}, "
            f"EngineVersion={shown or version}, LicenseModel=general-public-license. For "
            "supported combinations of instance class and database engine version, see the "
            "documentation.",
        )
    storage = inputs.get("allocatedStorage")
    if storage is not None and (checking("allocatedStorage") or checking("storageType")):
        kind = str(inputs.get("storageType") or offered.default_storage_type)
        low, high = offered.storage_bounds.get(kind, (0, 1 << 30))
        if not low <= int(storage) <= high:
            raise _refusal(
                ctx,
                operation,
                "InvalidParameterCombination",
                f"Invalid storage size for engine name {ENGINE} and storage type {kind}: "
                f"{int(storage)}",
            )
