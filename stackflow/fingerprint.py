"""Fingerprints of the last successful `up` per stack, so unchanged stacks are skipped.

A fingerprint covers the program's source files, its arguments (settings and upstream outputs),
its config, the engine and the tool versions. The record also keeps the outputs (secret ones sealed
with the state passphrase), so a skipped stack hands its outputs downstream without an engine call.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stackflow.engine.base import OutputValue, StackSpec
from stackflow.secretbox import SecretBox


def compute(
    spec: StackSpec,
    args: BaseModel,
    sources: Iterable[Path],
    engine: str,
    versions: Mapping[str, str],
) -> str:
    """A sha256 over everything that decides what `up` would do."""
    h = hashlib.sha256()
    for path in sorted(sources):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(args.model_dump_json().encode())
    h.update(json.dumps({k: (v.value, v.secret) for k, v in sorted(spec.config.items())}).encode())
    h.update(json.dumps({"engine": engine, **dict(versions)}, sort_keys=True).encode())
    h.update(f"{spec.pulumi_project}/{spec.environment}".encode())
    return h.hexdigest()


class FingerprintStore:
    """Records under <state>/fingerprints/[<cloud>/]<project>/<environment>.json."""

    def __init__(self, state_dir: Path, passphrase: str | None, scope: str = "") -> None:
        self.root = state_dir / "fingerprints" / scope if scope else state_dir / "fingerprints"
        self.passphrase = passphrase

    def _path(self, spec: StackSpec) -> Path:
        return self.root / spec.pulumi_project / f"{spec.environment}.json"

    def load(self, spec: StackSpec, fingerprint: str) -> dict[str, OutputValue] | None:
        """The stored outputs if the stored fingerprint matches, else None."""
        path = self._path(spec)
        if not path.exists():
            return None
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError:
            return None  # a damaged record only costs a real `up`
        if record.get("fingerprint") != fingerprint:
            return None
        outputs: dict[str, OutputValue] = {}
        for key, item in record.get("outputs", {}).items():
            if not item.get("secret"):
                outputs[key] = OutputValue(item["value"])
            elif self.passphrase is None or "ciphertext" not in item:
                return None  # cannot reproduce a secret output: let the engine answer
            else:
                try:
                    box = SecretBox.from_salt(self.passphrase, record["salt"])
                    outputs[key] = OutputValue(box.open(item["ciphertext"]), secret=True)
                except (ValueError, KeyError):
                    return None
        return outputs

    def save(self, spec: StackSpec, fingerprint: str, outputs: Mapping[str, OutputValue]) -> None:
        salt = SecretBox.new_salt()
        box = SecretBox.from_salt(self.passphrase, salt) if self.passphrase else None
        stored: dict[str, Any] = {}
        for key, out in outputs.items():
            if not out.secret:
                stored[key] = {"secret": False, "value": out.value}
            elif box is not None:
                stored[key] = {"secret": True, "ciphertext": box.seal(out.value)}
            else:
                stored[key] = {"secret": True}
        path = self._path(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        record = {"fingerprint": fingerprint, "saved": time.time(), "salt": salt, "outputs": stored}
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(path)

    def forget(self, spec: StackSpec) -> None:
        self._path(spec).unlink(missing_ok=True)

    def _drift_path(self, spec: StackSpec) -> Path:
        return self.root / spec.pulumi_project / f"{spec.environment}.drifted"

    def mark_drifted(self, spec: StackSpec) -> None:
        """The cloud differs from the stack's state: never skip it, refresh it before its next up."""
        self.forget(spec)
        path = self._drift_path(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"found": time.time()}))

    def drifted(self, spec: StackSpec) -> bool:
        return self._drift_path(spec).exists()

    def clear_drift(self, spec: StackSpec) -> None:
        self._drift_path(spec).unlink(missing_ok=True)
