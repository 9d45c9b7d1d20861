"""A stack's outputs read from its checkpoint, with no `pulumi` process: plain ones as the
checkpoint stores them, secret ones opened from the seal stackflow's `up` records beside them (see
`engine.automation.program.stamp_output`).

The skip path reads them so (an unchanged stack hands on its outputs), and so does the engine after
an update (the Automation API would start `pulumi stack output` twice for them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackflow.engine.base import INTERNAL_OUTPUT, OutputValue
from stackflow.engine.envelope import is_secret
from stackflow.secretbox import StampSeal


def open_outputs(
    outputs: Mapping[str, Any], passphrase: str | None, fingerprint: str | None = None
) -> dict[str, OutputValue] | None:
    """Every output of a checkpoint (stackflow's own `_stackflow` included) as a value that knows
    whether it is secret: what `pulumi stack output --json --show-secrets` would say.

    Args:
        outputs: the root stack resource's outputs as the checkpoint stores them.
        passphrase: the state passphrase (it keys the seal).
        fingerprint: the stamp the seal must belong to; None: the one the checkpoint recorded.

    Returns None when a secret output cannot be opened (no seal, no passphrase or another one, an
    update that was not stackflow's, a seal of another stamp), or when the seal disagrees with a
    plain output: the CLI answers then.
    """
    secret = [k for k, v in outputs.items() if is_secret(v)]
    opened: Mapping[str, Any] = {}
    if secret:
        stamp = outputs.get(INTERNAL_OUTPUT)
        if not passphrase or not isinstance(stamp, Mapping) or "sealed" not in stamp:
            return None
        recorded = stamp.get("fingerprint")
        if not isinstance(recorded, str) or (fingerprint is not None and recorded != fingerprint):
            return None
        try:
            opened = StampSeal(passphrase, recorded).open(str(stamp["sealed"]))
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(opened, Mapping) or any(k not in opened for k in secret):
            return None
        plain = (k for k in outputs if k not in secret and k != INTERNAL_OUTPUT)
        if any(k in opened and opened[k] != outputs[k] for k in plain):
            return None  # the seal is not of these outputs
    return {
        k: OutputValue(opened[k], secret=True) if k in secret else OutputValue(v)
        for k, v in outputs.items()
    }
