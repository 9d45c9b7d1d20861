"""EKS clusters and managed node groups of the local cloud's aws provider: the control plane's
records only (no Kubernetes API answers at the endpoint, no node boots). Ids follow pulumi-aws:
a cluster's id is its name, a node group's `<cluster>:<node group>`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, same_members

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

CLUSTER = "aws:eks/cluster:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
_GONE = ("ResourceNotFoundException",)
_TAGGING = Tagging(
    "list_tags_for_resource", "tag_resource", "untag_resource", key="resourceArn", described="tags"
)


def _vpc_config(given: Props) -> dict[str, Any]:
    config: dict[str, Any] = {"subnetIds": [str(s) for s in given.get("subnetIds") or []]}
    if given.get("securityGroupIds"):
        config["securityGroupIds"] = [str(s) for s in given["securityGroupIds"]]
    for key in ("endpointPublicAccess", "endpointPrivateAccess"):
        if given.get(key) is not None:
            config[key] = bool(given[key])
    if given.get("publicAccessCidrs"):
        config["publicAccessCidrs"] = [str(c) for c in given["publicAccessCidrs"]]
    return config


def _cluster_create(eks: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "name": str(inputs["name"]),
        "roleArn": str(inputs["roleArn"]),
        "resourcesVpcConfig": _vpc_config(inputs.get("vpcConfig") or {}),
    }
    if inputs.get("version"):
        kwargs["version"] = str(inputs["version"])
    if input_tags(inputs):
        kwargs["tags"] = input_tags(inputs)
    return str(eks.create_cluster(**kwargs)["cluster"]["name"])


def _cluster_outputs(cluster: Answer, ctx: CloudContext) -> Props:
    created: Any = cluster.get("createdAt")
    return {
        "arn": cluster["arn"],
        "endpoint": cluster.get("endpoint", ""),
        "certificateAuthority": {
            "data": (cluster.get("certificateAuthority") or {}).get("data", "")
        },
        "status": cluster.get("status", ""),
        "platformVersion": cluster.get("platformVersion", ""),
        "version": cluster.get("version", ""),
        "createdAt": created.isoformat() if hasattr(created, "isoformat") else str(created),
        "clusterId": cluster.get("id", ""),
        "identities": [
            {
                "oidcs": [
                    {"issuer": (cluster.get("identity") or {}).get("oidc", {}).get("issuer", "")}
                ]
            }
        ],
    }


def _cluster_observed(cluster: Answer, state: Props) -> Props:
    vpc = cluster.get("resourcesVpcConfig") or {}
    given = state.get("vpcConfig") or {}
    observed_vpc = {
        "subnetIds": same_members(list(vpc.get("subnetIds") or []), given.get("subnetIds")),
        "securityGroupIds": same_members(
            list(vpc.get("securityGroupIds") or []), given.get("securityGroupIds")
        ),
    }
    # Only what the program gave: the computed vpcId and security group stay out of its inputs.
    return {
        "roleArn": cluster.get("roleArn"),
        "vpcConfig": {**given, **{k: v for k, v in observed_vpc.items() if k in given}},
    }


CLUSTER_SHAPE = Shape(
    token=CLUSTER,
    service="eks",
    inputs=("name", "roleArn", "vpcConfig", "version", "enabledClusterLogTypes", "tags"),
    create=_cluster_create,
    describe=lambda eks, name, state: eks.describe_cluster(name=name)["cluster"],
    gone=_GONE,
    outputs=_cluster_outputs,
    observed=_cluster_observed,
    delete=lambda eks, name, state: eks.delete_cluster(name=name),
    tagging=_TAGGING,
    computed=(
        "arn",
        "endpoint",
        "certificateAuthority",
        "status",
        "platformVersion",
        "version",
        "createdAt",
        "clusterId",
        "identities",
    ),
)


def _scaling(given: Props) -> dict[str, int]:
    scaling = given.get("scalingConfig") or {}
    return {
        "minSize": int(scaling["minSize"]),
        "maxSize": int(scaling["maxSize"]),
        "desiredSize": int(scaling["desiredSize"]),
    }


def _group_create(eks: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {
        "clusterName": str(inputs["clusterName"]),
        "nodegroupName": str(inputs["nodeGroupName"]),
        "nodeRole": str(inputs["nodeRoleArn"]),
        "subnets": [str(s) for s in inputs.get("subnetIds") or []],
        "scalingConfig": _scaling(inputs),
    }
    for key, api in (("amiType", "amiType"), ("capacityType", "capacityType")):
        if inputs.get(key):
            kwargs[api] = str(inputs[key])
    if inputs.get("diskSize"):
        kwargs["diskSize"] = int(inputs["diskSize"])
    if inputs.get("instanceTypes"):
        kwargs["instanceTypes"] = [str(t) for t in inputs["instanceTypes"]]
    if inputs.get("labels"):
        kwargs["labels"] = {str(k): str(v) for k, v in inputs["labels"].items()}
    if input_tags(inputs):
        kwargs["tags"] = input_tags(inputs)
    group = eks.create_nodegroup(**kwargs)["nodegroup"]
    return f"{group['clusterName']}:{group['nodegroupName']}"


def _group_describe(eks: Any, id: str, state: Props) -> Answer:
    cluster, _, name = id.partition(":")
    return dict(eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"])


def _group_outputs(group: Answer, ctx: CloudContext) -> Props:
    resources = group.get("resources") or {}
    return {
        "arn": group["nodegroupArn"],
        "status": group.get("status", ""),
        "version": group.get("version", ""),
        "releaseVersion": group.get("releaseVersion", ""),
        "amiType": group.get("amiType", ""),
        "capacityType": group.get("capacityType", ""),
        "diskSize": group.get("diskSize", 0),
        "instanceTypes": list(group.get("instanceTypes") or []),
        "resources": [
            {
                "autoscalingGroups": [
                    {"name": g.get("name", "")} for g in resources.get("autoScalingGroups") or []
                ],
                "remoteAccessSecurityGroupId": resources.get("remoteAccessSecurityGroup", ""),
            }
        ],
    }


def _group_observed(group: Answer, state: Props) -> Props:
    scaling = group.get("scalingConfig") or {}
    return {
        "scalingConfig": {
            "minSize": scaling.get("minSize"),
            "maxSize": scaling.get("maxSize"),
            "desiredSize": scaling.get("desiredSize"),
        },
        "subnetIds": same_members(list(group.get("subnets") or []), state.get("subnetIds")),
        "nodeRoleArn": group.get("nodeRole"),
    }


def _group_update(eks: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    cluster, _, name = id.partition(":")
    if "scalingConfig" in changed:
        eks.update_nodegroup_config(
            clusterName=cluster, nodegroupName=name, scalingConfig=_scaling(inputs)
        )


NODE_GROUP_SHAPE = Shape(
    token=NODE_GROUP,
    service="eks",
    inputs=(
        "clusterName",
        "nodeGroupName",
        "nodeGroupNamePrefix",
        "nodeRoleArn",
        "subnetIds",
        "scalingConfig",
        "amiType",
        "capacityType",
        "diskSize",
        "instanceTypes",
        "labels",
        "forceUpdateVersion",
        "tags",
    ),
    create=_group_create,
    describe=_group_describe,
    gone=_GONE,
    outputs=_group_outputs,
    observed=_group_observed,
    update=_group_update,
    delete=lambda eks, id, state: eks.delete_nodegroup(
        clusterName=id.partition(":")[0], nodegroupName=id.partition(":")[2]
    ),
    tagging=_TAGGING,
    computed=(
        "arn",
        "status",
        "version",
        "releaseVersion",
        "amiType",
        "capacityType",
        "diskSize",
        "instanceTypes",
        "resources",
    ),
)


def register(aws: Registry) -> None:
    """Add the EKS cluster and node group types."""
    aws.add(
        CLUSTER_SHAPE.type(force_new={"name"}, auto_name="name", auto_name_max=100),
        NODE_GROUP_SHAPE.type(
            # moto 5.2.5 tags no node group after its create: new tags make a new node group.
            force_new={
                "tags",
                "clusterName",
                "nodeGroupName",
                "nodeGroupNamePrefix",
                "nodeRoleArn",
                "subnetIds",
                "amiType",
                "capacityType",
                "diskSize",
                "instanceTypes",
            },
            auto_name="nodeGroupName",
            name_prefix="nodeGroupNamePrefix",
            auto_name_max=63,
        ),
    )
