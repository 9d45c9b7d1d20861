"""The local cloud's server: moto's AWS APIs on loopback, made persistent, plus a small control API.

`python -m stackflow.localcloud.server --root DIR --port N [--region R]` serves moto's WSGI app
behind a middleware that

1. answers `/_stackflow/*` itself (health, knobs, data plane endpoints, shutdown);
2. runs every AWS request under one process-wide lock;
3. before a mutating request seeds moto's randomness from the journal's sequence number and
   freezes moto's clock, so replaying the same requests in the same order gives the same ids and
   timestamps, whatever reads were interleaved;
4. appends each successful mutating request to `journal.jsonl`, its secret fields sealed;
5. tells the data plane about it (`Dataplane.on_api_call`).

At start it replays the journal into the fresh moto backend, starts the data plane, writes
`server.json` and serves. `ensure_cloud`, `stop_cloud` and `cloud_status` manage that process from
other processes, in the style of `stackflow.localprefect` and `stackflow.localdb`.

Everything here says "local cloud": it stands in for AWS, it is not AWS.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import gzip
import hashlib
import importlib
import io
import json
import logging
import os
import queue
import random
import signal
import string
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape as xml_escape

from stackflow.errors import StackflowError
from stackflow.localcloud.errors import CloudServerError as CloudServerError  # flows import it here
from stackflow.localcloud.paths import (
    journal_key,
    journal_path,
    knobs_path,
    passphrase,
    server_log,
    server_record,
)
from stackflow.processes import folder_lock, log_tail, pid_alive, port_free

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

    from stackflow.localcloud.knobs import KnobStore

DEFAULT_PORT = 4566
DEFAULT_REGION = "eu-west-1"
_SEED_BASE = 20_240_601  # any constant: replay only needs the same one every time
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 30.0
_MODULE = "stackflow.localcloud.server"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]

log = logging.getLogger("stackflow.localcloud")


@dataclass(frozen=True)
class CloudServer:
    """A running local cloud server (what server.json records; no secrets).

    Attributes:
        url: where it serves AWS's APIs and `/_stackflow/*`, e.g. http://127.0.0.1:4566.
        pid: its process id (leader of its own process group).
        root: the cloud root it keeps its files in.
        port: its TCP port on 127.0.0.1.
        region: its default region (it answers for every region).
        dataplane: whether it runs the data plane (databases, app stand-ins); tests of moto
            alone turn it off.
    """

    url: str
    pid: int
    root: Path
    port: int
    region: str = DEFAULT_REGION
    dataplane: bool = True

    @property
    def log(self) -> Path:
        return server_log(self.root)


# --- what an AWS request is ---------------------------------------------------------------------

# Action-name prefixes of calls that change nothing: they are not journaled (so a nightly drift
# check, which only reads, does not grow the journal).
READ_PREFIXES = (
    "Describe",
    "List",
    "Get",
    "Head",
    "BatchGet",
    "Search",
    "Query",
    "Scan",
    "Lookup",
    "Filter",
    "Check",
    "Validate",
    "Simulate",
    "Preview",
    "Estimate",
    "Select",
    "Test",
)
READ_ONLY_SERVICES = frozenset({"sts"})  # nothing sts does is state worth replaying
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Headers moto routes on: the journal keeps these and nothing else of a request's headers.
JOURNAL_HEADERS = ("Host", "Content-Type", "X-Amz-Target", "Authorization", "X-Amz-Date")


@dataclass(frozen=True)
class AwsRequest:
    """One AWS API request as the middleware sees it.

    Attributes:
        service: the signing name from the credential scope ("ec2", "rds",
            "elasticloadbalancing", "secretsmanager"), or "-" for an unsigned request.
        action: "CreateVpc"; for REST APIs "<METHOD> <path>".
        protocol: "query" (form body or URL `Action=`), "json" (X-Amz-Target) or "rest".
        params: the form fields or the JSON body, secrets included.
        body_kind: how the body is kept: "form", "json", "text", "base64" or "empty".
    """

    service: str
    action: str
    protocol: str
    params: Any
    body_kind: str

    @property
    def mutating(self) -> bool:
        if self.service in READ_ONLY_SERVICES:
            return False
        if self.protocol == "rest":
            return self.action.split(" ", 1)[0] not in _READ_METHODS
        return not self.action.startswith(READ_PREFIXES)


def service_of(authorization: str | None) -> str | None:
    """The service of a SigV4 `Authorization` header's credential scope
    (`Credential=AKID/date/region/SERVICE/aws4_request`), or None."""
    if not authorization or "Credential=" not in authorization:
        return None
    scope = authorization.split("Credential=", 1)[1].split(",", 1)[0].strip()
    parts = scope.split("/")
    return parts[3].lower() if len(parts) >= 5 else None


def parse_request(
    method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
) -> AwsRequest:
    """Classify an AWS request: service, action, protocol and parameters.

    Args:
        method, path, query: the request line (query without `?`).
        headers: request headers (any capitalisation of names).
        body: the request body, already decompressed.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    service = service_of(lower.get("authorization")) or "-"
    content_type = lower.get("content-type", "")
    target = lower.get("x-amz-target")
    text: str | None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if target:
        params: Any = {}
        kind = "empty"
        if text and text.strip():
            try:
                params, kind = json.loads(text), "json"
            except ValueError:
                params, kind = {}, "text"
        return AwsRequest(service, target.rsplit(".", 1)[-1], "json", params, kind)
    if content_type.startswith("application/x-www-form-urlencoded") and text is not None:
        form = dict(parse_qsl(text, keep_blank_values=True))
        if "Action" in form:
            return AwsRequest(service, form["Action"], "query", form, "form")
    url_params = dict(parse_qsl(query, keep_blank_values=True))
    if "Action" in url_params and not body:
        return AwsRequest(service, url_params["Action"], "query", url_params, "empty")
    if not body:
        return AwsRequest(service, f"{method} {path}", "rest", {}, "empty")
    if text is None:
        return AwsRequest(service, f"{method} {path}", "rest", {}, "base64")
    if "json" in content_type or text.lstrip().startswith(("{", "[")):
        try:
            return AwsRequest(service, f"{method} {path}", "rest", json.loads(text), "json")
        except ValueError:
            pass
    return AwsRequest(service, f"{method} {path}", "rest", {}, "text")


# --- sealing secret fields ------------------------------------------------------------------------

SECRET_FIELDS = frozenset(
    {
        "MasterUserPassword",
        "SecretString",
        "SecretBinary",
        "Password",
        "NewPassword",
        "OldPassword",
        "AuthToken",
        "SecretAccessKey",
        "PrivateKey",
    }
)


def is_secret_field(name: str) -> bool:
    """Whether a parameter holds a secret: by its last dotted segment (`Foo.member.1.Password`)."""
    last = name.rsplit(".", 1)[-1]
    return last in SECRET_FIELDS or last.endswith("Password")


def seal(value: Any, fernet: Fernet) -> Any:
    """`value` with every secret field replaced by {"sealed": "<fernet token>"} (recursively)."""
    if isinstance(value, dict):
        return {
            k: (
                {"sealed": fernet.encrypt(json.dumps(v).encode()).decode()}
                if is_secret_field(str(k)) and v is not None
                else seal(v, fernet)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [seal(v, fernet) for v in value]
    return value


def unseal(value: Any, fernet: Fernet) -> Any:
    """The inverse of `seal`."""
    if isinstance(value, dict):
        if set(value) == {"sealed"} and isinstance(value["sealed"], str):
            return json.loads(fernet.decrypt(value["sealed"].encode()))
        return {k: unseal(v, fernet) for k, v in value.items()}
    if isinstance(value, list):
        return [unseal(v, fernet) for v in value]
    return value


# --- determinism: moto's randomness and clock ---------------------------------------------------


class _Clock:
    """moto's "now": frozen at a mutating request's recorded time, real otherwise."""

    frozen: dt.datetime | None = None  # aware, UTC

    @classmethod
    def utcnow(cls) -> dt.datetime:
        frozen = cls.frozen
        return (frozen or dt.datetime.now(dt.UTC)).replace(tzinfo=None)

    @classmethod
    def time(cls) -> float:
        frozen = cls.frozen
        return frozen.timestamp() if frozen is not None else time.time()


class _TimeModule:
    """Stands in for the `time` module inside moto modules that call `time.time()` directly."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def time() -> float:
        return _Clock.time()


class _UuidModule:
    """Stands in for `uuid` inside moto modules that call `uuid.uuid4()` directly."""

    def __getattr__(self, name: str) -> Any:
        import uuid

        return getattr(uuid, name)

    @staticmethod
    def uuid4() -> Any:
        from moto.moto_api._internal import mock_random

        return mock_random.uuid4()


@contextlib.contextmanager
def _isolated_randomness(label: str) -> Iterator[None]:
    """Run the block with moto's and Python's randomness seeded from `label`, then put both
    generators back where they were: what the block draws does not shift the request's draws."""
    from moto.moto_api._internal import mock_random

    saved = (mock_random.getstate(), random.getstate())
    seed = int.from_bytes(hashlib.sha256(label.encode()).digest()[:8], "big")
    mock_random.seed(seed)
    random.seed(seed)
    try:
        yield
    finally:
        mock_random.setstate(saved[0])
        random.setstate(saved[1])


def seed_for(seq: int) -> None:
    """Seed moto's randomness (and Python's, which some moto code uses) for journal entry `seq`."""
    from moto.moto_api._internal import mock_random

    mock_random.seed(_SEED_BASE + seq)
    random.seed(_SEED_BASE + seq)


_installed = False


def install_determinism() -> None:
    """Patch moto, in this process only, so that its state depends on the requests alone:

    - a backend (account, region) created lazily, maybe during a read, draws its ids (default
      VPC, subnets...) from a seed of its own, so it comes out the same whenever it is created;
    - moto's `utcnow` and the `time.time()` / `uuid.uuid4()` some services call directly go
      through `_Clock` and moto's seeded random.
    """
    global _installed
    if _installed:
        return
    _installed = True
    import moto.core.utils as core_utils
    from moto.core.base_backend import AccountSpecificBackend

    original_getitem = AccountSpecificBackend.__getitem__

    def getitem(self: Any, region_name: str) -> Any:
        key = "aws" if region_name == "global" else region_name
        if dict.__contains__(self, key):
            return original_getitem(self, region_name)
        with _isolated_randomness(f"{self.service_name}|{self.account_id}|{key}"):
            return original_getitem(self, region_name)

    AccountSpecificBackend.__getitem__ = getitem  # type: ignore[method-assign]

    original_utcnow = core_utils.utcnow
    core_utils.utcnow = _Clock.utcnow
    # Modules imported before this point bound the original by name.
    for name, module in list(sys.modules.items()):
        if name.startswith("moto.") and getattr(module, "utcnow", None) is original_utcnow:
            module.utcnow = _Clock.utcnow  # type: ignore[attr-defined]
    # Services that read the clock or uuid4 directly (imported now, to patch them before use).
    secretsmanager = importlib.import_module("moto.secretsmanager.models")
    setattr(secretsmanager, "time", _TimeModule())  # noqa: B010 (mypy: not a declared attribute)
    rds = importlib.import_module("moto.rds.models")
    setattr(rds, "uuid", _UuidModule())  # noqa: B010
    _unique_dbi_resource_ids(rds)
    _skip_unused_iam_partitions()


def _unique_dbi_resource_ids(rds: Any) -> None:
    """moto gives every RDS instance the same DbiResourceId, which pulumi-aws uses as the id: draw
    one per instance from moto's seeded random instead (AWS's shape: db- and 26 of A-Z0-9)."""
    from moto.moto_api._internal import mock_random

    original_init = rds.DBInstance.__init__
    alphabet = string.ascii_uppercase + string.digits

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.dbi_resource_id = "db-" + "".join(mock_random.choice(alphabet) for _ in range(26))

    rds.DBInstance.__init__ = init


def _skip_unused_iam_partitions() -> None:
    """moto finds a request's account by looking for its access key in IAM, creating IAM's backend
    in all five partitions on the way (with the managed policies loaded, ~2 s). A partition whose
    backend does not exist yet holds no access keys: look in the existing ones only."""
    iam = importlib.import_module("moto.iam.models")

    def get_account_id_from(access_key: str) -> str:
        for account_id, account in list(iam.iam_backends.items()):
            for partition in iam.PARTITION_NAMES:
                if dict.__contains__(account, partition) and (
                    access_key in account[partition].access_keys
                ):
                    return str(account_id)
        return str(iam.DEFAULT_ACCOUNT_ID)

    setattr(iam, "get_account_id_from", get_account_id_from)  # noqa: B010


WARM_SERVICES = ("ec2", "rds", "ecs", "elbv2", "logs", "secretsmanager")
WARM_PARTITION_SERVICES = ("sts",)  # keyed by partition ("aws"), not region


def warm_backends(region: str) -> None:
    """Create the moto backends the local cloud's resources use (in `region` or its partition)
    now rather than inside the first requests: IAM with its managed policies alone takes ~0.5 s.
    Harmless to determinism: each backend draws from a seed of its own (`install_determinism`)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.utilities.utils import get_partition

    get_backend = importlib.import_module("moto.backends").get_backend
    iam = importlib.import_module("moto.iam.models")
    iam.iam_backends[DEFAULT_ACCOUNT_ID][get_partition(region)]
    for name in WARM_SERVICES:
        get_backend(name)[DEFAULT_ACCOUNT_ID][region]
    for name in WARM_PARTITION_SERVICES:
        get_backend(name)[DEFAULT_ACCOUNT_ID][get_partition(region)]


# --- the journal -----------------------------------------------------------------------------------


class Journal:
    """`journal.jsonl`: one JSON object per successful mutating request, secrets sealed."""

    def __init__(self, path: Path, fernet: Fernet) -> None:
        self.path = path
        self.fernet = fernet
        self.next_seq = 0

    def entries(self) -> list[dict[str, Any]]:
        """Every readable entry, in order; a torn last line (a crash mid-write) is skipped."""
        found: list[dict[str, Any]] = []
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return found
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                found.append(json.loads(line))
            except ValueError:
                log.warning("journal line %d of %s is not JSON; skipped", number, self.path)
        if found:
            self.next_seq = max(int(e.get("seq", -1)) for e in found) + 1
        return found

    def entry(
        self,
        seq: int,
        at: dt.datetime,
        request: AwsRequest,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        """A journal entry for a request (secret fields sealed, the URL query too)."""
        pairs = parse_qsl(query, keep_blank_values=True)
        kept_query: Any = query
        if any(is_secret_field(k) for k, _ in pairs):
            kept_query = [[k, seal({k: v}, self.fernet)[k]] for k, v in pairs]
        body: Any
        if request.body_kind in ("form", "json"):
            body = {request.body_kind: seal(request.params, self.fernet)}
        else:
            body = None
        return {
            "seq": seq,
            "at": at.isoformat(),
            "service": request.service,
            "action": request.action,
            "method": method,
            "path": path,
            "query": kept_query,
            "headers": {k: v for k, v in headers.items() if k in JOURNAL_HEADERS},
            "body": body,
        }

    def append(self, entry: dict[str, Any], raw_body: bytes) -> None:
        if entry["body"] is None and raw_body:
            # REST bodies we cannot parse are kept as they came (no known secret fields inside).
            try:
                entry["body"] = {"text": raw_body.decode("utf-8")}
            except UnicodeDecodeError:
                entry["body"] = {"base64": base64.b64encode(raw_body).decode()}
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(line)
        self.next_seq = int(entry["seq"]) + 1

    def request_of(self, entry: Mapping[str, Any]) -> tuple[str, bytes, dict[str, str]]:
        """(query string, body, headers) to send again for a journal entry, secrets unsealed."""
        query = entry.get("query") or ""
        if isinstance(query, list):
            query = urlencode([(k, unseal(v, self.fernet)) for k, v in query])
        body_spec = entry.get("body") or {}
        headers = dict(entry.get("headers") or {})
        body = b""
        if "form" in body_spec:
            body = urlencode(list(unseal(body_spec["form"], self.fernet).items())).encode()
        elif "json" in body_spec:
            body = json.dumps(unseal(body_spec["json"], self.fernet)).encode()
        elif "text" in body_spec:
            body = str(body_spec["text"]).encode()
        elif "base64" in body_spec:
            body = base64.b64decode(body_spec["base64"])
        return query, body, headers


# --- the data plane (written by another module; optional until it exists) ------------------------


class DataplaneLike(Protocol):
    def before_api_call(self, call: Any) -> None: ...
    def on_api_call(self, call: Any) -> None: ...
    def start_all(self) -> None: ...
    def stop_all(self) -> None: ...
    def endpoints(self) -> dict[str, Any]: ...


class _NoDataplane:
    """Stands in while `stackflow.localcloud.dataplane` does not exist: no databases, no apps."""

    def before_api_call(self, call: Any) -> None:
        return None

    def on_api_call(self, call: Any) -> None:
        return None

    def start_all(self) -> None:
        return None

    def stop_all(self) -> None:
        return None

    def endpoints(self) -> dict[str, Any]:
        return {"databases": {}, "load_balancers": {}}


@dataclass(frozen=True)
class _FallbackApiCall:
    service: str
    action: str
    params: Any
    response: bytes


def _dataplane_module() -> Any:
    try:
        return importlib.import_module("stackflow.localcloud.dataplane")
    except ModuleNotFoundError as exc:
        if exc.name != "stackflow.localcloud.dataplane":
            raise  # the module exists but something it imports does not: a real error
        return None


def load_dataplane(root: Path, endpoint: str, region: str) -> DataplaneLike:
    """The data plane for a cloud root (a no-op stand-in when its module is not there)."""
    module = _dataplane_module()
    if module is None:
        return _NoDataplane()
    plane: DataplaneLike = module.Dataplane(root, endpoint, region)
    return plane


def _api_call(service: str, action: str, params: Any, response: bytes) -> Any:
    module = _dataplane_module()
    factory = getattr(module, "ApiCall", None) if module is not None else None
    return (factory or _FallbackApiCall)(
        service=service, action=action, params=params, response=response
    )


class _HookWorker:
    """Runs the data plane's hooks one at a time, in the order they were submitted."""

    def __init__(self, dataplane: DataplaneLike) -> None:
        self.dataplane = dataplane
        self._queue: queue.Queue[tuple[Any, threading.Event]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, call: Any) -> threading.Event:
        done = threading.Event()
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dataplane-hooks", daemon=True
                )
                self._thread.start()
        self._queue.put((call, done))
        return done

    def _run(self) -> None:
        while True:
            call, done = self._queue.get()
            try:
                self.dataplane.on_api_call(call)
            except Exception:
                log.exception("the data plane's hook for %s %s failed", call.service, call.action)
            finally:
                done.set()


# --- the WSGI middleware -----------------------------------------------------------------------


@dataclass
class _Response:
    status: str = "500 INTERNAL SERVER ERROR"
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @property
    def code(self) -> int:
        return int(self.status.split(" ", 1)[0])


def aws_error(request: AwsRequest, code: str, message: str, status: int = 500) -> _Response:
    """An error answer in the request's protocol, as AWS shapes it (botocore reads the code and
    message from it)."""
    request_id = str(uuid.uuid4())
    reason = "INTERNAL SERVER ERROR" if status >= 500 else "BAD REQUEST"
    if request.protocol == "query":
        code_xml, message_xml = xml_escape(code), xml_escape(message)
        if request.service == "ec2":
            text = (
                f"<Response><Errors><Error><Code>{code_xml}</Code><Message>{message_xml}"
                f"</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>"
            )
        else:
            side = "Receiver" if status >= 500 else "Sender"
            text = (
                f"<ErrorResponse><Error><Type>{side}</Type><Code>{code_xml}</Code>"
                f"<Message>{message_xml}</Message></Error><RequestId>{request_id}</RequestId>"
                "</ErrorResponse>"
            )
        body, content_type = text.encode(), "text/xml"
    else:
        body = json.dumps({"__type": code, "message": message}).encode()
        content_type = "application/x-amz-json-1.1"
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("x-amzn-RequestId", request_id),
        ("x-amzn-ErrorType", code),
    ]
    return _Response(f"{status} {reason}", headers, body)


def _json_response(
    start_response: Callable[..., Any], payload: Any, status: str = "200 OK"
) -> list[bytes]:
    body = json.dumps(payload).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def _read_body(environ: dict[str, Any]) -> bytes:
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    length = environ.get("CONTENT_LENGTH")
    if length:
        data: bytes = stream.read(int(length))
    elif environ.get("wsgi.input_terminated"):
        data = stream.read()
    else:
        data = b""
    return data


def _headers_of(environ: Mapping[str, Any]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers[key[5:].replace("_", "-").title()] = str(value)
    if environ.get("CONTENT_TYPE"):
        headers["Content-Type"] = str(environ["CONTENT_TYPE"])
    return headers


class CloudApp:
    """moto's WSGI app behind the middleware described in the module docstring.

    Args:
        root: the cloud root (journal, knobs, passphrase, data plane).
        region: the default region.
        endpoint: the URL this server answers on (for the data plane's own calls).
        moto_app: moto's WSGI application (DomainDispatcherApplication).
        dataplane: the data plane (or its stand-in).
        knobs: the knob store.
    """

    def __init__(
        self,
        root: Path,
        region: str,
        endpoint: str,
        moto_app: Callable[..., Iterable[bytes]],
        dataplane: DataplaneLike,
        knobs: KnobStore,
    ) -> None:
        self.root = root
        self.region = region
        self.endpoint = endpoint
        self.moto_app = moto_app
        self.dataplane = dataplane
        self.knobs = knobs
        self.journal = Journal(journal_path(root), journal_key(root))
        self.ready = False
        self.stopping = False
        self.stop_requested = threading.Event()
        self.replayed = 0
        self.replay_failures = 0
        self.replay_s = 0.0
        self._lock = threading.Lock()  # every AWS request, one at a time: deterministic seeding
        self._hook_worker = _HookWorker(dataplane)

    # -- serving --

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith("/_stackflow/") or path == "/_stackflow":
            return self._control(environ, start_response)
        if self.stopping:
            return _json_response(
                start_response, {"error": "the local cloud is stopping"}, "503 SERVICE UNAVAILABLE"
            )
        if path.startswith("/moto-api") and environ.get("REQUEST_METHOD") not in _READ_METHODS:
            # moto's own reset/seed/state calls would bypass the journal and the seeding.
            return _json_response(
                start_response,
                {
                    "error": "the local cloud refuses moto's own state API (/moto-api/ "
                    "changes); its state is the journal: `python flows/run.py cloud stop`, then "
                    f"delete {journal_path(self.root)} to start empty"
                },
                "403 FORBIDDEN",
            )
        body = _read_body(environ)
        response, hook = self.handle(environ, body)
        if hook is not None:
            hook.wait()  # the answer comes once the data plane has followed (a database is up)
        start_response(response.status, response.headers)
        return [response.body]

    def handle(
        self,
        environ: dict[str, Any],
        body: bytes,
        *,
        replay: Mapping[str, Any] | None = None,
    ) -> tuple[_Response, Any]:
        """Serve one AWS request through moto.

        Args:
            environ: the WSGI environ (its input is replaced by `body`).
            body: the request body as received.
            replay: the journal entry being replayed (None: a live request).

        Returns:
            (moto's response, the event set when the data plane has followed, or None).
        """
        method = str(environ.get("REQUEST_METHOD", "GET"))
        path = str(environ.get("PATH_INFO", "/"))
        query = str(environ.get("QUERY_STRING", ""))
        headers = _headers_of(environ)
        plain = body
        if headers.get("Content-Encoding", "").lower() == "gzip" and body:
            with contextlib.suppress(OSError, EOFError):
                plain = gzip.decompress(body)
        request = parse_request(method, path, query, headers, plain)
        if replay is None and request.mutating:
            refusal = self._prepare(request)
            if refusal is not None:
                return refusal, None
        started = time.monotonic()
        hook: Any = None
        with self._lock:
            seq = self.journal.next_seq if replay is None else int(replay["seq"])
            at = (
                dt.datetime.now(dt.UTC)
                if replay is None
                else dt.datetime.fromisoformat(str(replay["at"]))
            )
            if request.mutating or replay is not None:
                seed_for(seq)
                _Clock.frozen = at
            try:
                environ["wsgi.input"] = io.BytesIO(body)
                environ["CONTENT_LENGTH"] = str(len(body))
                response = self._call_moto(environ)
            finally:
                _Clock.frozen = None
            ok = 200 <= response.code < 300
            if request.mutating and ok and replay is None:
                entry = self.journal.entry(seq, at, request, method, path, query, headers)
                self.journal.append(entry, plain)
                # Queued under the AWS lock: hooks run in journal order, but outside the lock
                # (a hook may call this server).
                hook = self._hook_worker.submit(
                    _api_call(request.service, request.action, request.params, response.body)
                )
            if replay is None:
                log.info(
                    "%s %s %s -> %d (%.0f ms)%s",
                    method,
                    request.service,
                    request.action,
                    response.code,
                    (time.monotonic() - started) * 1000,
                    f" journal #{seq}" if hook is not None else "",
                )
        return response, hook

    def _prepare(self, request: AwsRequest) -> _Response | None:
        """Let the data plane prepare what a request will need (a database's data folder) before
        moto makes the resource; its failure fails the request, so nothing is made half."""
        call = _api_call(request.service, request.action, request.params, b"")
        try:
            self.dataplane.before_api_call(call)
        except StackflowError as exc:
            reason = str(exc).splitlines()[0]
            log.warning("%s %s refused: %s", request.service, request.action, reason)
            return aws_error(
                request,
                "InternalFailure",
                f"the local cloud's data plane could not prepare {request.action}: {reason}",
            )
        return None

    def _call_moto(self, environ: dict[str, Any]) -> _Response:
        captured = _Response()

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Any:
            captured.status = status
            captured.headers = list(headers)
            return lambda data: None

        result = self.moto_app(environ, start_response)
        try:
            captured.body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return captured

    def warm(self) -> None:
        """`warm_backends` under the AWS lock (requests wait rather than race it)."""
        started = time.monotonic()
        with self._lock:
            try:
                warm_backends(self.region)
            except Exception:
                log.exception("warming moto's backends failed; they will be created on first use")
                return
        log.info("moto's backends ready in %.2fs", time.monotonic() - started)

    # -- replay --

    def replay(self) -> int:
        """Send every journal entry again, in order, with its seed and time; no journal writes,
        no data plane hooks. Returns how many entries were replayed."""
        from werkzeug.test import EnvironBuilder

        started = time.monotonic()
        entries = self.journal.entries()
        for entry in entries:
            query, body, headers = self.journal.request_of(entry)
            builder = EnvironBuilder(
                path=str(entry.get("path") or "/"),
                method=str(entry.get("method") or "POST"),
                query_string=query,
                headers=[(k, v) for k, v in headers.items() if k != "Content-Type"],
                data=body,
                content_type=headers.get("Content-Type"),
                base_url=self.endpoint,
            )
            try:
                environ = builder.get_environ()
            finally:
                builder.close()
            if "Host" in headers:
                environ["HTTP_HOST"] = headers["Host"]
            response, _ = self.handle(environ, body, replay=entry)
            if not 200 <= response.code < 300:
                self.replay_failures += 1
                log.warning(
                    "journal entry #%s (%s %s) answered %s on replay: %s",
                    entry.get("seq"),
                    entry.get("service"),
                    entry.get("action"),
                    response.status,
                    response.body[:300].decode(errors="replace"),
                )
        self.replayed = len(entries)
        self.replay_s = time.monotonic() - started
        return self.replayed

    # -- the control API --

    def health(self) -> dict[str, Any]:
        return {
            "ok": self.ready,
            "pid": os.getpid(),
            "root": str(self.root),
            "region": self.region,
            "journal_entries": self.journal.next_seq,
            "replayed": self.replayed,
            "replay_failures": self.replay_failures,
            "replay_s": round(self.replay_s, 3),
        }

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        from stackflow.localcloud.knobs import KnobCall, KnobsError, KnobSpec

        method = str(environ.get("REQUEST_METHOD", "GET"))
        route = str(environ.get("PATH_INFO", "")).removeprefix("/_stackflow").strip("/")
        try:
            raw = _read_body(environ)
            payload = json.loads(raw) if raw.strip() else None
        except ValueError:
            return _json_response(
                start_response, {"error": "the body is not JSON"}, "400 BAD REQUEST"
            )
        try:
            if route == "health" and method == "GET":
                status = "200 OK" if self.ready else "503 SERVICE UNAVAILABLE"
                return _json_response(start_response, self.health(), status)
            if route == "knobs" and method == "GET":
                return _json_response(start_response, self.knobs.get().dump())
            if route == "knobs" and method == "POST":
                spec = self.knobs.replace(KnobSpec.parse(payload))
                return _json_response(start_response, spec.dump())
            if route == "knobs/clear" and method == "POST":
                return _json_response(start_response, self.knobs.clear().dump())
            if route == "knobs/take" and method == "POST":
                body = payload if isinstance(payload, dict) else {}
                call = KnobCall(
                    node=str(body.get("node") or ""),
                    environment=str(body.get("environment") or ""),
                    type=str(body.get("type") or ""),
                    operation=str(body.get("operation") or ""),
                )
                return _json_response(start_response, self.knobs.take(call))
            if route == "dataplane" and method == "GET":
                return _json_response(start_response, self.dataplane.endpoints())
            if route == "shutdown" and method == "POST":
                self.stopping = True
                if not (isinstance(payload, dict) and payload.get("dataplane") is False):
                    self.dataplane.stop_all()
                self.stop_requested.set()
                return _json_response(start_response, {"ok": True, "pid": os.getpid()})
        except KnobsError as exc:
            return _json_response(start_response, {"error": str(exc)}, "400 BAD REQUEST")
        except Exception as exc:
            log.exception("control call %s %s failed", method, route)
            return _json_response(
                start_response,
                {"error": f"{type(exc).__name__}: {exc}"},
                "500 INTERNAL SERVER ERROR",
            )
        return _json_response(
            start_response,
            {
                "error": f"no control endpoint {method} /_stackflow/{route}; served: GET health, "
                "GET|POST knobs, POST knobs/clear, POST knobs/take, GET dataplane, POST shutdown"
            },
            "404 NOT FOUND",
        )


# --- the server process ---------------------------------------------------------------------------


def _write_record(root: Path, record: Mapping[str, Any]) -> None:
    path = server_record(root)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(json.dumps(record))
    os.replace(staging, path)


def _moto_environment(region: str, port: int) -> None:
    """What moto (and botocore inside it) must see in this process: never the user's AWS setup."""
    os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"  # AmazonECSTaskExecutionRolePolicy
    os.environ.pop("MOTO_ENABLE_RECORDING", None)  # any value turns it on; our journal records
    os.environ["MOTO_RECORDER_FILEPATH"] = os.devnull  # were it turned on: bodies hold passwords
    os.environ["MOTO_PORT"] = str(port)
    os.environ["AWS_DEFAULT_REGION"] = region
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull


def serve(root: Path, port: int, region: str, *, dataplane: bool = True) -> int:
    """Run the cloud server in this process until SIGTERM/SIGINT or `POST /_stackflow/shutdown`.

    Returns:
        The exit code.
    """
    from werkzeug.serving import make_server

    from stackflow.localcloud.knobs import KnobStore

    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    passphrase(root)
    _moto_environment(region, port)
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )

    class QuietHandler(MotoRequestHandler):
        # werkzeug's access log prints query strings; the middleware logs each call instead.
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return None

    install_determinism()
    url = f"http://127.0.0.1:{port}"
    app = CloudApp(
        root,
        region,
        url,
        DomainDispatcherApplication(create_backend_app),
        load_dataplane(root, url, region) if dataplane else _NoDataplane(),
        KnobStore(knobs_path(root)),
    )
    app.replay()
    log.info(
        "replayed %d journal entries in %.2fs (%d failed)",
        app.replayed,
        app.replay_s,
        app.replay_failures,
    )
    httpd = make_server("127.0.0.1", port, app, threaded=True, request_handler=QuietHandler)
    serving = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="cloud-http", daemon=True
    )
    serving.start()
    threading.Thread(target=app.warm, name="cloud-warm", daemon=True).start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: app.stop_requested.set())
    try:
        app.dataplane.start_all()  # after serving starts: the data plane may call the API
        record = {
            "pid": os.getpid(),
            "port": port,
            "url": url,
            "root": str(root),
            "region": region,
            "dataplane": dataplane,
        }
        _write_record(root, record)
        app.ready = True
        log.info("local cloud serving on %s (ready in %.2fs)", url, time.monotonic() - started)
        while not app.stop_requested.wait(1.0):
            pass
    finally:
        app.stopping = True
        httpd.shutdown()
        with contextlib.suppress(OSError, ValueError):
            if json.loads(server_record(root).read_text()).get("pid") == os.getpid():
                server_record(root).unlink()
        log.info("local cloud on %s stopped", url)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {_MODULE}",
        description="The local cloud's server (moto on loopback, persistent); not AWS.",
    )
    parser.add_argument("--root", type=Path, required=True, help="the cloud root folder")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port on 127.0.0.1")
    parser.add_argument("--region", default=DEFAULT_REGION, help="default AWS region")
    parser.add_argument(
        "--no-dataplane",
        dest="dataplane",
        action="store_false",
        help="serve the AWS APIs only: no databases, no app stand-ins",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    code = serve(args.root.resolve(), args.port, args.region, dataplane=args.dataplane)
    logging.shutdown()
    # Nothing is left to flush (the journal and knobs are written per change); skipping the
    # interpreter's teardown of moto's thousands of objects makes `cloud stop` a second faster.
    os._exit(code)


# --- managing the server from other processes -----------------------------------------------------


def _is_cloud_server(pid: int, root: Path) -> bool:
    """Whether pid is alive and is this root's cloud server (a recorded pid may have been reused)."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the pid
    return _MODULE.encode() in cmdline and str(root).encode() in cmdline


def _health(url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"{url}/_stackflow/health", timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as exc:
        with contextlib.suppress(ValueError):
            body: dict[str, Any] = json.loads(exc.read())
            return body
        return None
    except (OSError, ValueError):
        return None


def _port_freed(port: int, wait_s: float = 5.0) -> bool:
    """Whether the port is free, waiting a little: a server that just exited shows as a zombie
    while its other threads still close the listening socket."""
    deadline = time.monotonic() + wait_s
    while not port_free(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _read_record(root: Path) -> CloudServer | None:
    try:
        info = json.loads(server_record(root).read_text())
        return CloudServer(
            url=str(info["url"]),
            pid=int(info["pid"]),
            root=Path(info["root"]),
            port=int(info["port"]),
            region=str(info.get("region") or DEFAULT_REGION),
            dataplane=bool(info.get("dataplane", True)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cloud_status(root: Path) -> CloudServer | None:
    """The state folder's local cloud server if its process is alive, else None."""
    root = root.resolve()
    server = _read_record(root)
    if server is None or not _is_cloud_server(server.pid, root):
        return None
    return server


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _terminate(pid: int, timeout: float = _STOP_TIMEOUT_S) -> None:
    """SIGTERM the server's process group; SIGKILL after `timeout`."""
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            _signal_group(pid, signal.SIGKILL)
            time.sleep(0.2)
            pid_alive(pid)  # reap
            return
        time.sleep(0.05)


def _start(root: Path, port: int, region: str, dataplane: bool) -> CloudServer:
    log_file = server_log(root)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(_PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
        "MOTO_IAM_LOAD_MANAGED_POLICIES": "true",
        "PYTHONUNBUFFERED": "1",
        # Fixed string hashing: set iteration order inside moto is the same in every server
        # process, so a replay draws its random ids in the same order as the original run.
        "PYTHONHASHSEED": "0",
    }
    with log_file.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                _MODULE,
                "--root",
                str(root),
                "--port",
                str(port),
                "--region",
                region,
                *([] if dataplane else ["--no-dataplane"]),
            ],
            cwd=root,  # a stray relative path (a library's own file) lands in the root, not here
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process: later runs reuse it
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise CloudServerError(
                f"the local cloud server exited at start (exit {process.returncode}); "
                f"{log_file}:\n{log_tail(log_file, 3000)}"
            )
        answer = _health(url)
        if answer and answer.get("ok") and answer.get("pid") == process.pid:
            return CloudServer(url, process.pid, root, port, region, dataplane)
        if time.monotonic() > deadline:
            _terminate(process.pid)
            raise CloudServerError(
                f"the local cloud server did not answer on {url} within {_START_TIMEOUT_S:g}s; "
                f"{log_file}:\n{log_tail(log_file, 3000)}"
            )
        time.sleep(0.1)


def ensure_cloud(
    root: Path,
    port: int = DEFAULT_PORT,
    *,
    region: str = DEFAULT_REGION,
    dataplane: bool = True,
    say: Callable[[str], object] = print,
) -> CloudServer:
    """Make sure the local cloud's server runs on 127.0.0.1:port; start it if not.

    Reuses a healthy server of the same folder on the same port with the same data plane choice
    (whatever its default region: it answers for every region). A server of the folder on another
    port, or one that does not answer, is stopped first (one journal, one server). Concurrent callers take turns on a lock
    in the cloud root, so they all end up with the same server.

    Args:
        root: the local cloud's folder (the `localcloud_root` of settings).
        port: TCP port on 127.0.0.1 (the `localcloud.port` setting).
        region: the server's default region.
        dataplane: run the data plane (databases, app stand-ins); False for tests of moto alone.
        say: receives one-line progress messages.

    Raises:
        CloudServerError: the port is taken by another program, or the server exits or does not
            answer at start (with the tail of its log).
    """
    root = root.resolve()
    with folder_lock(root, ".server.lock"):
        passphrase(root)  # generated here, once, before any process needs it
        server = cloud_status(root)
        if server is not None:
            healthy = _health(server.url)
            if (
                server.port == port
                and server.dataplane == dataplane
                and healthy
                and healthy.get("ok")
            ):
                return server
            if server.port != port:
                reason = f"moving it to port {port}"
            elif server.dataplane != dataplane:
                reason = f"restarting it with the data plane {'on' if dataplane else 'off'}"
            else:
                reason = "it does not answer"
            say(f"stopping the local cloud server on {server.url} (pid {server.pid}): {reason}")
            _terminate(server.pid)
            server_record(root).unlink(missing_ok=True)
        if not _port_freed(port):
            other = _health(f"http://127.0.0.1:{port}")
            if other and other.get("root"):
                raise CloudServerError(
                    f"port {port} on 127.0.0.1 is used by the local cloud of {other['root']}; "
                    "stop that one (`python flows/run.py cloud stop` with its state folder) or set "
                    "this one's port (STACKFLOW_LOCALCLOUD_PORT) to a free one"
                )
            raise CloudServerError(
                f"port {port} on 127.0.0.1 is in use by another program; set the local cloud's "
                "port (STACKFLOW_LOCALCLOUD_PORT) to a free one"
            )
        say(f"starting the local cloud (moto on 127.0.0.1:{port}; files in {root})")
        started = time.monotonic()
        server = _start(root, port, region, dataplane)
        answer = _health(server.url) or {}
        say(
            f"local cloud ready on {server.url} in {time.monotonic() - started:.1f}s "
            f"({answer.get('replayed', 0)} journal entries replayed)"
        )
        return server


def stop_cloud(root: Path) -> bool:
    """Stop the local cloud's server and its data plane (databases, app stand-ins).

    The server is asked to stop its data plane and exit; if it does not answer it is terminated.
    With no server running, the data plane's leftovers (databases that outlived a crashed
    server) are stopped all the same.

    Returns:
        True if a running server was stopped.
    """
    root = root.resolve()
    if not root.is_dir():
        return False
    with folder_lock(root, ".server.lock"):
        server = cloud_status(root)
        if server is None:
            record = _read_record(root)
            url = record.url if record else f"http://127.0.0.1:{DEFAULT_PORT}"
            region = record.region if record else DEFAULT_REGION
            if (root / "dataplane").is_dir():
                try:
                    load_dataplane(root, url, region).stop_all()
                except Exception as exc:  # best effort: nothing is running that we know of
                    log.warning("stopping the local cloud's data plane failed: %s", exc)
            server_record(root).unlink(missing_ok=True)
            return False
        request = urllib.request.Request(
            f"{server.url}/_stackflow/shutdown",
            data=b"{}",
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with contextlib.suppress(OSError):
            urllib.request.urlopen(request, timeout=_STOP_TIMEOUT_S).close()
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        while pid_alive(server.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(server.pid):
            _terminate(server.pid)
        server_record(root).unlink(missing_ok=True)
        return True


if __name__ == "__main__":
    sys.exit(main())
