"""IAM, CloudWatch Logs and Secrets Manager: found by their physical names. Ids are pulumi-aws's:
a role's and a log group's is its name, an attachment's `role/policyArn`, an inline policy's
`role:name`, a secret's its ARN, a secret version's `secretArn|versionId`."""

from __future__ import annotations

from stackflow.engine.pending.cloud import CloudClients, answer, by_name
from stackflow.engine.pending.model import Candidate, Lookup, Props, text


def role_policy_attachment(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name, policy = text(inputs, "role"), text(inputs, "policyArn")
    if name is None or policy is None:
        return []
    iam = clients.client("iam")
    found = answer(lambda: iam.list_attached_role_policies(RoleName=name), "NoSuchEntity")
    attached = [p["PolicyArn"] for p in (found or {}).get("AttachedPolicies", [])]
    return [Candidate(f"{name}/{policy}")] if policy in attached else []


def role_policy(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name, policy = text(inputs, "role"), text(inputs, "name")
    if name is None or policy is None:
        return []
    iam = clients.client("iam")
    found = answer(lambda: iam.get_role_policy(RoleName=name, PolicyName=policy), "NoSuchEntity")
    return [Candidate(f"{name}:{policy}")] if found else []


def log_group(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    found = clients.client("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
    return [Candidate(name) for g in found if g.get("logGroupName") == name]


def _in_log_group(call: str, answers: str, prefix: str, field: str) -> Lookup:
    """A log group's stream or metric filter, found by its name (its id) within the group."""

    def lookup(clients: CloudClients, inputs: Props) -> list[Candidate]:
        group, name = text(inputs, "logGroupName"), text(inputs, "name")
        if group is None or name is None:
            return []
        logs = clients.client("logs")
        listed = answer(
            lambda: getattr(logs, call)(logGroupName=group, **{prefix: name}),
            "ResourceNotFoundException",
        )
        return [Candidate(name) for item in (listed or {}).get(answers, []) if item[field] == name]

    return lookup


def secret_version(clients: CloudClients, inputs: Props) -> list[Candidate]:
    secret_id = text(inputs, "secretId")
    if secret_id is None:
        return []
    secrets = clients.client("secretsmanager")
    found = answer(lambda: secrets.describe_secret(SecretId=secret_id), "ResourceNotFoundException")
    versions = (found or {}).get("VersionIdsToStages") or {}
    return [Candidate(f"{secret_id}|{version}") for version in versions]


LOOKUPS: dict[str, Lookup] = {
    "aws:iam/role:Role": by_name(
        "iam", "get_role", "RoleName", "Role", "RoleName", gone=("NoSuchEntity",)
    ),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": role_policy_attachment,
    "aws:iam/rolePolicy:RolePolicy": role_policy,
    "aws:cloudwatch/logGroup:LogGroup": log_group,
    "aws:cloudwatch/logStream:LogStream": _in_log_group(
        "describe_log_streams", "logStreams", "logStreamNamePrefix", "logStreamName"
    ),
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": _in_log_group(
        "describe_metric_filters", "metricFilters", "filterNamePrefix", "filterName"
    ),
    "aws:secretsmanager/secret:Secret": by_name(
        "secretsmanager",
        "describe_secret",
        "SecretId",
        "",
        "ARN",
        gone=("ResourceNotFoundException",),
        # one awaiting deletion keeps its name, but no update made it
        alive=lambda found: not found.get("DeletedDate"),
    ),
    "aws:secretsmanager/secretVersion:SecretVersion": secret_version,
}
