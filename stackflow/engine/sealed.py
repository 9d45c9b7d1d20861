"""A stack's outputs read from its checkpoint, with no `pulumi` process: plain ones as the
checkpoint stores them, secret ones opened from the seal stackflow's `up` records beside them (see
`engine.automation.program.stamp_output`); and whether the checkpoint's outputs are still those the
stamp vouches for.

The skip path reads them so (an unchanged stack hands on its outputs), and so does the engine after
an update (the Automation API would start `pulumi stack output` twice for them)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
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
        found = _opened_seal(outputs, passphrase, fingerprint)
        if found is None or any(k not in found for k in secret):
            return None
        plain = (k for k in outputs if k not in secret and k != INTERNAL_OUTPUT)
        if any(k in found and found[k] != outputs[k] for k in plain):
            return None  # the seal is not of these outputs
        opened = found
    return {
        k: OutputValue(opened[k], secret=True) if k in secret else OutputValue(v)
        for k, v in outputs.items()
    }


def vouched_outputs(
    outputs: Mapping[str, Any], passphrase: str | None, fingerprint: str
) -> tuple[str, dict[str, OutputValue] | None]:
    """Whether the checkpoint's outputs are every one, and only, those the update stamped with
    `fingerprint` recorded, and then their values.

    With a passphrase the stamp carries a seal of every output's value (a key from the
    passphrase: nobody without it can seal other values), opened and compared whole; under a KMS
    secrets provider, which leaves no passphrase to key one, a digest of the plain outputs and the
    secret outputs' names.

    Returns:
        (why not, None) when they are not (an output added, removed or edited since, a seal this
        passphrase does not open, no seal or digest at all); ("", outputs) when they are; ("",
        None) when they are but a secret output is the engine's to read (a digest vouches for
        no secret's value).
    """
    stamp = outputs.get(INTERNAL_OUTPUT)
    if not isinstance(stamp, Mapping):
        return "its last update was not stackflow's (no stamp in its state)", None
    own = {k: v for k, v in outputs.items() if k != INTERNAL_OUTPUT and v is not None}
    secret = sorted(k for k, v in own.items() if is_secret(v))
    if "sealed" in stamp:
        sealed = _opened_seal(outputs, passphrase, fingerprint)
        if sealed is None:
            return (
                "its outputs' seal does not open with this state passphrase (the stack was "
                "stamped under another one, or the seal was changed)",
                None,
            )
        sealed = {k: v for k, v in sealed.items() if v is not None}
        if set(sealed) != set(own):
            return _edited(set(own) ^ set(sealed)), None
        plain = sorted(k for k in own if k not in secret and _canonical(own[k]) != sealed[k])
        if plain:
            return _edited(plain), None
        return "", {
            **{k: OutputValue(sealed[k], secret=k in secret) for k in own},
            INTERNAL_OUTPUT: OutputValue(stamp),
        }
    digest = stamp.get("digest")
    if not isinstance(digest, str):
        if own:
            return "its stamp vouches for none of its outputs (no seal, no digest)", None
        return "", {INTERNAL_OUTPUT: OutputValue(stamp)}
    plain_values = {k: v for k, v in own.items() if k not in secret}
    if outputs_digest(plain_values, secret) != digest:
        return _edited(sorted(own)), None
    if secret:
        return "", None
    return "", {**{k: OutputValue(v) for k, v in own.items()}, INTERNAL_OUTPUT: OutputValue(stamp)}


def outputs_digest(plain: Mapping[str, Any], secret: Iterable[str]) -> str:
    """sha256 over the plain outputs' values and the secret outputs' names: what a stamp records
    when no passphrase keys a seal. A secret's value never enters it (a digest of a short secret
    could be guessed back)."""
    body = {
        "plain": {k: _canonical(v) for k, v in plain.items() if v is not None},
        "secret": sorted(secret),
    }
    data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode()).hexdigest()


def _canonical(value: Any) -> Any:
    """A value as a checkpoint round-trips it: numbers are float64 there, so 3306.0 is 3306."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def _edited(names: Iterable[str]) -> str:
    shown = ", ".join(sorted(names)[:5]) or "its outputs"
    return (
        f"its outputs in the backend ({shown}) differ from those its last up recorded: changed "
        "after that update, so they are not trusted"
    )


def _opened_seal(
    outputs: Mapping[str, Any], passphrase: str | None, fingerprint: str | None
) -> Mapping[str, Any] | None:
    """The values the stamp's seal holds (None: no seal, no passphrase or another one, a seal of
    another stamp)."""
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
    if not isinstance(opened, Mapping):
        return None
    return {str(k): _canonical(v) for k, v in opened.items()}
