"""When a stack's `up` may be skipped: its inputs' fingerprint matches what the stack's latest
checkpoint recorded, read straight from the backend.

A fingerprint covers the program's source files, its arguments (settings and upstream outputs),
its config, the engine and the tool versions, and the policy packs its previews and updates run
(their files and settings: a new rule reaches a stack that would be skipped). Each `up` records it in the stack's checkpoint (the
`_stackflow` output, written by the same update; see `engine.automation.program.stamp_output`)
with the outputs' values sealed under the state passphrase (a digest of them under a KMS provider).
So the decision needs one read of the checkpoint, no `pulumi` process and nothing from this
machine's folder: a second worker decides the same; a lost, changed, locked or half-finished
checkpoint, one another tool wrote, or outputs edited under an intact stamp never pass for
"unchanged".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stackflow import __version__
from stackflow.engine.base import INTERNAL_OUTPUT, OutputValue, StackSpec, StackState
from stackflow.engine.sealed import vouched_outputs


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
    h.update(
        json.dumps(
            {"engine": engine, "stackflow": __version__, **dict(versions)}, sort_keys=True
        ).encode()
    )
    h.update(f"{spec.pulumi_project}/{spec.environment}".encode())
    if spec.policies is not None:
        h.update(f"policies {spec.policies.digest}".encode())
    return h.hexdigest()


def stamp(fingerprint: str | Future[str]) -> dict[str, Any]:
    """What an `up` records for stackflow in the stack's checkpoint (the seal is added there).
    A future: the fingerprint of inputs that arrive while the update runs (`tasks.early`)."""
    return {"fingerprint": fingerprint, "stackflow": __version__}


def why_not_unchanged(state: StackState | None, fingerprint: str) -> str:
    """Why the checkpoint's stamp does not match `fingerprint` ("" when it does). It reads no
    seal: `judge` also checks that the outputs are those the stamp vouches for."""
    if state is None:
        return "no state in the backend (never deployed, or its state was lost)"
    if state.locked:
        return "another update holds its lock"
    if state.pending:
        return f"an interrupted update left {state.pending} pending operation(s)"
    recorded = state.stamp
    if recorded is None:
        return "its last update was not stackflow's (no stamp in its state)"
    if recorded.get("stackflow") != __version__:
        return (
            f"its last update was made by stackflow {recorded.get('stackflow')}, not {__version__}"
        )
    if recorded.get("fingerprint") != fingerprint:
        return "its inputs changed since its last successful up"
    return ""


@dataclass(frozen=True)
class Judged:
    """Whether a stack's checkpoint proves its `up` would change nothing.

    Attributes:
        why: why it does not ("" when it does).
        outputs: its outputs when it does (stackflow's stamp left out); None when it does but a
            secret output is the engine's to read (a KMS provider: no seal to open it from).
    """

    why: str
    outputs: dict[str, OutputValue] | None = None


def judge(state: StackState | None, fingerprint: str, passphrase: str | None) -> Judged:
    """Whether the stack is unchanged: its stamp matches `fingerprint` (see `why_not_unchanged`)
    and its outputs are every one, and only, those the stamp's seal holds (a digest of them under
    a KMS provider), so an output edited in the backend is never handed on as "unchanged"."""
    why = why_not_unchanged(state, fingerprint)
    if why or state is None:
        return Judged(why or "no state in the backend")
    why, opened = vouched_outputs(state.outputs, passphrase, fingerprint)
    if why:
        return Judged(why)
    if opened is None:
        return Judged("")
    return Judged("", {k: v for k, v in opened.items() if k != INTERNAL_OUTPUT})
