"""The resource types and functions the local cloud serves, one module per AWS service.

Each module has `register(registry)`; adding a type is one entry in one module (see registry.py).
"""

from __future__ import annotations

import importlib

from stackflow.localcloud.registry import Registry

MODULES = {
    "aws": (
        "ec2",
        "rds",
        "secretsmanager",
        "iam",
        "logs",
        "ecs",
        "elb",
        "s3",
        "ecr",
        "elasticache",
        "lambda_",
        "sfn",
    ),
    "random": ("random",),
}


def registry(package: str) -> Registry:
    """Every type and function of `package` ("aws" or "random").

    Raises:
        ValueError: an unknown package, naming the served ones.
    """
    if package not in MODULES:
        raise ValueError(f"unknown provider package {package!r}; served: {', '.join(MODULES)}")
    found = Registry(package)
    for name in MODULES[package]:
        module = importlib.import_module(f"stackflow.localcloud.resources.{name}")
        module.register(found)
    return found
