"""What the IAM modules of the local cloud share: AWS's not-found code, policy documents as AWS
takes them, and IAM's tag calls."""

from __future__ import annotations

import json
from typing import Any

from stackflow.localcloud.resources._declared import KEY_VALUE, Tagging

GONE = ("NoSuchEntity",)


def document(value: Any) -> str:
    """A policy document input as AWS takes it: JSON text (pulumi-aws also accepts a dict)."""
    return value if isinstance(value, str) else json.dumps(value)


def iam_tagging(kind: str, key: str, by: str = "id", listed: str | None = None) -> Tagging:
    """IAM's tag calls for one `kind` of resource (`list_<kind>_tags`, `tag_<kind>`, ...) by the
    argument `key`; `listed`: the call that tells the tags when there is no list call."""
    return Tagging(
        listed or f"list_{kind}_tags",
        f"tag_{kind}",
        f"untag_{kind}",
        key=key,
        by=by,
        field="Tags",
        keys="TagKeys",
        item=KEY_VALUE,
        answer="InstanceProfile.Tags" if listed else None,
    )
