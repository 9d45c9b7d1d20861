"""The journal: every successful mutating AWS request, in order, secrets sealed; replayed at start."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from stackflow.localcloud.server import framed
from stackflow.localcloud.server.requests import JOURNAL_HEADERS, AwsRequest
from stackflow.localcloud.server.sealing import is_secret_field, seal, unseal

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

log = logging.getLogger("stackflow.localcloud")


class Journal:
    """`journal.jsonl`: one checksummed JSON line per successful mutating request, secrets
    sealed, flushed to disk before the request is answered (see framed.py)."""

    def __init__(self, path: Path, fernet: Fernet) -> None:
        self.path = path
        self.fernet = fernet
        self.next_seq = 0

    def entries(self) -> list[dict[str, Any]]:
        """Every entry, in order, after cutting off a torn last line (a crash mid-write); sets
        the next sequence number. Call it once, at start, before any append.

        Raises:
            JournalError: a line is damaged (names the file and the line).
        """
        framed.repair(self.path)
        found = framed.read(self.path)
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
        """Write an entry (with the raw body of a REST request we could not parse).

        Raises:
            JournalError: it could not be written; the journal is as it was.
        """
        if entry["body"] is None and raw_body:
            # REST bodies we cannot parse are kept as they came (no known secret fields inside).
            try:
                entry["body"] = {"text": raw_body.decode("utf-8")}
            except UnicodeDecodeError:
                entry["body"] = {"base64": base64.b64encode(raw_body).decode()}
        framed.append(self.path, entry)
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
