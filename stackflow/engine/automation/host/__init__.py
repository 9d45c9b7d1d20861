"""A project's program in a process of its own (see `stackflow.engine.hosted`), for the engine.

`process` starts and stops one such process (`ProgramHost`); `child` is what runs in it. `Hosts`
keeps the ones running, by stack, so a cancel reaches the program's process too: it runs in a
session of its own, where no terminal's Ctrl-C reaches, and a program that loops or sleeps must
still end within seconds.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from stackflow.engine.automation.host.process import ProgramHost
from stackflow.engine.base import Listener, StackSpec
from stackflow.engine.hosted import HostedProgram
from stackflow.errors import PermanentStackError

__all__ = ["Hosts", "ProgramHost", "stamp_job"]


def stamp_job(
    spec: StackSpec,
    stamp: Mapping[str, Any] | None,
    passphrase: str | None,
    learn: Callable[[str], None],
) -> dict[str, Any]:
    """What the program's process needs to record stackflow's stamp: the stamp, and the key that
    seals it, derived for this stamp alone (the state passphrase never leaves this process; the
    key is learnt as a secret, so a program that prints it shows it masked).

    Raises:
        PermanentStackError: a stamp whose fingerprint is still a future (an early start).
    """
    if stamp is None:
        return {}
    fingerprint = stamp["fingerprint"]
    if not isinstance(fingerprint, str):
        raise PermanentStackError(spec.label, "a project node cannot start before its upstream")
    job: dict[str, Any] = {"stamp": dict(stamp)}
    if passphrase:
        from stackflow.secretbox import StampSeal

        seal = StampSeal(passphrase, fingerprint)
        learn(seal.key)
        job["seal"] = {"salt": seal.salt, "key": seal.key}
    return job


class Hosts:
    """The program processes running, by stack label. Safe to use from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, ProgramHost] = {}

    @contextlib.contextmanager
    def serving(
        self,
        spec: StackSpec,
        program: HostedProgram | None,
        job: Mapping[str, Any],
        listener: Listener,
    ) -> Iterator[str | None]:
        """The address the program's process serves on, for one operation (None: `program` is
        None, the program runs inline). An operation whose program refused a reference or whose
        process ended on its own fails with that reason, never with the CLI's words for a
        language host that went away, and also when the CLI called it a success.

        Raises:
            PermanentStackError: as said, naming the stack.
        """
        if program is None:
            yield None
            return
        host = ProgramHost(program, listener, spec.label)
        with self._lock:
            self._running[spec.label] = host
        try:
            host.start(
                {
                    "folder": str(program.folder),
                    "entry": str(program.entry),
                    "owner": program.owner,
                    "readable": dict(program.readable) if program.readable is not None else None,
                    "known": dict(program.known),
                    **job,
                }
            )
            try:
                yield host.address
            except Exception:
                if why := host.failure():
                    raise PermanentStackError(spec.label, listener.redactor(why)) from None
                raise
            if why := host.failure():
                raise PermanentStackError(spec.label, listener.redactor(why))
        finally:
            with self._lock:
                self._running.pop(spec.label, None)
            host.stop()

    def kill(self, label: str) -> None:
        """End the program's process of `label`'s running operation now, if there is one."""
        with self._lock:
            host = self._running.get(label)
        if host is not None:
            host.kill()
