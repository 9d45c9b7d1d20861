"""A project's program as an inline Pulumi program, run the way Pulumi's Python language host
runs it: its entry file as `__main__`, from the program's folder (the working directory while it
declares, first on sys.path), its own modules imported afresh each time (a module that declares
resources when imported declares them in every operation, as in a new process).

Relative paths of file assets and archives are made absolute (relative to the program's folder, as
Pulumi resolves them): the engine and the provider plugins read them from other folders. Every
custom resource type the program declares is noted, so a survey can name the ones of packages the
local cloud has no plugin for.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stackflow import PROJECT_ROOT
from stackflow.rehearse.project import PulumiProject


class ProjectProgram:
    """The program function of one project (a `ProgramFn`: it exports through `pulumi.export`
    itself, so it returns no exports of its own)."""

    def __init__(self, project: PulumiProject) -> None:
        self.project = project
        self._lock = threading.Lock()
        self._types: set[str] = set()

    @property
    def types(self) -> set[str]:
        """The custom resource types (providers included) the program declared so far."""
        with self._lock:
            return set(self._types)

    def __call__(self) -> Mapping[str, Any]:
        import pulumi

        pulumi.runtime.register_stack_transformation(self._declared)
        folder = str(self.project.program_dir)
        self._forget_modules()
        previous, argv = os.getcwd(), sys.argv
        sys.path.insert(0, folder)
        sys.argv = [str(self.project.entry)]
        os.chdir(folder)  # the program reads its files relative to its folder, as under `pulumi`
        try:
            runpy.run_path(str(self.project.entry), run_name="__main__")
        finally:
            os.chdir(previous)
            sys.argv = argv
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
        return {}

    def _declared(self, args: Any) -> None:
        import pulumi

        if isinstance(args.resource, pulumi.CustomResource):
            with self._lock:
                self._types.add(str(args.type_))
        _absolute_paths(args.props, self.project.program_dir)
        return None  # the resource as declared: its assets' paths were fixed in place

    def _forget_modules(self) -> None:
        """Drop the project's own modules from the import cache, so they run again."""
        folder = self.project.program_dir
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if not file:
                continue
            path = Path(file).resolve()
            ours = path.is_relative_to(PROJECT_ROOT) and PROJECT_ROOT.is_relative_to(folder)
            if path.is_relative_to(folder) and not ours and not path.is_relative_to(sys.prefix):
                del sys.modules[name]


def _absolute_paths(value: Any, folder: Path) -> None:
    """Make the path of every file asset and archive inside `value` absolute, in place."""
    import pulumi

    if isinstance(value, pulumi.FileAsset | pulumi.FileArchive):
        if not os.path.isabs(value.path):
            value.path = str(folder / value.path)
    elif isinstance(value, pulumi.AssetArchive):
        _absolute_paths(value.assets, folder)
    elif isinstance(value, Mapping):
        for item in value.values():
            _absolute_paths(item, folder)
    elif isinstance(value, list | tuple):
        for item in value:
            _absolute_paths(item, folder)
