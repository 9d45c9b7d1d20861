"""moto in this process: its environment (never the user's AWS setup), its WSGI app, and the
warm-up of the backends the local cloud's resources use."""

from __future__ import annotations

import importlib
import os
from typing import Any

# A requested ACM certificate is issued at once (moto's default: after 60 s), so a program that
# waits for its validation goes on as soon as its DNS records are in.
ACM_VALIDATION_WAIT = "0"


def moto_environment(region: str, port: int) -> None:
    """What moto (and botocore inside it) must see in this process: never the user's AWS setup."""
    os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"  # AmazonECSTaskExecutionRolePolicy
    os.environ["MOTO_ACM_VALIDATION_WAIT"] = ACM_VALIDATION_WAIT
    os.environ.pop("MOTO_ENABLE_RECORDING", None)  # any value turns it on; our journal records
    os.environ["MOTO_RECORDER_FILEPATH"] = os.devnull  # were it turned on: bodies hold passwords
    os.environ["MOTO_PORT"] = str(port)
    os.environ["AWS_DEFAULT_REGION"] = region
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull


def moto_wsgi_app() -> Any:
    """moto's WSGI application, serving every AWS service it knows (after `moto_environment`)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    return DomainDispatcherApplication(create_backend_app)


def quiet_request_handler() -> Any:
    """moto's request handler without werkzeug's access log, which prints query strings (the app
    logs each call instead)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class QuietHandler(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return None

    return QuietHandler


WARM_SERVICES = ("ec2", "rds", "ecs", "elbv2", "logs", "secretsmanager")
WARM_PARTITION_SERVICES = ("sts",)  # keyed by partition ("aws"), not region


def warm_backends(region: str) -> None:
    """Create the moto backends the local cloud's resources use (in `region` or its partition)
    now rather than inside the first requests: IAM with its managed policies alone takes ~0.5 s.
    Harmless to determinism: each backend draws from a seed of its own (`install_determinism`)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.utilities.utils import get_partition

    get_backend = importlib.import_module("moto.backends").get_backend
    iam = importlib.import_module("moto.iam.models")
    iam.iam_backends[DEFAULT_ACCOUNT_ID][get_partition(region)]
    for name in WARM_SERVICES:
        get_backend(name)[DEFAULT_ACCOUNT_ID][region]
    for name in WARM_PARTITION_SERVICES:
        get_backend(name)[DEFAULT_ACCOUNT_ID][get_partition(region)]
