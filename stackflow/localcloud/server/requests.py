"""What an AWS request is: its service, action, protocol and parameters, and whether it changes
anything (the journal keeps only the requests that do)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

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
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
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
            return self.action.split(" ", 1)[0] not in READ_METHODS
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
