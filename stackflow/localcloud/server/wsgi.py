"""WSGI plumbing of the cloud server: bodies and headers in, JSON and AWS-shaped errors out."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape as xml_escape

from stackflow.localcloud.server.requests import AwsRequest


@dataclass
class Response:
    """A whole WSGI answer (moto's, captured, or one of ours)."""

    status: str = "500 INTERNAL SERVER ERROR"
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @property
    def code(self) -> int:
        return int(self.status.split(" ", 1)[0])


def aws_error(request: AwsRequest, code: str, message: str, status: int = 500) -> Response:
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
    return Response(f"{status} {reason}", headers, body)


def json_response(
    start_response: Callable[..., Any], payload: Any, status: str = "200 OK"
) -> list[bytes]:
    """Answer `payload` as JSON."""
    body = json.dumps(payload).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def read_body(environ: dict[str, Any]) -> bytes:
    """The request's body (empty when it has none)."""
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


def headers_of(environ: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers, named as sent (Title-Case)."""
    headers: dict[str, str] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers[key[5:].replace("_", "-").title()] = str(value)
    if environ.get("CONTENT_TYPE"):
        headers["Content-Type"] = str(environ["CONTENT_TYPE"])
    return headers


def call_app(app: Callable[..., Any], environ: dict[str, Any]) -> Response:
    """Call a WSGI app (moto's) and capture its whole answer."""
    captured = Response()

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        captured.status = status
        captured.headers = list(headers)
        return lambda data: None

    result = app(environ, start_response)
    try:
        captured.body = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return captured
