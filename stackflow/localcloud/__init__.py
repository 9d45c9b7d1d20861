"""The local cloud: AWS's APIs served by moto on loopback (not AWS), with the project's own
provider plugins, a data plane (a MariaDB per RDS instance, an app stand-in per listener),
latency and fault knobs, and a journal that makes it survive restarts.

    server/       the cloud server: its process, lifecycle, WSGI app, control API, journal
    control.py    the one client of the server's control API (/_stackflow/*)
    plugin/       the provider plugins (aws, random): Pulumi's provider protocol over gRPC
    registry.py   what a resource type entry is; resources/: one module per AWS service
    dataplane/    the databases and load balancers' stand-ins behind the cloud
    knobs.py      latency and faults; inventory.py: what `cloud ls` lists
    context.py    what a resource entry talks to: boto3 clients and the control API
    paths.py      the files under the cloud root; errors.py: the local cloud's errors
"""
