"""The local cloud's data plane: a real MariaDB per RDS instance, a stand-in app per listener.

The cloud server asks `Dataplane.before_api_call` before a mutating AWS request (a database's data
folder is prepared before the instance is created) and calls `Dataplane.on_api_call` after each
successful one. Everything is recorded under `<root>/dataplane/` without secrets, so `start_all`
brings it all back after a restart. This is the local cloud, not AWS.

    plane       Dataplane: the databases and load balancers behind one lock
    calls       ApiCall: what the server tells it
    databases   a MariaDB per RDS instance
    balancers   an address per load balancer, an app stand-in per listener
    addresses   the loopback addresses (127.x.y.z, from a /16 of the cloud's own)
    files       its JSON records

Layout:
    addresses.json              {"databases": {id: "127.x.y.z"}, "load_balancers": {name: ...}}
    template/                   the initialised data folder that every instance copies
    install.log, tmp/           the template's bootstrap: its log and private temporary folder
    db/<identifier>/            instance.json (the record), data/, tmp/, server.json, mariadbd.log
    lb/<name>.json              {"name", "arn", "host", "listeners": {listener arn: port}}
    snapshots/<final id>.sql    final snapshots of deleted instances
"""

from __future__ import annotations

from stackflow.localcloud.dataplane.addresses import address_pool
from stackflow.localcloud.dataplane.calls import ApiCall
from stackflow.localcloud.dataplane.databases import SERVER_ARGS, DatabaseRecord
from stackflow.localcloud.dataplane.plane import Dataplane

__all__ = ["SERVER_ARGS", "ApiCall", "DatabaseRecord", "Dataplane", "address_pool"]
