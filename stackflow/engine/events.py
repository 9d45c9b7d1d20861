"""The words of an operation's resource events (`base.ResourceEvent`): where one resource's
step is, and the resource every stack has at its root."""

from __future__ import annotations

from enum import StrEnum

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
"""The type of a stack's own root resource: its outputs are the stack's outputs."""


class ResourceStatus(StrEnum):
    """Where one resource's step of an operation is."""

    STARTED = "started"
    DONE = "done"
    FAILED = "failed"
