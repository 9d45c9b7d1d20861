"""Adopting a project that is deployed already: a team's Pulumi project, deployed from its own
backend, becomes a project node of the graph without creating its resources a second time.

Its stack's state moves, as `team import` moves a state folder's: `stack export --show-secrets`
from the team's backend with the project's own passphrase (PULUMI_CONFIG_PASSPHRASE, as `pulumi
up` reads it), renamed to the environment's stack (every URN names its stack, and the root stack
resource is `<project>-<stack>`: what `pulumi stack rename` rewrites), then `stack import` into
stackflow's backend, which encrypts every secret for stackflow's passphrase. The team's backend is
only read. The first `up` after it runs the program against that state: the same program and
config change nothing, and it is stamped then (the next `up` skips it).

Refused before anything changes: a node that is not a project node, no such stack in the team's
backend (or one never deployed), a passphrase that does not open it, and a stack stackflow's
backend holds already with resources (adopted before, or deployed: adopting again would lose it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stackflow.backends import mask_url
from stackflow.dag import StackGraph
from stackflow.engine.checkpoints import CheckpointReader
from stackflow.engine.pulumisecrets import passphrase_opens, passphrase_salt
from stackflow.projectnodes import source_of
from stackflow.redact import Redactor
from stackflow.settings import Settings
from stackflow.teamops import TeamOpsRefused

_URN = "urn:pulumi:"
_ROOT = "::pulumi:pulumi:Stack::"
# A stack's state always holds its root stack resource and its default provider.
_BOOKKEEPING = 2


@dataclass(frozen=True)
class Adoption:
    """What `adopt` did: the stack it read, the stack it wrote, and how many resources moved."""

    source: str  # <backend (masked)> <project>/<stack>
    target: str  # <project>/<environment> in stackflow's backend
    resources: int
    secrets: int

    def lines(self) -> list[str]:
        return [
            f"adopted {self.source} as {self.target}: {self.resources} resource(s), "
            f"{self.secrets} secret(s) encrypted for stackflow's backend; nothing was created",
            "its first `up` runs its program against this state (no change when the code and "
            "config are the ones deployed) and stamps it; the next `up` skips it",
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "resources": self.resources,
            "secrets": self.secrets,
        }


def renamed(deployment: dict[str, Any], project: str, old: str, new: str) -> dict[str, Any]:
    """`deployment` with every URN of stack `old` naming stack `new` (its root stack resource
    `<project>-<new>`), as `pulumi stack rename` rewrites them."""
    prefix, moved = f"{_URN}{old}::{project}::", f"{_URN}{new}::{project}::"
    root_old, root_new = f"{_ROOT}{project}-{old}", f"{_ROOT}{project}-{new}"

    def walk(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(prefix):
            value = moved + value[len(prefix) :]
            head, sep, tail = value.partition(root_old)
            if sep and (not tail or tail.startswith("::")):
                value = head + root_new + tail
            return value
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    result: dict[str, Any] = walk(deployment)
    return result


def adopt(
    settings: Settings,
    graph: StackGraph,
    node: str,
    from_backend: str,
    from_stack: str | None,
    passphrase: str,
    passphrase_from: str,
    say: Callable[[str], object] = lambda _line: None,
) -> Adoption:
    """Move the deployed stack of project node `node` from the team's backend into stackflow's,
    as the environment's stack of that node (see the module).

    Args:
        from_stack: its stack in the team's backend (None: the stack file the node reads).
        passphrase: the project's own passphrase (its backend's secrets), and where it came from.

    Raises:
        TeamOpsRefused: see the module; nothing was changed.
        StateTransferError: a `pulumi` command failed.
    """
    from stackflow.engine.automation.transfer import BackendSession, StackRef
    from stackflow.secretbox import state_passphrase
    from stackflow.teamops.moving import cli_home, count_secrets

    source = source_of(graph, node)
    if source is None:
        raise TeamOpsRefused(
            f"{node} is not a project node (accepted: "
            f"{', '.join(n for n in graph.stacks if graph[n].project is not None) or 'none'})"
        )
    project = source.load()
    stack = from_stack or source.stack_name(settings)
    target = settings.resolved_backend_url
    with CheckpointReader(from_backend) as theirs, CheckpointReader(target) as ours:
        found = theirs.checkpoint(project.name, stack)
        mine = ours.checkpoint(project.name, settings.environment)
    where = f"{mask_url(from_backend)} {project.name}/{stack}"
    if found is None or found.manifest_time is None:
        raise TeamOpsRefused(f"{where}: no deployed stack there to adopt. Nothing was changed.")
    salt = passphrase_salt(found.secrets_provider)
    if salt is not None and not passphrase_opens(salt, passphrase):
        raise TeamOpsRefused(
            f"{where}: the passphrase from {passphrase_from} does not open it (give the "
            "project's own, as for `pulumi up`). Nothing was changed."
        )
    if mine is not None and mine.resource_count > _BOOKKEEPING:
        raise TeamOpsRefused(
            f"{project.name}/{settings.environment} holds {mine.resource_count} resource(s) in "
            f"stackflow's backend already (adopted before, or deployed): adopting again would "
            "lose them. Nothing was changed."
        )
    ours_passphrase = state_passphrase(settings)
    redactor = Redactor([passphrase, *([ours_passphrase] if ours_passphrase else [])])
    home = cli_home(settings)
    old = BackendSession(from_backend, passphrase, pulumi_home=home, redactor=redactor)
    new = BackendSession(
        target,
        ours_passphrase,
        secrets_provider=settings.secrets_provider or "passphrase",
        pulumi_home=home,
        redactor=redactor,
    )
    ref = StackRef(project.name, settings.environment)
    with old, new:
        say(f"exporting {where}")
        exported = old.export(StackRef(project.name, stack))
        exported.deployment.update(
            renamed(exported.deployment, project.name, stack, settings.environment)
        )
        if mine is not None:
            new.remove_empty(ref)
        exported.deployment["secrets_providers"] = new.create(ref)
        say(f"importing it as {ref} into stackflow's backend")
        new.import_(ref, exported)
    return Adoption(
        where,
        str(ref),
        max(0, found.resource_count - _BOOKKEEPING),
        count_secrets(exported.deployment),
    )
