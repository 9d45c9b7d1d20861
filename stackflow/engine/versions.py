"""What an engine's fingerprints include: the engine's name and the versions of the SDK, the provider
packages and the CLI; read without importing Pulumi's SDK (a no-op `up` needs them)."""

from __future__ import annotations

import contextlib
from importlib.metadata import version as package_version

from stackflow.errors import EngineUnavailable

NAME = "automation"


def engine_versions(cloud: str) -> dict[str, str]:
    """SDK, plugin and (when the CLI is found) CLI versions; part of every fingerprint."""
    from stackflow.pulumi_cli import CLI_VERSION, find_cli

    found = {
        "engine": NAME,
        "cloud": cloud,
        "pulumi-sdk": package_version("pulumi"),
        "pulumi-aws": package_version("pulumi-aws"),
        "pulumi-random": package_version("pulumi-random"),
    }
    with contextlib.suppress(EngineUnavailable):  # the engine says so when it runs
        if find_cli() is not None:  # found only at exactly the pinned version
            found["pulumi-cli"] = CLI_VERSION
    return found
