"""AWS's refusals in the words pulumi-aws prints them (so the engine classifies them as it would
the real provider's), and the AWS call a knob's fault is reported as."""

from __future__ import annotations

from stackflow.localcloud.errors import FaultInjected

# The AWS service a type token's module calls, as botocore names it in errors (its service id).
SERVICE_IDS = {
    "ec2": "EC2",
    "vpc": "EC2",
    "rds": "RDS",
    "ecs": "ECS",
    "lb": "Elastic Load Balancing v2",
    "iam": "IAM",
    "cloudwatch": "CloudWatch Logs",
    "secretsmanager": "Secrets Manager",
    "s3": "S3",
    "ecr": "ECR",
    "elasticache": "ElastiCache",
    "lambda": "Lambda",
    "sfn": "SFN",
}
VERBS = {"create": "Create", "update": "Modify", "delete": "Delete", "read": "Describe"}


def api_call_for(token: str, operation: str) -> tuple[str, str]:
    """(service id, operation) a knob's fault is reported as, named after the type:
    aws:ec2/vpc:Vpc + create -> ("EC2", "CreateVpc")."""
    parts = token.split(":")
    module = parts[1].split("/")[0] if len(parts) == 3 else ""
    name = parts[-1]
    return SERVICE_IDS.get(module, module.upper()), VERBS.get(operation, "") + name


def aws_error_text(exc: Exception, service: str, verb: str, what: str) -> str:
    """An AWS refusal in the shape pulumi-aws prints it, AWS's own code and message unchanged."""
    from botocore.exceptions import ClientError

    if isinstance(exc, FaultInjected):
        status, request_id, code, message = 400, "local-cloud-knob", exc.code, exc.message
        operation = exc.operation or verb
    elif isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode", 400))
        request_id = str(meta.get("RequestId", ""))
        code, message = str(error.get("Code", "Unknown")), str(error.get("Message", ""))
        operation = exc.operation_name
    else:
        return f"{verb} {what}: {exc}"
    return (
        f"{verb} {what}: operation error {service}: {operation}, https response error "
        f"StatusCode: {status}, RequestID: {request_id}, api error {code}: {message}"
    )
