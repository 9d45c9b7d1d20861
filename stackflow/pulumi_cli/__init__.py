"""The Pulumi CLI that the automation engine runs by path: reused from a per-user cache, or built.

The CLI lives outside the checkout, keyed by version, at `cache_root()/pulumi/v<version>/bin/pulumi`,
so a second clone or a CI run on the same machine reuses it. Its version is always the installed
`pulumi` SDK's (SDK and CLI move together). It comes from, in order:

1. the cache, if that binary reports exactly `v<version>` (checked once, then remembered in a stamp
   keyed by the file's identity, so a run costs no subprocess);
2. a `pulumi` on PATH that reports exactly `v<version>`: linked into the cache (a symlink, so the
   engine always uses the cache path, and the CLI still finds the language hosts beside it);
3. a build from source with Go, from the wrapper module in scripts/pulumi-cli, whose go.sum pins
   every module by checksum (`-mod=readonly`: go.mod and go.sum are never changed by a build).

    python -m stackflow.pulumi_cli ensure    reuse or build; prints where the CLI is
    python -m stackflow.pulumi_cli path      the CLI's path (exit 1 if there is none yet)
    python -m stackflow.pulumi_cli version   the version needed, as `pulumi version` prints it
"""

from __future__ import annotations

from stackflow.pulumi_cli.build import build_cli
from stackflow.pulumi_cli.cache import CLI_VERSION, cache_root, cli_path, cli_root, find_cli
from stackflow.pulumi_cli.command import ensure_cli, main

__all__ = [
    "CLI_VERSION",
    "build_cli",
    "cache_root",
    "cli_path",
    "cli_root",
    "ensure_cli",
    "find_cli",
    "main",
]
