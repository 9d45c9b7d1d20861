"""A real MariaDB owned by this project, under one folder: for tests and the offline quickstart.

`ensure_local_mariadb` initialises a data folder once, starts `mariadbd` detached on 127.0.0.1
(reusing one already started from the same folder), then creates the database and a user with the
given password. The server's root account authenticates by Unix socket only, so no admin password
exists anywhere; the user's password is sent over the socket and never written to disk or logged.

The local cloud's data plane runs many such servers, one per folder: `prepare_template` initialises
a data folder once, and `start_local_mariadb` starts a server from a copy of it on a loopback
address of its own (127.x.y.z) with extra server options (a small memory footprint).

Every server, and the bootstrap that initialises a data folder, keeps its temporary files in a
private folder inside its base folder, never in the shared /tmp.

    layout      its programs and the files under a base folder
    bootstrap   mariadb-install-db (retried once) and template copies
    server      the server's record, start and stop
    accounts    the admin connection, users and grants; ensure_local_mariadb
    dump        mariadb-dump of its databases
"""

from __future__ import annotations

from stackflow.localdb.accounts import (
    admin_connection,
    ensure_local_mariadb,
    grant_database,
    quote_identifier,
    set_user,
)
from stackflow.localdb.bootstrap import prepare_template
from stackflow.localdb.dump import dump_local_mariadb
from stackflow.localdb.errors import MariaDBBootstrapError
from stackflow.localdb.layout import find_binary, socket_path
from stackflow.localdb.server import (
    AdminConnection,
    LocalServer,
    forget_server,
    running_server,
    start_local_mariadb,
    stop_local_mariadb,
)

__all__ = [
    "AdminConnection",
    "LocalServer",
    "MariaDBBootstrapError",
    "admin_connection",
    "dump_local_mariadb",
    "ensure_local_mariadb",
    "find_binary",
    "forget_server",
    "grant_database",
    "prepare_template",
    "quote_identifier",
    "running_server",
    "set_user",
    "socket_path",
    "start_local_mariadb",
    "stop_local_mariadb",
]
