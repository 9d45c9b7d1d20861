"""A Pulumi Python project on disk, read as `pulumi` reads it: Pulumi.yaml (its name, runtime,
`main` and `config`), the stack files beside it (Pulumi.<stack>.yaml, or under `stackConfigDir`),
and the program's folder and entry file. Nothing is written to the project."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackflow.errors import SettingsError, echo
from stackflow.names import NameRefused, validate_project_name, validate_stack_name

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
DEFAULT_STACK = "dev"
# Pulumi's own rules for project and stack names, and never '.' or '..' (they become folders).
_STACK_NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}$")


class ProjectError(SettingsError):
    """A folder that is not a Pulumi Python project stackflow can run: names the file and key."""


@dataclass(frozen=True)
class PulumiProject:
    """One Pulumi Python project.

    Attributes:
        folder: where Pulumi.yaml is.
        file: Pulumi.yaml itself.
        name: the project's name (its `name`).
        program_dir: where the program runs (Pulumi's working directory: the folder, or `main`).
        entry: the file run as `__main__` (program_dir/__main__.py, or the file `main` names).
        stack_dir: where its stack files are (the folder, or `stackConfigDir`).
        config: the project's `config` declarations, as written.
    """

    folder: Path
    file: Path
    name: str
    program_dir: Path
    entry: Path
    stack_dir: Path
    config: Mapping[str, Any] = field(default_factory=dict)

    def stack_file(self, stack: str) -> Path:
        return self.stack_dir / f"Pulumi.{stack}.yaml"

    def stacks(self) -> list[str]:
        """The stacks that have a file of their own, by name."""
        names = (p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in self._stack_files())
        return sorted(n for n in names if n and _STACK_NAME.match(n))

    def _stack_files(self) -> list[Path]:
        return [p for p in self.stack_dir.glob("Pulumi.*.yaml") if p.is_file()]

    def choose_stack(self, stack: str | None) -> str:
        """The stack to rehearse: the one given, else the project's only stack file, else `dev`.

        Raises:
            ProjectError: a name Pulumi does not accept, or several stack files and none chosen.
        """
        if stack is not None:
            try:
                return validate_stack_name(stack, "--stack")
            except NameRefused as exc:
                raise ProjectError(f"{exc}. Nothing was changed.") from None
        found = self.stacks()
        if len(found) > 1:
            raise ProjectError(
                f"{self.stack_dir} has a file for each of the stacks {', '.join(found)}: name the "
                "one to rehearse with --stack NAME. Nothing was changed."
            )
        return found[0] if found else DEFAULT_STACK


def load_yaml(path: Path) -> Any:
    """A YAML file's content.

    Raises:
        ProjectError: unreadable, or not YAML (naming the file and the line).
    """
    import yaml  # type: ignore[import-untyped]

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProjectError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ProjectError(f"{path}: not UTF-8 text; save it as UTF-8") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise ProjectError(
            f"{path}: lists or maps nested too deep to read (thousands of levels). Nothing was "
            "changed."
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise ProjectError(
            f"{path}{where}: not valid YAML ({problem}). Nothing was changed."
        ) from None


def load_project(path: Path) -> PulumiProject:
    """Read the Pulumi project at `path` (its folder, or its Pulumi.yaml).

    Raises:
        ProjectError: no such folder, no Pulumi.yaml, a runtime other than Python, a `main` or
            program file that is missing, or a name Pulumi does not accept.
    """
    path = path.expanduser().resolve()
    if path.is_file() and path.name in PROJECT_FILES:
        path = path.parent
    if not path.exists():
        raise ProjectError(f"{path}: no such folder. Nothing was changed.")
    if not path.is_dir():
        raise ProjectError(
            f"{path} is a file: give the folder of a Pulumi project (where its Pulumi.yaml is). "
            "Nothing was changed."
        )
    file = next((path / n for n in PROJECT_FILES if (path / n).is_file()), None)
    if file is None:
        raise ProjectError(
            f"{path / 'Pulumi.yaml'}: no such file; rehearse takes the folder of a Pulumi Python "
            "project (with Pulumi.yaml and __main__.py). Nothing was changed."
        )
    data = load_yaml(file)
    if not isinstance(data, Mapping):
        raise ProjectError(f"{file}: not a Pulumi project file (expected `name:` and `runtime:`)")
    try:
        name = validate_project_name(data.get("name"), f"{file}: name")
    except NameRefused as exc:
        raise ProjectError(f"{exc}. Nothing was changed.") from None
    _check_runtime(file, data.get("runtime"))
    program_dir, entry = _program(file, path, data.get("main"))
    config = data.get("config") or {}
    if not isinstance(config, Mapping):
        raise ProjectError(f"{file}: config must be a mapping of keys to values or declarations")
    stack_dir = path / str(data["stackConfigDir"]) if data.get("stackConfigDir") else path
    return PulumiProject(path, file, name, program_dir, entry, stack_dir.resolve(), config)


def _check_runtime(file: Path, runtime: Any) -> None:
    name = runtime.get("name") if isinstance(runtime, Mapping) else runtime
    if name != "python":
        shown = echo(str(name)) if name is not None else "missing"
        raise ProjectError(
            f"{file}: runtime {shown}; accepted: python (stackflow runs the program inline, in "
            "its own Python). Nothing was changed."
        )


def _program(file: Path, folder: Path, main: Any) -> tuple[Path, Path]:
    """Where the program runs and the file run as `__main__`, as Pulumi decides them."""
    program_dir, entry = folder, folder / "__main__.py"
    if main:
        target = (folder / str(main)).resolve()
        if not target.exists():
            raise ProjectError(
                f"{file}: main {echo(str(main))}: {target} does not exist. Nothing was changed."
            )
        program_dir, entry = (
            (target, target / "__main__.py") if target.is_dir() else (target.parent, target)
        )
    if not entry.is_file():
        raise ProjectError(
            f"{entry}: no such file; the program of a Pulumi Python project is its __main__.py "
            "(or the file `main` names in Pulumi.yaml). Nothing was changed."
        )
    return program_dir, entry
