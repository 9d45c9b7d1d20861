"""The database stack: RDS MySQL 8.0 in the private subnets, its password in Secrets Manager."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, SecretStr

from programs.common import (
    RDS_IDENTIFIER_MAX,
    BaseArgs,
    Id,
    Ids,
    Port,
    Unknown,
    given,
    given_all,
    tags,
)

STACK = "database"
PARAMETER_FAMILY = "mysql8.0"
PASSWORD_LENGTH = 32
# RDS rejects / ' " @ and space; URL and shell metacharacters (# ? % : $ `) are left out too.
PASSWORD_SPECIALS = "!*()-_=+[]{}<>.^~"


class DatabaseArgs(BaseArgs, frozen=True):
    """What the database program needs (`| Unknown`: from the networking stack, which a preview
    may not know yet)."""

    private_subnet_ids: Ids
    db_security_group_id: Id | Unknown
    engine_version: str = Field(pattern=r"^8\.0(\.\d+)?$")
    instance_class: str = Field(pattern=r"^db\.[a-z0-9]+\.[a-z0-9]+$")
    allocated_storage_gb: int = Field(ge=20, le=65536)
    backup_retention_days: int = Field(ge=0, le=35)
    multi_az: bool
    deletion_protection: bool
    final_snapshot: bool
    publicly_accessible: bool
    db_name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
    username: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,15}$")
    port: Port
    # Off by default: the migration runner connects without TLS unless told to use it.
    require_secure_transport: bool = False
    # None: apply at once unless the environment is prod (named prod or prod-*).
    apply_immediately: bool | None = None


class DatabaseOutputs(BaseModel):
    """The database stack's exports, resolved."""

    host: str
    port: int
    database: str
    user: str
    password: SecretStr
    password_secret_arn: str
    instance_id: str


def _is_prod(environment: str) -> bool:
    return environment == "prod" or environment.startswith("prod-")


def database(args: DatabaseArgs) -> dict[str, Any]:
    """Declare the MySQL instance, its subnet and parameter groups, password and secret."""
    # Imported here: the graph reads this module's argument and output models on every run,
    # and a run that skips the stack (nothing changed) never loads Pulumi's SDK.
    import pulumi
    import pulumi_aws as aws
    import pulumi_random as random

    base_tags = tags(args.project, args.environment, STACK)
    identifier = args.name("mysql", RDS_IDENTIFIER_MAX)

    subnet_group = aws.rds.SubnetGroup(
        "db-subnets",
        name=args.name("db-subnets"),
        subnet_ids=given_all(args.private_subnet_ids),
        description=f"Private subnets of {args.project} {args.environment}",
        tags=base_tags,
    )
    parameters: list[aws.rds.ParameterGroupParameterArgsDict] = [
        {"name": "character_set_server", "value": "utf8mb4"},
        {"name": "collation_server", "value": "utf8mb4_unicode_ci"},
    ]
    if args.require_secure_transport:
        parameters.append({"name": "require_secure_transport", "value": "ON"})
    parameter_group = aws.rds.ParameterGroup(
        "mysql",
        # The family is in the name, so a new major version gets a new group beside the old one.
        name=args.name(PARAMETER_FAMILY.replace(".", "-")),
        family=PARAMETER_FAMILY,
        description=f"MySQL settings of {args.project} {args.environment}",
        parameters=parameters,
        tags=base_tags,
    )

    password = random.RandomPassword(
        "db-password",
        length=PASSWORD_LENGTH,
        special=True,
        override_special=PASSWORD_SPECIALS,
    )
    # Mark it secret here too: the mock runtime does not apply the provider's secret outputs.
    secret_password: pulumi.Output[str] = pulumi.Output.secret(password.result)

    instance = aws.rds.Instance(
        "mysql",
        identifier=identifier,
        engine="mysql",
        engine_version=args.engine_version,
        instance_class=args.instance_class,
        allocated_storage=args.allocated_storage_gb,
        storage_type="gp3",
        storage_encrypted=True,
        db_name=args.db_name,
        username=args.username,
        password=secret_password,
        port=args.port,
        db_subnet_group_name=subnet_group.name,
        parameter_group_name=parameter_group.name,
        vpc_security_group_ids=[given(args.db_security_group_id)],
        publicly_accessible=args.publicly_accessible,
        multi_az=args.multi_az,
        backup_retention_period=args.backup_retention_days,
        deletion_protection=args.deletion_protection,
        skip_final_snapshot=not args.final_snapshot,
        final_snapshot_identifier=f"{identifier}-final" if args.final_snapshot else None,
        copy_tags_to_snapshot=True,
        apply_immediately=(
            not _is_prod(args.environment)
            if args.apply_immediately is None
            else args.apply_immediately
        ),
        tags=base_tags,
    )

    secret = aws.secretsmanager.Secret(
        "db-password",
        # A prefix, not a fixed name: a deleted secret keeps its name during the recovery window.
        name_prefix=f"{args.project}/{args.environment}/mysql-password-",
        description=f"MySQL password of {args.username} on {identifier}",
        tags=base_tags,
    )
    aws.secretsmanager.SecretVersion(
        "db-password", secret_id=secret.id, secret_string=secret_password
    )

    return {
        # Read back from the instance: what RDS created, not what was asked for.
        "host": instance.address,
        "port": instance.port,
        "database": instance.db_name,
        "user": instance.username,
        "password": secret_password,
        "password_secret_arn": secret.arn,
        "instance_id": instance.identifier,
    }
