"""ECS, load balancing and ECR: found by their physical names (a listener by its load balancer and
port). Ids are pulumi-aws's: ARNs, but a task definition's is its family (its revision's ARN is
what tells two revisions apart) and an ECR repository's and its lifecycle policy's is the
repository's name."""

from __future__ import annotations

from stackflow.engine.pending.cloud import CloudClients, answer
from stackflow.engine.pending.model import Candidate, Lookup, Props, text


def ecs_cluster(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    found = clients.client("ecs").describe_clusters(clusters=[name])["clusters"]
    return [Candidate(c["clusterArn"]) for c in found if c.get("status") != "INACTIVE"]


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


def load_balancer(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    elb = clients.client("elbv2")
    found = answer(lambda: elb.describe_load_balancers(Names=[name]), "LoadBalancerNotFound")
    return [Candidate(b["LoadBalancerArn"]) for b in (found or {}).get("LoadBalancers", [])]


def target_group(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    elb = clients.client("elbv2")
    found = answer(lambda: elb.describe_target_groups(Names=[name]), "TargetGroupNotFound")
    return [Candidate(g["TargetGroupArn"]) for g in (found or {}).get("TargetGroups", [])]


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


def ecr_repository(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    ecr = clients.client("ecr")
    found = answer(
        lambda: ecr.describe_repositories(repositoryNames=[name]), "RepositoryNotFoundException"
    )
    return [Candidate(r["repositoryName"]) for r in (found or {}).get("repositories", [])]


def ecr_lifecycle_policy(clients: CloudClients, inputs: Props) -> list[Candidate]:
    repository = text(inputs, "repository")
    if repository is None:
        return []
    ecr = clients.client("ecr")
    found = answer(
        lambda: ecr.get_lifecycle_policy(repositoryName=repository),
        "LifecyclePolicyNotFoundException",
        "RepositoryNotFoundException",
    )
    return [Candidate(repository)] if found else []


LOOKUPS: dict[str, Lookup] = {
    "aws:ecs/cluster:Cluster": ecs_cluster,
    "aws:ecs/taskDefinition:TaskDefinition": task_definition,
    "aws:ecs/service:Service": ecs_service,
    "aws:lb/loadBalancer:LoadBalancer": load_balancer,
    "aws:lb/targetGroup:TargetGroup": target_group,
    "aws:lb/listener:Listener": listener,
    "aws:ecr/repository:Repository": ecr_repository,
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": ecr_lifecycle_policy,
}
