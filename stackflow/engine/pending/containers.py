"""ECS, load balancing and ECR: found by their physical names (a listener by its load balancer and
port). Ids are pulumi-aws's: ARNs, but a task definition's is its family (its revision's ARN is
what tells two revisions apart) and an ECR repository's and its lifecycle policy's is the
repository's name."""

from __future__ import annotations

from stackflow.engine.pending.cloud import CloudClients, answer, by_name
from stackflow.engine.pending.model import Candidate, Lookup, Props, text


def task_definition(clients: CloudClients, inputs: Props) -> list[Candidate]:
    family = text(inputs, "family")
    if family is None:
        return []
    ecs = clients.client("ecs")
    arns: list[str] = []
    for page in ecs.get_paginator("list_task_definitions").paginate(
        familyPrefix=family, status="ACTIVE"
    ):
        arns += page.get("taskDefinitionArns", [])
    mine = [a for a in arns if a.rsplit("/", 1)[-1].rsplit(":", 1)[0] == family]
    return [Candidate(family, key=arn) for arn in mine]


def ecs_service(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name, cluster = text(inputs, "name"), text(inputs, "cluster")
    if name is None:
        return []
    ecs = clients.client("ecs")
    by = {"cluster": cluster} if cluster else {}
    found = answer(lambda: ecs.describe_services(services=[name], **by), "ClusterNotFoundException")
    services = (found or {}).get("services", [])
    return [Candidate(s["serviceArn"]) for s in services if s.get("status") != "INACTIVE"]


def listener(clients: CloudClients, inputs: Props) -> list[Candidate]:
    balancer, port = text(inputs, "loadBalancerArn"), inputs.get("port")
    if balancer is None:
        return []
    elb = clients.client("elbv2")
    found = answer(lambda: elb.describe_listeners(LoadBalancerArn=balancer), "LoadBalancerNotFound")
    return [
        Candidate(found_listener["ListenerArn"])
        for found_listener in (found or {}).get("Listeners", [])
        if port is None or int(found_listener.get("Port", -1)) == int(port)
    ]


def _ecr_policy(call: str, missing: str) -> Lookup:
    """A repository's (lifecycle) policy, id the repository's name: there when `call` answers."""

    def lookup(clients: CloudClients, inputs: Props) -> list[Candidate]:
        repository = text(inputs, "repository")
        if repository is None:
            return []
        ecr = clients.client("ecr")
        found = answer(
            lambda: getattr(ecr, call)(repositoryName=repository),
            missing,
            "RepositoryNotFoundException",
        )
        return [Candidate(repository)] if found else []

    return lookup


ecr_lifecycle_policy = _ecr_policy("get_lifecycle_policy", "LifecyclePolicyNotFoundException")


LOOKUPS: dict[str, Lookup] = {
    "aws:ecs/cluster:Cluster": by_name(
        "ecs",
        "describe_clusters",
        "clusters",
        "clusters",
        "clusterArn",
        listed=True,
        alive=lambda cluster: cluster.get("status") != "INACTIVE",
    ),
    "aws:ecs/taskDefinition:TaskDefinition": task_definition,
    "aws:ecs/service:Service": ecs_service,
    "aws:lb/loadBalancer:LoadBalancer": by_name(
        "elbv2",
        "describe_load_balancers",
        "Names",
        "LoadBalancers",
        "LoadBalancerArn",
        gone=("LoadBalancerNotFound",),
        listed=True,
    ),
    "aws:lb/targetGroup:TargetGroup": by_name(
        "elbv2",
        "describe_target_groups",
        "Names",
        "TargetGroups",
        "TargetGroupArn",
        gone=("TargetGroupNotFound",),
        listed=True,
    ),
    "aws:lb/listener:Listener": listener,
    "aws:ecr/repository:Repository": by_name(
        "ecr",
        "describe_repositories",
        "repositoryNames",
        "repositories",
        "repositoryName",
        gone=("RepositoryNotFoundException",),
        listed=True,
    ),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": ecr_lifecycle_policy,
    "aws:ecr/repositoryPolicy:RepositoryPolicy": _ecr_policy(
        "get_repository_policy", "RepositoryPolicyNotFoundException"
    ),
}
