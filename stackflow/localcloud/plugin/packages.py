"""Which provider packages the local cloud's plugins serve, and where they find the cloud."""

from __future__ import annotations

PACKAGES = {"aws": "pulumi-aws", "random": "pulumi-random"}  # package -> its Python SDK
ENDPOINT_ENV = "STACKFLOW_LOCALCLOUD_URL"  # the cloud server's URL, set by the engine
DEFAULT_REGION = "eu-west-1"
