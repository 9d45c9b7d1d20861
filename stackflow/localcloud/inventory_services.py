"""`cloud ls` rows for the services rehearsals use beyond stackflow's own programs' (S3, ECR,
ElastiCache, Lambda, Step Functions, DynamoDB, SQS, SNS, EventBridge, Kinesis, KMS, API Gateway,
EKS, IAM users and policies, CloudWatch alarms, Route 53, ACM, CloudFront, AppSync): one declared
listing per kind, each a list call
of the AWS API (nothing that grows the journal). Their environment is "-": these kinds are
listed so that nothing leaked stays unseen, not placed by their tags."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.inventory_row import UNTAGGED, Row

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext


@dataclass(frozen=True)
class Listing:
    """One kind: `<service>.<call>(**args)[items]` (`items` dotted when the list is nested),
    each item's id, name and state fields (an item that is a plain string is its own id and
    name)."""

    service: str
    kind: str
    call: str
    items: str
    id: str = ""
    name: str = ""
    state: str = ""
    args: tuple[tuple[str, Any], ...] = ()
    own: str = ""  # the name of the one AWS makes by itself (left out, as the default VPC is)


LISTINGS = (
    Listing("s3", "bucket", "list_buckets", "Buckets", "Name", "Name"),
    Listing(
        "ecr",
        "repository",
        "describe_repositories",
        "repositories",
        "repositoryArn",
        "repositoryName",
    ),
    Listing(
        "elasticache",
        "replication-group",
        "describe_replication_groups",
        "ReplicationGroups",
        "ReplicationGroupId",
        "ReplicationGroupId",
        "Status",
    ),
    Listing(
        "elasticache",
        "cache-cluster",
        "describe_cache_clusters",
        "CacheClusters",
        "CacheClusterId",
        "CacheClusterId",
        "CacheClusterStatus",
    ),
    Listing(
        "lambda", "function", "list_functions", "Functions", "FunctionArn", "FunctionName", "State"
    ),
    Listing(
        "stepfunctions",
        "state-machine",
        "list_state_machines",
        "stateMachines",
        "stateMachineArn",
        "name",
    ),
    Listing("dynamodb", "table", "list_tables", "TableNames"),
    Listing("sqs", "queue", "list_queues", "QueueUrls"),
    Listing("sns", "topic", "list_topics", "Topics", "TopicArn", "TopicArn"),
    Listing("events", "event-bus", "list_event_buses", "EventBuses", "Arn", "Name", own="default"),
    Listing("events", "event-rule", "list_rules", "Rules", "Arn", "Name", "State"),
    Listing("kinesis", "stream", "list_streams", "StreamNames"),
    Listing("kms", "key", "list_keys", "Keys", "KeyArn", "KeyId"),
    Listing("apigateway", "rest-api", "get_rest_apis", "items", "id", "name"),
    Listing("apigatewayv2", "api", "get_apis", "Items", "ApiId", "Name"),
    Listing("eks", "cluster", "list_clusters", "clusters"),
    Listing("iam", "iam-user", "list_users", "Users", "Arn", "UserName"),
    Listing(
        "iam",
        "iam-policy",
        "list_policies",
        "Policies",
        "Arn",
        "PolicyName",
        args=(("Scope", "Local"),),
    ),
    Listing(
        "cloudwatch",
        "metric-alarm",
        "describe_alarms",
        "MetricAlarms",
        "AlarmArn",
        "AlarmName",
        "StateValue",
    ),
    Listing("route53", "hosted-zone", "list_hosted_zones", "HostedZones", "Id", "Name"),
    Listing(
        "acm",
        "certificate",
        "list_certificates",
        "CertificateSummaryList",
        "CertificateArn",
        "DomainName",
        "Status",
    ),
    Listing(
        "cloudfront",
        "distribution",
        "list_distributions",
        "DistributionList.Items",
        "ARN",
        "DomainName",
        "Status",
    ),
    Listing("appsync", "graphql-api", "list_graphql_apis", "graphqlApis", "arn", "name"),
)


def rows(ctx: CloudContext) -> Iterator[Row]:
    """A row for everything these listings find."""
    for listing in LISTINGS:
        answer = getattr(ctx.client(listing.service), listing.call)(**dict(listing.args))
        for part in listing.items.split("."):
            answer = (answer or {}).get(part)
        for item in answer or []:
            if isinstance(item, str):
                ident = name = item
                state = ""
            else:
                ident = str(item.get(listing.id, ""))
                name = str(item.get(listing.name, ""))
                state = str(item.get(listing.state, "")) if listing.state else ""
            if not (listing.own and name == listing.own):
                yield Row(UNTAGGED, listing.service, listing.kind, ident, name, state)
