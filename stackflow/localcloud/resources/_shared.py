"""Helpers every service module of the local cloud's aws provider uses: AWS's refusals, inputs a
type does not serve, and how tags, JSON documents and nested blocks read back so that an untouched
resource reads exactly as it was created (no drift from reformatting or reordering), and AWS's
dates as pulumi-aws reports them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from stackflow.localcloud.registry import Props

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext


def error_code(exc: ClientError) -> str:
    """AWS's error code of a refusal, e.g. "ClusterNotFoundException"."""
    return str(exc.response.get("Error", {}).get("Code", ""))


@contextlib.contextmanager
def unless_gone(gone: Collection[str]) -> Iterator[None]:
    """Inside, AWS's "it is not there" (one of the codes in `gone`) is no error: a delete of what
    is gone already has nothing left to do."""
    try:
        yield
    except ClientError as exc:
        if error_code(exc) not in gone:
            raise


def error_message(exc: ClientError) -> str:
    """AWS's error message of a refusal."""
    return str(exc.response.get("Error", {}).get("Message", ""))


MANAGED_BY_PULUMI = "Managed by Pulumi"  # pulumi-aws's default for a required description

# Values that mean "not set" for an input this provider does not serve (AWS's defaults).
_UNSET: tuple[Any, ...] = (None, "", False, [], {})


def refuse_unserved(
    ctx: CloudContext, token: str, inputs: Mapping[str, Any], served: Iterable[str]
) -> None:
    """Refuse inputs this entry would otherwise silently ignore, and other regions.

    Raises:
        NotImplementedError: an input outside `served` is set, or `region` is not the
            provider's region.
    """
    allowed = set(served) | {"region"}
    extra = sorted(
        key
        for key, value in inputs.items()
        if key not in allowed and not key.startswith("__") and value not in _UNSET
    )
    if extra:
        raise NotImplementedError(
            f"the local cloud's aws provider does not serve {', '.join(extra)} of {token} yet; "
            f"served inputs: {', '.join(sorted(allowed))}"
        )
    region = inputs.get("region")
    if region not in (None, "", ctx.region):
        raise NotImplementedError(
            f"{token}: region {region!r} is not served; the local cloud's aws provider serves "
            f"region {ctx.region!r} only (the provider's region)"
        )


def tag_outputs(state: Mapping[str, Any], observed: Mapping[str, str]) -> Props:
    """`tags` and `tagsAll` as read back: `tags` only when the state has them or the cloud has
    some (a tag added in the console is drift even when the program sets none)."""
    out: Props = {"tagsAll": dict(observed)}
    if state.get("tags") is not None or observed:
        out["tags"] = dict(observed)
    return out


def input_tags(inputs: Mapping[str, Any]) -> dict[str, str]:
    """The `tags` input as a {str: str} dict ({} when not given)."""
    return {str(k): str(v) for k, v in (inputs.get("tags") or {}).items()}


def tag_changes(
    current: Mapping[str, str], inputs: Mapping[str, Any]
) -> tuple[dict[str, str], list[str]]:
    """The tags to set and the tag keys to remove so that the cloud's `current` tags become
    exactly the `tags` input (a tag added in the console goes too)."""
    new = input_tags(inputs)
    upsert = {k: v for k, v in new.items() if current.get(k) != v}
    return upsert, sorted(set(current) - set(new))


def kept(state: Mapping[str, Any], keys: Iterable[str]) -> Props:
    """The state's values of `keys` (computed outputs an in-place update does not change)."""
    return {key: state[key] for key in keys if key in state}


def plain_number(value: Any) -> Any:
    """Integral floats as ints, recursively (the wire sends every number as a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: plain_number(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_number(v) for v in value]
    return value


def like(observed: Any, current: Any) -> Any:
    """`observed` in the shape of `current`: keys `current` lacks are dropped (recursively), and
    where both hold the same value, `current`'s own value is kept (15.0 stays 15.0)."""
    if isinstance(observed, Mapping) and isinstance(current, Mapping):
        return {
            k: like(observed[k], current[k])
            for k in current
            if k in observed and current[k] is not None
        }
    if isinstance(observed, list) and isinstance(current, list) and len(observed) == len(current):
        return [like(o, c) for o, c in zip(observed, current, strict=True)]
    if isinstance(observed, bool) != isinstance(current, bool):
        return observed
    return current if observed == current else observed


def same_members(observed: list[Any], current: Any) -> Any:
    """`current` when it holds the same members as `observed` in another order (AWS keeps these
    lists as sets), else `observed`; dict members are first trimmed to `current`'s keys."""
    if not isinstance(current, list):
        return observed
    keys = {k for item in current if isinstance(item, Mapping) for k in item}
    if keys:
        observed = [
            {k: v for k, v in item.items() if k in keys} if isinstance(item, Mapping) else item
            for item in observed
        ]

    def key(item: Any) -> str:
        return json.dumps(plain_number(item), sort_keys=True)

    if sorted(map(key, observed)) == sorted(map(key, current)):
        return current
    return observed


def json_text(observed: Any, current: Any) -> Any:
    """A JSON document as read back: the state's own text when the cloud's document means the
    same (AWS reformats policies), else the cloud's document as JSON text.

    `observed` may be the parsed document or its text; a state that holds a parsed document
    (pulumi-aws also accepts one) gets the parsed document back.
    """
    if isinstance(observed, str):
        try:
            observed = json.loads(observed)
        except ValueError:
            return observed
    if not isinstance(current, str):
        return observed
    try:
        if plain_number(json.loads(current)) == plain_number(observed):
            return current
    except ValueError:
        pass
    return json.dumps(observed)


def observe(state: Mapping[str, Any], observed: Mapping[str, Any]) -> Props:
    """The observed inputs the state holds, each in the state's shape (see `like`)."""
    return {
        key: like(value, state[key])
        for key, value in observed.items()
        if state.get(key) is not None and value is not None
    }


def keep_observed(view: Props, known: Mapping[str, Any]) -> Props:
    """`view` without the attributes that are unset (None), and without the empty ones ("", [],
    {}) that `known` (the inputs or the state) does not hold either: create and read return the
    same keys, so reading back an untouched resource adds nothing to its state."""
    return {
        key: value
        for key, value in view.items()
        if value is not None and (key in known or value not in ("", [], {}))
    }


def timestamp(value: Any) -> str:
    """An AWS date as pulumi-aws reports it: RFC 3339 in UTC, to the second."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)
