"""The local cloud: AWS's APIs served by moto on loopback (not AWS), with the project's own
provider plugins, a data plane (a MariaDB per RDS instance, an app stand-in per listener),
latency and fault knobs, and a journal that makes it survive restarts."""
