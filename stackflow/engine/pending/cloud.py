"""Where pending creates are looked up: boto3 clients against the cloud the engine deploys to (the
local cloud's server on loopback, or AWS with this machine's profile), and what a lookup that
could not ask means."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackflow.engine.pending.model import Candidate, Lookup, Props, text
from stackflow.errors import StackflowError

# Codes after which the same question may get an answer (AWS's throttling and its own faults).
_TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "ServiceUnavailable",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
    }
)


class LookupFailed(StackflowError):
    """The cloud did not answer a lookup of a pending create; nothing was imported or cleared."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass
class CloudClients:
    """boto3 clients for one cloud and region.

    Attributes:
        region: the region the stack deploys to.
        endpoint: the local cloud's URL (its fixed test credentials, never the user's); None: AWS,
            with `profile` (or the environment's credentials).
        where: how reports name it ("the local cloud", "AWS").
    """

    region: str
    endpoint: str | None = None
    profile: str | None = None
    where: str = "AWS"
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def client(self, service: str) -> Any:
        """A boto3 client for `service` (ec2, rds, iam, ...)."""
        with self._lock:
            found = self._clients.get(service)
            if found is None:
                import boto3
                from botocore.config import Config

                config = Config(retries={"total_max_attempts": 3, "mode": "standard"})
                if self.endpoint is not None:
                    from stackflow.localcloud.context import LOCAL_ACCESS_KEY, LOCAL_SECRET_KEY

                    found = boto3.session.Session().client(
                        service,
                        region_name=self.region,
                        endpoint_url=self.endpoint,
                        aws_access_key_id=LOCAL_ACCESS_KEY,
                        aws_secret_access_key=LOCAL_SECRET_KEY,
                        config=config,
                    )
                else:
                    session = boto3.session.Session(
                        profile_name=self.profile, region_name=self.region
                    )
                    found = session.client(service, config=config)
                self._clients[service] = found
            return found


def code_of(exc: BaseException) -> str:
    """AWS's error code of a botocore ClientError ("" for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return ""
    return str((response.get("Error") or {}).get("Code", ""))


def absent(exc: BaseException, codes: Sequence[str]) -> bool:
    """Whether `exc` is AWS saying the thing asked for does not exist (one of `codes`)."""
    return code_of(exc) in codes


def failure(exc: BaseException, what: str, where: str) -> LookupFailed:
    """A lookup's error as LookupFailed: transient for throttling, AWS's own faults and a cloud
    that did not answer; permanent otherwise (credentials, permissions)."""
    from botocore.exceptions import ConnectionError as NoAnswer
    from botocore.exceptions import HTTPClientError

    code = code_of(exc)
    transient = code in _TRANSIENT_CODES or isinstance(exc, NoAnswer | HTTPClientError)
    said = f"{code}: {exc}" if code else str(exc)
    return LookupFailed(f"looking up {what} in {where} failed ({said})", transient=transient)


def answer(call: Callable[[], Any], *gone: str) -> Any | None:
    """`call()`'s answer, or None when AWS says (with one of the `gone` codes) there is no such
    thing."""
    from botocore.exceptions import ClientError

    try:
        return call()
    except ClientError as exc:
        if absent(exc, gone):
            return None
        raise


def by_name(
    service: str,
    call: str,
    param: str,
    answers: str,
    ident: str,
    *,
    given: str = "name",
    gone: Sequence[str] = (),
    listed: bool = False,
    alive: Callable[[Mapping[str, Any]], bool] = lambda _item: True,
) -> Lookup:
    """The lookup of a type with a physical name: `<service>.<call>(<param>=inputs[given])` (the
    name in a list when `listed`), the items under `answers` ("" for the answer itself, a single
    item when it is a mapping) that are `alive`, each item's `ident` as the id; AWS's `gone`
    codes mean there is none."""

    def lookup(clients: CloudClients, inputs: Props) -> list[Candidate]:
        name = text(inputs, given)
        if name is None:
            return []
        client = clients.client(service)
        found = answer(lambda: getattr(client, call)(**{param: [name] if listed else name}), *gone)
        items = (found or {}).get(answers) if answers else found
        items = [items] if isinstance(items, Mapping) else list(items or [])
        return [Candidate(str(item[ident])) for item in items if alive(item)]

    return lookup
