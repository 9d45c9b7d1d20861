"""Serving a provider plugin: `python -m stackflow.localcloud.plugin aws|random`.

The engine starts `pulumi-resource-aws` (or `-random`) from the project's Pulumi home; that script
runs this, which prints its port and serves until the engine closes its stdin.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from concurrent import futures

import grpc

from stackflow.localcloud.plugin.packages import ENDPOINT_ENV, PACKAGES
from stackflow.localcloud.plugin.servicer import ProviderServicer
from stackflow.localcloud.resources import lazy_registry


def _exit_when_stdin_closes() -> None:
    """The engine closes our stdin when it is done with us; a killed CLI closes it too."""
    try:
        while sys.stdin.buffer.read(65536):
            pass
    finally:
        os._exit(0)


def serve(package: str) -> None:
    """Serve `package`'s provider on a free loopback port; print the port for the engine."""
    from pulumi.runtime.proto import provider_pb2_grpc

    servicer = ProviderServicer(package, lazy_registry(package), os.environ.get(ENDPOINT_ENV))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)],
    )
    handler = provider_pb2_grpc.ResourceProviderServicer()
    # Bind our methods over the generated base class's "unimplemented" ones.
    for name in dir(servicer):
        if name[:1].isupper() and hasattr(handler, name):
            setattr(handler, name, getattr(servicer, name))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(handler, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    server.wait_for_termination()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="stackflow's local-cloud provider plugin")
    parser.add_argument("package", choices=sorted(PACKAGES))
    parser.add_argument("engine", nargs="?", help="the engine's address (unused)")
    args, _ = parser.parse_known_args(argv)
    serve(args.package)
