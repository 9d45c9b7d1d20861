"""The stand-in for the app behind a local-cloud load balancer listener (local cloud, not AWS).

Each listener of a load balancer gets a small HTTP server on the load balancer's loopback address
and the listener's port. Per request it finds its database the way ECS would hand it to the app:
load balancer -> listener -> target group -> the ECS service whose `loadBalancers` name that target
group -> its task definition's container `environment` (DB_HOST, DB_PORT, DB_NAME, DB_USER) and
`secrets` (DB_PASSWORD from Secrets Manager), all read through the cloud server's AWS API. It then
connects with those credentials and answers any GET with the latest applied migration version.
The password is used for the connection only: never logged, stored or echoed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pymysql
from botocore.exceptions import BotoCoreError, ClientError

from stackflow.redact import Redactor
from stackflow.schema_history import HISTORY_TABLE, latest_version

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

DEFAULT_DB_PORT = 3306
_CONNECT_TIMEOUT_S = 3
_AUTH_CODES = {1044, 1045, 1698}
_UNKNOWN_DATABASE = 1049
_NO_SUCH_TABLE = 1146
_DESCRIBE_SERVICES_MAX = 10  # ECS DescribeServices takes at most 10 services per call
# A Secrets Manager ARN has 7 colon-separated parts; ECS may append json-key:stage:version-id.
_SECRET_ARN_PARTS = 7


class Unhealthy(Exception):
    """Why the stand-in cannot report the app healthy (the 503 body's reason)."""


@dataclass(frozen=True)
class AppDatabase:
    """Where the app's task definition says its database is, and how to log in."""

    host: str
    port: int
    database: str
    user: str
    password: str = field(repr=False)
    service: str


def _pages(
    call: Callable[..., dict[str, Any]], key: str, token: str, **kwargs: Any
) -> Iterator[Any]:
    # ECS pages with nextToken, ELBv2 with Marker/NextMarker.
    next_key = "NextMarker" if token == "Marker" else token
    while True:
        page = call(**kwargs)
        yield from page.get(key, [])
        marker = page.get(next_key)
        if not marker:
            return
        kwargs[token] = marker


def _target_groups(cloud: CloudContext, lb_arn: str, port: int) -> list[str]:
    elbv2 = cloud.client("elbv2")
    try:
        listeners = list(
            _pages(elbv2.describe_listeners, "Listeners", "Marker", LoadBalancerArn=lb_arn)
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "LoadBalancerNotFound":
            raise Unhealthy(f"load balancer {lb_arn} no longer exists in the local cloud") from None
        raise
    listener = next((x for x in listeners if int(x.get("Port", -1)) == port), None)
    if listener is None:
        raise Unhealthy(f"load balancer {lb_arn} has no listener on port {port} any more")
    groups: list[str] = []
    actions = sorted(listener.get("DefaultActions", []), key=lambda a: a.get("Order", 0))
    for action in actions:
        if action.get("Type") != "forward":
            continue
        if action.get("TargetGroupArn"):
            groups.append(action["TargetGroupArn"])
        for weighted in action.get("ForwardConfig", {}).get("TargetGroups", []):
            groups.append(weighted["TargetGroupArn"])
    if not groups:
        raise Unhealthy(f"the listener on port {port} forwards to no target group")
    return groups


def _service_for(cloud: CloudContext, groups: list[str]) -> tuple[dict[str, Any], str | None]:
    """The first active ECS service whose loadBalancers name one of the target groups."""
    ecs = cloud.client("ecs")
    for cluster in _pages(ecs.list_clusters, "clusterArns", "nextToken"):
        arns = list(_pages(ecs.list_services, "serviceArns", "nextToken", cluster=cluster))
        for start in range(0, len(arns), _DESCRIBE_SERVICES_MAX):
            batch = arns[start : start + _DESCRIBE_SERVICES_MAX]
            described = ecs.describe_services(cluster=cluster, services=batch)
            for service in described.get("services", []):
                if service.get("status") != "ACTIVE":
                    continue
                for lb in service.get("loadBalancers", []):
                    if lb.get("targetGroupArn") in groups:
                        return service, lb.get("containerName")
    names = ", ".join(g.rsplit(":", 1)[-1] for g in groups)
    raise Unhealthy(f"no ECS service in the local cloud uses target group {names} yet")


def _secret_value(cloud: CloudContext, value_from: str) -> str:
    # ECS accepts "<secret arn>" or "<secret arn>:<json key>:<version stage>:<version id>".
    parts = value_from.split(":")
    secret_id, json_key, stage, version = value_from, "", "", ""
    if value_from.startswith("arn:") and len(parts) > _SECRET_ARN_PARTS:
        secret_id = ":".join(parts[:_SECRET_ARN_PARTS])
        extra = [*parts[_SECRET_ARN_PARTS:], "", "", ""]
        json_key, stage, version = extra[0], extra[1], extra[2]
    kwargs: dict[str, str] = {"SecretId": secret_id}
    if stage:
        kwargs["VersionStage"] = stage
    if version:
        kwargs["VersionId"] = version
    try:
        found = cloud.client("secretsmanager").get_secret_value(**kwargs)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise Unhealthy(f"secret {secret_id} for DB_PASSWORD cannot be read ({code})") from None
    text = found.get("SecretString")
    if text is None:
        raise Unhealthy(f"secret {secret_id} for DB_PASSWORD holds no string value")
    if not json_key:
        return str(text)
    try:
        return str(json.loads(text)[json_key])
    except (ValueError, KeyError, TypeError):
        raise Unhealthy(f"secret {secret_id} has no JSON key {json_key!r}") from None


def discover(cloud: CloudContext, lb_arn: str, port: int) -> AppDatabase:
    """Find the app's database settings for the listener on `port` of the load balancer `lb_arn`.

    Raises:
        Unhealthy: a link of the chain is missing (no service yet, no DB_* variable, no secret).
        botocore ClientError / BotoCoreError: the cloud server refused or could not be reached.
    """
    groups = _target_groups(cloud, lb_arn, port)
    service, container_name = _service_for(cloud, groups)
    service_name = str(service.get("serviceName", service.get("serviceArn", "?")))
    family = service["taskDefinition"]
    definition = cloud.client("ecs").describe_task_definition(taskDefinition=family)
    containers = definition["taskDefinition"].get("containerDefinitions", [])
    container = next((c for c in containers if c.get("name") == container_name), None)
    if container is None and containers:
        container = containers[0]
    if container is None:
        raise Unhealthy(f"task definition {family} of service {service_name} has no container")
    env = {e["name"]: e.get("value", "") for e in container.get("environment", [])}
    secrets = {s["name"]: s["valueFrom"] for s in container.get("secrets", [])}
    where = f"container {container.get('name')} of task definition {family}"
    missing = [k for k in ("DB_HOST", "DB_NAME", "DB_USER") if not env.get(k)]
    if missing:
        raise Unhealthy(f"{where} sets no {', '.join(missing)} in its environment")
    if "DB_PASSWORD" in secrets:
        password = _secret_value(cloud, secrets["DB_PASSWORD"])
    elif "DB_PASSWORD" in env:
        password = env["DB_PASSWORD"]
    else:
        raise Unhealthy(f"{where} has no DB_PASSWORD secret")
    try:
        db_port = int(env.get("DB_PORT") or DEFAULT_DB_PORT)
    except ValueError:
        raise Unhealthy(f"{where} sets DB_PORT={env['DB_PORT']!r}; expected a number") from None
    return AppDatabase(
        env["DB_HOST"], db_port, env["DB_NAME"], env["DB_USER"], password, service_name
    )


def _mysql_code(exc: pymysql.err.MySQLError) -> int:
    args = exc.args
    return int(args[0]) if args and isinstance(args[0], int) else 0


def schema_version(db: AppDatabase) -> str | None:
    """Connect as the app and read the latest applied migration version (None: no history yet).

    Raises:
        Unhealthy: the database is unreachable, refused the credentials, or lacks the database.
    """
    redact = Redactor([db.password])
    where = f"database {db.database} at {db.host}:{db.port}"
    try:
        conn = pymysql.connect(
            host=db.host,
            port=db.port,
            user=db.user,
            password=db.password,
            database=db.database,
            connect_timeout=_CONNECT_TIMEOUT_S,
            read_timeout=10,
            write_timeout=10,
        )
    except pymysql.err.MySQLError as exc:
        code = _mysql_code(exc)
        if code in _AUTH_CODES:
            reason = f"auth failed: {where} refused the credentials of user {db.user} ({code})"
        elif code == _UNKNOWN_DATABASE:
            reason = f"{where} does not exist ({code})"
        else:
            reason = f"{where} is unreachable: {exc}"
        raise Unhealthy(redact(reason)) from None
    try:
        with conn.cursor() as cur:
            try:
                # versions are text ("1.10" > "1.9"): the highest is picked part by part
                cur.execute(f"SELECT version FROM {HISTORY_TABLE} WHERE success = 1")
            except pymysql.err.ProgrammingError as exc:
                if _mysql_code(exc) == _NO_SUCH_TABLE:
                    return None
                raise
            rows = cur.fetchall()
    except pymysql.err.MySQLError as exc:
        raise Unhealthy(redact(f"{where}: reading {HISTORY_TABLE} failed: {exc}")) from None
    finally:
        conn.close()
    return latest_version(r[0] for r in rows)


def health(cloud: CloudContext, lb_arn: str, port: int) -> tuple[int, dict[str, Any]]:
    """The stand-in's answer: (200, ok body) or (503, body with the reason). Never raises."""
    db: AppDatabase | None = None
    try:
        db = discover(cloud, lb_arn, port)
        version = schema_version(db)
    except Unhealthy as exc:
        reason = str(exc)
    except (ClientError, BotoCoreError) as exc:
        reason = f"the local cloud's API could not be read: {exc}"
    except Exception as exc:  # an answer beats a dropped connection
        reason = f"the stand-in failed: {type(exc).__name__}: {exc}"
    else:
        return HTTPStatus.OK, {"status": "ok", "database": db.database, "schema_version": version}
    if db is not None:
        reason = Redactor([db.password])(reason)  # never echo the password, whatever failed
    return HTTPStatus.SERVICE_UNAVAILABLE, {"status": "unavailable", "reason": reason}


class AppStandIn:
    """An HTTP server on host:port, in a daemon thread, answering for one listener.

    Attributes:
        host, port: where it listens (the load balancer's loopback address, the listener's port).
        lb_arn: the load balancer it stands behind.
    """

    def __init__(
        self,
        host: str,
        port: int,
        lb_arn: str,
        cloud: Callable[[], CloudContext],
        log: Callable[[str], None],
    ) -> None:
        self.host, self.port, self.lb_arn = host, port, lb_arn
        self._cloud, self._log = cloud, log
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Bind host:port and serve in a daemon thread.

        Raises:
            OSError: the address cannot be bound (port taken, or below 1024 without root).
        """
        if self._server is not None:
            return
        server = ThreadingHTTPServer((self.host, self.port), self._handler())
        server.daemon_threads = True
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"app-stand-in-{self.host}:{self.port}",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread

    def stop(self) -> None:
        """Stop serving and free the port (idempotent)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "stackflow-local-cloud-app"

            def _answer(self, with_body: bool) -> None:
                status, body = health(stand_in._cloud(), stand_in.lb_arn, stand_in.port)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if with_body:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(with_body=True)

            def do_HEAD(self) -> None:
                self._answer(with_body=False)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # request lines are noise in the cloud server's log

        return Handler
