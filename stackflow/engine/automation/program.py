"""Inline Pulumi programs: a plain program function declared under one lock per process, its
exports exported, and the resources it declared counted for the live view."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi.automation as auto

from stackflow.engine.base import ProgramFn

# pulumi_aws loads its submodules (ec2, rds, ...) on first attribute access, and that first load
# is not thread-safe: two programs touching `aws.ec2` at once in one process (several environments
# deployed by one parent flow) can see a half-loaded module ("has no attribute 'Vpc'"). Programs
# declare their resources under this lock; declaring takes milliseconds, the deploy runs after.
_DECLARE_LOCK = threading.Lock()


def declared_exports(program: ProgramFn) -> Mapping[str, Any]:
    """Run `program`'s declarations, one program at a time in this process; its exports."""
    with _DECLARE_LOCK:
        return program()


def pulumi_program(
    program: ProgramFn, on_declared: Callable[[int], None] | None = None
) -> auto.PulumiFn:
    """The inline Pulumi program for `program`: declares its resources and exports what it returns.

    Args:
        program: a plain program function returning its exports (name -> Output or value).
        on_declared: called with the number of resources the program declared (the live view's
            "done/total"); resources declared later, inside an `apply`, are not counted.
    """

    def declare() -> None:
        declared = 0

        def count(_: pulumi.ResourceTransformationArgs) -> None:
            nonlocal declared
            declared += 1  # called once per resource as it is constructed; changes nothing

        if on_declared is not None:
            pulumi.runtime.register_stack_transformation(count)
        for key, value in declared_exports(program).items():
            pulumi.export(key, value)
        if on_declared is not None:
            on_declared(declared)

    return declare
