"""Project nodes: a team's existing Pulumi Python project (its folder with Pulumi.yaml, its
program and its Pulumi.<stack>.yaml files) as a stack of the graph, run the way `rehearse` runs
one: its program in a process of its own, its stack in stackflow's backend under the project's own
name (`<name in Pulumi.yaml>/<environment>`).

What it receives: its stack file's config (the environment's `Pulumi.<environment>.yaml`, or the
stack the node entry names), then the config its node entry maps from settings and upstream
outputs (a secret output becomes a secure value), and it may read its upstream stacks through
`pulumi.StackReference` (`organization/<project>-<node>/<environment>` for a program node: on a
self-hosted backend the organisation is the literal `organization`). A reference to any other
stack is refused at its preview, naming both.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from stackflow.dag import StackGraph, Upstream, stack_config
from stackflow.engine.base import ConfigValue, StackSpec
from stackflow.engine.hosted import HostedProgram
from stackflow.errors import PermanentStackError
from stackflow.rehearse.project import ProjectError, PulumiProject, load_project
from stackflow.settings import Settings

ConfigMap = Callable[[Settings, Upstream], Mapping[str, Any]]
"""A project node's config from settings and upstream outputs: key -> value (a bare key is the
project's own, `<project>:<key>`; a SecretStr, or a secret upstream output, is a secure value)."""

# What a project folder holds that is not its program: never part of its fingerprint.
_SKIPPED = frozenset({".git", "venv", ".venv", "__pycache__", "node_modules", ".pytest_cache"})


class ProjectInputs(BaseModel, frozen=True):
    """What decides a project node's update besides its config: digests of its folder's files
    and of the upstream outputs it may read through a StackReference (for its fingerprint)."""

    files: dict[str, str]
    upstream: dict[str, str]
    stack_file: str


@dataclass(frozen=True)
class ProjectSource:
    """Where a project node's program and config come from.

    Attributes:
        folder: the project's folder (where its Pulumi.yaml is), relative to the graph's module.
        config: config mapped from settings and upstream outputs (see `ConfigMap`).
        stack: which stack file an environment reads (`Pulumi.<stack>.yaml`); default: the
            environment's own name.
    """

    folder: Path
    config: ConfigMap | None = None
    stack: Callable[[Settings], str] | None = None

    def load(self) -> PulumiProject:
        """The project, read as `rehearse` reads it.

        Raises:
            ProjectError: not a Pulumi Python project (naming the file and key).
        """
        return load_project(self.folder)

    def stack_name(self, settings: Settings) -> str:
        """The stack whose file gives this environment's config."""
        return self.stack(settings) if self.stack is not None else settings.environment

    def spec(
        self,
        graph: StackGraph,
        name: str,
        settings: Settings,
        upstream: Upstream,
        secrets: Collection[str],
    ) -> tuple[StackSpec, ProjectInputs]:
        """The node's StackSpec and what its fingerprint covers (see `project_spec`)."""
        return project_spec(graph, name, settings, upstream, secrets)

    def bare_spec(self, settings: Settings, name: str) -> StackSpec:
        """The node's spec for operations that do not run its program (`project_bare_spec`)."""
        return project_bare_spec(self, settings, name)

    def files(self) -> dict[str, str]:
        """Every file of the project (relative path -> sha256): what its fingerprint covers."""
        found = {}
        for path in sorted(_walk(self.folder)):
            found[str(path.relative_to(self.folder))] = hashlib.sha256(
                path.read_bytes()
            ).hexdigest()
        return found


def _walk(folder: Path) -> Iterator[Path]:
    for entry in folder.iterdir():
        if entry.name in _SKIPPED or entry.suffix == ".pyc":
            continue
        if entry.is_dir():
            yield from _walk(entry)
        elif entry.is_file():
            yield entry


def pulumi_name(graph: StackGraph, settings: Settings, node: str) -> str:
    """The Pulumi project a stack of the graph lives under: a project node's own name, else
    `<project>-<node>`."""
    source = source_of(graph, node)
    return source.load().name if source is not None else f"{settings.project}-{node}"


def source_of(graph: StackGraph, node: str) -> ProjectSource | None:
    """A node's project source (None: a stack of stackflow's own, or a step)."""
    source = graph[node].project
    if source is not None and not isinstance(source, ProjectSource):
        raise TypeError(f"node {node!r}: a project source that is not a ProjectSource")
    return source


def project_spec(
    graph: StackGraph,
    name: str,
    settings: Settings,
    upstream: Upstream,
    secrets: Collection[str] = (),
) -> tuple[StackSpec, ProjectInputs]:
    """The StackSpec of a project node, and what its fingerprint covers besides its config.

    Args:
        upstream: the typed outputs of its upstream stacks (deployed ones; see the stack task).
        secrets: the secret values among those outputs: a mapped value holding one is secure.

    Raises:
        ProjectError: the folder is not a Pulumi Python project, or its stack file cannot be
            read or decrypted (PULUMI_CONFIG_PASSPHRASE, as for `pulumi up`).
        PermanentStackError: a project name that is one of stackflow's own.
    """
    from stackflow.rehearse.config import project_config, text

    source = source_of(graph, name)
    assert source is not None
    project = source.load()
    label = f"{settings.environment}/{name}"
    if project.name.startswith(f"{settings.project}-"):
        raise PermanentStackError(
            label,
            f"{project.file}: name {project.name!r} is one of stackflow's own projects "
            f"({settings.project}-<node>) in the same backend; rename the project",
        )
    stack = source.stack_name(settings)
    config = {**stack_config(settings), **project_config(project, stack, os.environ)}
    mapped = source.config(settings, upstream) if source.config is not None else {}
    hidden = [s for s in secrets if s]
    for key, value in mapped.items():
        full = key if ":" in key else f"{project.name}:{key}"
        secret = isinstance(value, SecretStr)
        shown = text(value.get_secret_value() if isinstance(value, SecretStr) else value)
        config[full] = ConfigValue(shown, secret=secret or any(s in shown for s in hidden))
    readable = {
        f"{pulumi_name(graph, settings, u)}/{settings.environment}": u
        for u in graph.upstream_stacks(name)
    }
    known = {f"{pulumi_name(graph, settings, n)}/{settings.environment}": n for n in graph.stacks}
    program = HostedProgram(project.program_dir, project.entry, name, readable, known)
    spec = StackSpec(
        settings.project,
        settings.environment,
        name,
        program,
        config,
        pulumi_name=project.name,
        policies=settings.policies,  # the environment's packs check a project's stack too
    )
    inputs = ProjectInputs(
        files=source.files(),
        upstream={u: _digest(outputs) for u, outputs in sorted(upstream.items())},
        stack_file=project.stack_file(stack).name,  # a checkout of another commit: same name
    )
    return spec, inputs


def project_bare_spec(source: ProjectSource, settings: Settings, name: str) -> StackSpec:
    """A project node's spec for operations that do not run its program (refresh, drift,
    destroy, outputs): its provider config set, the rest of its config kept as the stack has it.

    Raises:
        ProjectError: the folder is not a Pulumi Python project.
    """
    return StackSpec(
        settings.project,
        settings.environment,
        name,
        program=dict,
        config=stack_config(settings),
        pulumi_name=source.load().name,
        partial_config=True,
    )


def _digest(outputs: BaseModel) -> str:
    """A digest of a stack's outputs, its secret values included (a model's dump masks them)."""
    return hashlib.sha256(
        json.dumps(_revealed(outputs.model_dump()), sort_keys=True, default=str).encode()
    ).hexdigest()


def _revealed(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Mapping):
        return {k: _revealed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_revealed(v) for v in value]
    return value


__all__ = [
    "ConfigMap",
    "ProjectError",
    "ProjectInputs",
    "ProjectSource",
    "project_bare_spec",
    "project_spec",
    "pulumi_name",
]
