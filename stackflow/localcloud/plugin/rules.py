"""The rules every resource type follows, whatever its token: what a diff is, which changes
replace, and how Check names a resource that has no name (the wire layer decides none of this)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackflow.localcloud.registry import Props, ResourceType, auto_name
from stackflow.localcloud.wire import contains_unknown

EMPTY: tuple[Any, ...] = (None, "", {}, [])  # what AWS treats as not set
NAME_PREFIX_SUFFIX = 26  # terraform's prefixed unique ids: prefix + 26 characters


def node_and_environment(urn: str) -> tuple[str, str]:
    """From urn:pulumi:<stack>::<project>::<type>::<name>: the graph node and the environment."""
    parts = urn.split("::")
    stack = parts[0].rsplit(":", 1)[-1] if parts else ""
    project = parts[1] if len(parts) > 1 else ""
    return project.rsplit("-", 1)[-1], stack.rsplit("/", 1)[-1]


def logical_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def same(old: Any, new: Any) -> bool:
    if old in EMPTY and new in EMPTY:
        return True  # missing, null and empty are one thing to AWS
    return bool(old == new)


def diff_inputs(
    rtype: ResourceType, olds: Mapping[str, Any], news: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """(changed input names, those among them that force replacement), sorted.

    An unknown new value (a preview waiting on another resource) counts as a change. A type
    without an in-place update replaces on any change.
    """
    changed = sorted(
        key
        for key in set(olds) | set(news)
        if not key.startswith("__")
        and (contains_unknown(news.get(key)) or not same(olds.get(key), news.get(key)))
        # A default filled in now that an older state lacks is what AWS already holds.
        and not (key not in olds and key in rtype.defaults and news.get(key) == rtype.defaults[key])
    )
    replaces = [k for k in changed if rtype.update is None or k in rtype.force_new]
    return changed, replaces


def with_defaults(rtype: ResourceType, news: Props) -> Props:
    """`news` with pulumi-aws's defaults for the inputs the program left out."""
    missing = {k: v for k, v in rtype.defaults.items() if news.get(k) is None}
    return {**news, **missing} if missing else news


def with_auto_name(
    rtype: ResourceType, olds: Props, news: Props, seed: bytes, logical: str
) -> Props:
    """`news` with the type's name input filled when the program gave none: the old name when
    there is one (a name, once chosen, stays), else one made from the logical name and the
    engine's random seed (stable across previews)."""
    key = rtype.auto_name
    if not key or news.get(key) not in EMPTY:
        return news
    named = dict(news)
    if rtype.auto_name_exact:
        named[key] = logical
        return named
    if olds.get(key) not in EMPTY and (
        not rtype.name_prefix or olds.get(rtype.name_prefix) == news.get(rtype.name_prefix)
    ):
        named[key] = olds[key]
        return named
    prefix = news.get(rtype.name_prefix) if rtype.name_prefix else None
    if isinstance(prefix, str) and prefix:
        named[key] = prefix + auto_name("", seed, NAME_PREFIX_SUFFIX).lstrip("-")
    else:
        named[key] = auto_name(logical, seed, max_length=rtype.auto_name_max)
    return named
