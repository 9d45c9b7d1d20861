"""The journal: every successful mutating AWS request, in order, secrets sealed; replayed at start."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from stackflow.localcloud.server.requests import JOURNAL_HEADERS, AwsRequest
from stackflow.localcloud.server.sealing import is_secret_field, seal, unseal

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

log = logging.getLogger("stackflow.localcloud")


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
