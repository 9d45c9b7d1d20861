"""One resource of the local cloud as `cloud ls` lists it: the row both the inventory of the
older families (`inventory`) and the declared listings of the newer ones (`inventory_services`)
make."""

from __future__ import annotations

from typing import NamedTuple

UNTAGGED = "-"
ENVIRONMENT_TAG = "environment"


class Row(NamedTuple):
    """One resource in the local cloud.

    Attributes:
        environment: its `environment` tag, or "-".
        service: AWS service (ec2, rds, ecs, elbv2, logs, secretsmanager, iam).
        kind: vpc, subnet, security-group, internet-gateway, route-table, nat-gateway,
            db-instance, ecs-cluster, ecs-service, load-balancer, target-group, log-group,
            secret, iam-role.
        id: what AWS identifies it by (id, identifier, ARN or name).
        name: its `Name` tag or its own name ("" when it has none).
        state: its state as AWS reports it ("" when the kind has none).
    """

    environment: str
    service: str
    kind: str
    id: str
    name: str
    state: str
