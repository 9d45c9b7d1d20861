"""ECS clusters of the local cloud's aws provider (task definitions and services are `ecs_tasks`
and `ecs_services`).

A cluster's id is its ARN (pulumi-aws imports by name, but the id it keeps is the ARN).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import ECS_TAGGING, Answer, Shape
from stackflow.localcloud.resources._shared import input_tags, same_members

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

CLUSTER = "aws:ecs/cluster:Cluster"


def _settings(items: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    return [{"name": str(item["name"]), "value": str(item["value"])} for item in items]


def _create(ecs: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs: dict[str, Any] = {"clusterName": inputs["name"]}
    if input_tags(inputs):
        kwargs["tags"] = ECS_TAGGING.wire(input_tags(inputs))
    if inputs.get("settings"):
        kwargs["settings"] = _settings(inputs["settings"])
    return str(ecs.create_cluster(**kwargs)["cluster"]["clusterArn"])


def _describe(ecs: Any, id: str, state: Props) -> Answer | None:
    found = ecs.describe_clusters(clusters=[id], include=["TAGS", "SETTINGS"])
    clusters = [c for c in found.get("clusters", []) if c.get("status") != "INACTIVE"]
    return dict(clusters[0]) if clusters else None


def _observed(cluster: Answer, state: Props) -> Props:
    return {
        "name": cluster["clusterName"],
        "settings": same_members(_settings(cluster.get("settings", [])), state.get("settings")),
    }


def _update(ecs: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]) -> None:
    if "settings" in changed and inputs.get("settings"):
        ecs.update_cluster(cluster=id, settings=_settings(inputs["settings"]))


CLUSTER_SHAPE = Shape(
    token=CLUSTER,
    service="ecs",
    inputs=("name", "settings", "tags"),
    create=_create,
    describe=_describe,
    gone=("ClusterNotFoundException",),
    outputs=lambda cluster, ctx: {"arn": cluster["clusterArn"]},
    observed=_observed,
    update=_update,
    delete=lambda ecs, id, state: ecs.delete_cluster(cluster=id),
    tagging=ECS_TAGGING,
    computed=("arn",),
)


def register(aws: Registry) -> None:
    """Add the ECS cluster type to the aws registry."""
    aws.add(CLUSTER_SHAPE.type(force_new={"name"}, auto_name="name"))
