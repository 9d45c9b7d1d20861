"""The local cloud's server: moto's AWS APIs on loopback, made persistent, plus a control API.

Everything here says "local cloud": it stands in for AWS, it is not AWS.

    lifecycle    ensure_cloud / stop_cloud / cloud_status, from other processes
    record       server.json: CloudServer
    process      the server process itself (`python -m stackflow.localcloud.server`)
    app          the WSGI middleware in front of moto (lock, seeding, journal, data plane)
    routes       the control API, /_stackflow/* (knobs, health, data plane, shutdown)
    requests     what an AWS request is: service, action, protocol, parameters
    wsgi         bodies, headers, JSON answers and AWS-shaped errors
    journal      the mutating requests, replayed at start; sealing: their secret fields
    determinism  moto's randomness and clock, so a replay gives the same ids and times
    motoapp      moto in this process: its environment, its WSGI app, its warm-up
    hooks        the glue to the data plane
"""

from __future__ import annotations

from stackflow.localcloud.errors import CloudServerError
from stackflow.localcloud.server.lifecycle import (
    cloud_status,
    ensure_cloud,
    ensure_cloud_for,
    stop_cloud,
)
from stackflow.localcloud.server.record import DEFAULT_PORT, DEFAULT_REGION, CloudServer

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_REGION",
    "CloudServer",
    "CloudServerError",
    "cloud_status",
    "ensure_cloud",
    "ensure_cloud_for",
    "stop_cloud",
]
