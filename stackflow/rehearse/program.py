"""A project's program as the engine runs it: in a process of its own, the way Pulumi's Python
language host runs it (its entry file as `__main__`, from the program's folder, first on
`sys.path`), never inside stackflow's process (see `stackflow.engine.hosted`).

Relative paths of file assets and archives are made absolute there (relative to the program's
folder, as Pulumi resolves them): the engine and the provider plugins read them from other
folders. Every custom resource type the program declares is noted, so a survey can name the ones
of packages the local cloud has no plugin for.
"""

from __future__ import annotations

from collections.abc import Mapping

from stackflow.engine.hosted import HostedProgram
from stackflow.rehearse.project import PulumiProject


def project_program(
    project: PulumiProject,
    owner: str,
    readable: Mapping[str, str] | None = None,
    known: Mapping[str, str] | None = None,
) -> HostedProgram:
    """The program of `project`, hosted in a process of its own.

    Args:
        owner: how a refusal names it (its node, or project/stack).
        readable: the stacks it may read through a StackReference (`project/stack` -> the node
            that deploys it); None: any.
        known: every stack of its graph in this environment (`project/stack` -> node).
    """
    return HostedProgram(project.program_dir, project.entry, owner, readable, dict(known or {}))
