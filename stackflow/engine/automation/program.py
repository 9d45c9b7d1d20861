"""Inline Pulumi programs: a plain program function declared under one lock per process, its
exports exported, and the resources it declared counted for the live view."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi.automation as auto

from stackflow.engine.base import INTERNAL_OUTPUT, ProgramFn
from stackflow.engine.hosted import HostedProgram
from stackflow.engine.sealed import outputs_digest

if TYPE_CHECKING:
    from stackflow.secretbox import StampSeal

# pulumi_aws loads its submodules (ec2, rds, ...) on first attribute access, and that first load
# is not thread-safe: two programs touching `aws.ec2` at once in one process (several environments
# deployed by one parent flow) can see a half-loaded module ("has no attribute 'Vpc'"). Programs
# declare their resources under this lock; declaring takes milliseconds, the deploy runs after.
_DECLARE_LOCK = threading.Lock()


def declared_exports(program: ProgramFn) -> Mapping[str, Any]:
    """Run `program`'s declarations, one program at a time in this process; its exports."""
    with _DECLARE_LOCK:
        return program()


Sealer = Callable[[str], "StampSeal"]
"""The seal of a stamp, from its fingerprint."""


def passphrase_sealer(passphrase: str | None) -> Sealer | None:
    """Seals under a key derived from the state passphrase (None: no passphrase, no seal)."""
    if not passphrase:
        return None
    from stackflow.secretbox import StampSeal

    return lambda fingerprint: StampSeal(passphrase, fingerprint)


def stamp_output(stamp: Mapping[str, Any], exports: Mapping[str, Any], seal: Sealer | None) -> Any:
    """The output an update records for stackflow, atomic with the update itself: its stamp (the
    fingerprint of the inputs, the stackflow version) and, sealed with a key derived from the
    state passphrase (`seal`), the values of every export (under a KMS provider, which leaves no
    passphrase, a digest of the plain ones: `stackflow.engine.sealed.outputs_digest`). A later run
    skips the stack only when the checkpoint's stamp matches its own inputs and its outputs are
    those the seal (or digest) holds, and takes the secret outputs from the seal (no `pulumi`
    process to decrypt them). The seal is ciphertext, so it is stored as a plain output
    (Pulumi would otherwise encrypt the ciphertext again under its own slower key).

    The fingerprint may be a future: an update that started before its upstream stacks ended
    (`stackflow.later`) knows its inputs only when they arrive, and records them then.
    """
    fingerprint = stamp["fingerprint"]
    if isinstance(fingerprint, concurrent.futures.Future):
        known = pulumi.Output.from_input(asyncio.wrap_future(fingerprint))
        return known.apply(
            lambda fp: pulumi.Output.from_input(
                stamp_output({**stamp, "fingerprint": fp}, exports, seal)
            )
        )
    record: dict[str, Any] = dict(stamp)
    if not exports:
        return record
    if seal is not None:
        sealer = seal(str(fingerprint))
        sealed = pulumi.Output.all(**exports).apply(sealer.seal)
        record["salt"] = sealer.salt
        record["sealed"] = pulumi.Output.unsecret(sealed)
    else:  # a KMS provider: no passphrase to key a seal with, so a digest of the plain exports
        record["digest"] = pulumi.Output.unsecret(_digest(exports))
    return record


def _digest(exports: Mapping[str, Any]) -> pulumi.Output[str]:
    """`sealed.outputs_digest` of the exports: their plain values, their secret ones' names."""

    async def secret_names() -> list[str]:
        return [k for k, v in exports.items() if await pulumi.Output.from_input(v).is_secret()]

    def digest(found: list[Any]) -> str:
        names, values = found
        plain = {k: v for k, v in values.items() if k not in names}
        return outputs_digest(plain, names)

    names: pulumi.Output[list[str]] = pulumi.Output.from_input(secret_names())
    return pulumi.Output.all(names, pulumi.Output.all(**exports)).apply(digest)


def pulumi_program(
    program: ProgramFn,
    on_declared: Callable[[int], None] | None = None,
    stamp: Mapping[str, Any] | None = None,
    passphrase: str | None = None,
) -> auto.PulumiFn:
    """The inline Pulumi program for `program`: declares its resources and exports what it returns.

    Args:
        program: a plain program function returning its exports (name -> Output or value).
        on_declared: called with the number of resources the program declared (the live view's
            "done/total"); resources declared later, inside an `apply`, are not counted.
        stamp: what the update records for stackflow (see `stamp_output`), exported as
            `_stackflow`; None exports nothing of ours.
        passphrase: seals the exports' values into the stamp.
    """

    def declare() -> None:
        declared = 0

        def count(_: pulumi.ResourceTransformationArgs) -> None:
            nonlocal declared
            declared += 1  # called once per resource as it is constructed; changes nothing

        if on_declared is not None:
            pulumi.runtime.register_stack_transformation(count)
        exports = declared_exports(program)
        for key, value in exports.items():
            pulumi.export(key, value)
        if stamp is not None:
            pulumi.export(
                INTERNAL_OUTPUT, stamp_output(stamp, exports, passphrase_sealer(passphrase))
            )
        if on_declared is not None:
            on_declared(declared)

    return declare


def in_process(program: ProgramFn | HostedProgram) -> ProgramFn:
    """What runs in this process for `program`: itself, or for a program hosted in a process of
    its own, nothing (an operation that runs it serves it from there; one that does not, such
    as a refresh or a destroy, declares nothing)."""
    return dict if isinstance(program, HostedProgram) else program


def operation_program(
    program: ProgramFn | HostedProgram,
    runs: bool,
    on_declared: Callable[[int], None] | None,
    stamp: Mapping[str, Any] | None,
    passphrase: str | None,
) -> tuple[auto.PulumiFn | None, HostedProgram | None]:
    """What an operation runs: an inline program (see `pulumi_program`), or for a program hosted
    in a process of its own that the operation runs (`runs`: a preview or an up), that program,
    for the engine to serve from there."""
    if isinstance(program, HostedProgram) and runs:
        return None, program
    return pulumi_program(in_process(program), on_declared, stamp, passphrase), None
