"""A Pulumi Python project's program, run by the engine in a process of its own.

A graph's program node is a function the engine runs in its own process (`ProgramFn`). A
project's program is a folder and an entry file, written to run under `pulumi up`: its own
working directory, `sys.path`, modules and globals. Two of them running at once in one process
would change each other's (a working directory is per process), and a program that loops, sleeps
or exits would hold or end stackflow with it. So the engine runs it in a child process of its own
(`stackflow.engine.automation.host`): a clean environment, its own process group, the program's
folder as its working directory and first on `sys.path`, hosting the language server the Pulumi
CLI connects to. What the program did that stackflow must know (the resource types it declared,
the stacks it read through `pulumi.StackReference`, a reference it was refused) comes back here.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

STACK_REFERENCE = "pulumi:pulumi:StackReference"
"""The type through which the engine reads another stack's outputs."""

SELF_HOSTED_ORGANIZATION = "organization"
"""The only organisation a self-hosted backend (file, S3, PostgreSQL) knows: a stack there is
`organization/<project>/<stack>`, and any other organisation name is refused by the backend."""


@dataclass(eq=False)
class HostedProgram:
    """A project's program, for the engine to run in a process of its own.

    Attributes:
        folder: where it runs (its working directory, first on `sys.path`).
        entry: the file run as `__main__`.
        owner: how refusals name it (its node, or project/stack for a rehearsal).
        readable: the stacks it may read through a StackReference, as `project/stack` -> how a
            refusal names what deploys it; None: any (a rehearsal is no member of a graph).
        known: every stack of the graph in this environment (`project/stack` -> node), so a
            refusal names the node that deploys a stack the program may not read.
    """

    folder: Path
    entry: Path
    owner: str
    readable: Mapping[str, str] | None = None
    known: Mapping[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _declared: set[str] = field(default_factory=set, repr=False)
    _read: set[str] = field(default_factory=set, repr=False)

    def noted(self, declared: set[str] | None = None, read: set[str] | None = None) -> None:
        """Record what the program's process reported: resource types declared, stacks read."""
        with self._lock:
            self._declared |= declared or set()
            self._read |= read or set()

    @property
    def declared(self) -> set[str]:
        """The custom resource types (providers included) the program declared so far."""
        with self._lock:
            return set(self._declared)

    @property
    def read(self) -> set[str]:
        """The stacks the program read through a StackReference so far, as `project/stack`."""
        with self._lock:
            return set(self._read)

    def refusal(self, reference: str, project: str, stack: str) -> str:
        """Why the program may not read `reference` ("" when it may), naming both ends.

        Args:
            reference: the stack name the program gave (`org/project/stack`, `project/stack` or
                `stack`, as Pulumi accepts it).
            project, stack: the program's own project and stack, which complete a short name.
        """
        if self.readable is None:
            return ""
        key = reference_key(reference, project, stack)
        if key in self.readable:
            return ""
        node = self.known.get(key)
        deployed = f" (deployed by the node {node})" if node else ""
        upstream = ", ".join(sorted(set(self.readable.values()))) or "none"
        return (
            f"{self.owner} reads the stack {reference}{deployed} through a StackReference, but "
            f"it is not among {self.owner}'s upstream nodes (upstream stacks: {upstream}), so the "
            f"graph could run them in either order: add {node or 'the node that deploys it'} to "
            f"{self.owner}'s upstream. Nothing was changed."
        )


def reference_key(reference: str, project: str, stack: str) -> str:
    """`project/stack` of a StackReference's name, completed as Pulumi completes a short one."""
    parts = reference.split("/")
    if len(parts) >= 3:
        return f"{parts[-2]}/{parts[-1]}"
    if len(parts) == 2:
        return reference
    return f"{project}/{parts[0]}"
