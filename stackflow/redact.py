"""Masks secret values in any text before it is logged, shown or stored."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

MASK = "[secret]"
# Shorter values would mask ordinary words and numbers; Pulumi's own secrets are longer.
MIN_SECRET_LENGTH = 4


class Redactor:
    """Knows a set of secret values and replaces each occurrence, even inside longer text.

    Thread-safe: stacks run concurrently and may learn new secrets (a generated password) mid-run.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(*secrets)

    def add(self, *secrets: str) -> None:
        """Learn more secret values; empty and very short values are ignored."""
        with self._lock:
            fresh = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH} - self._secrets
            if not fresh:
                return
            self._secrets |= fresh
            # Longest first, so a secret that contains another is masked whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def __call__(self, text: str) -> str:
        """Return `text` with every known secret replaced by [secret]."""
        pattern = self._pattern
        return text if pattern is None else pattern.sub(MASK, text)

    def __len__(self) -> int:
        return len(self._secrets)
