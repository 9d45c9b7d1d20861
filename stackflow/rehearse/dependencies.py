"""Whether a project's program can run in stackflow's own Python, as a user has it: every module
its code imports must be importable there; a Pulumi package (pulumi, pulumi-aws, pulumi-*) pinned
at another version of the installed major runs with the installed one, and says so naming the
pin; another major is refused by name, with the pin and the installed version. Another package's
pin counts only when the program imports it (a type checker or test tool it lists but never
imports is not required). On the local cloud, a provider package it has no plugin for (pulumi-docker,
pulumi-command) is named first: installing it would not make it run there. Checked before
anything runs; nothing is installed."""

from __future__ import annotations

import ast
import importlib.util
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, packages_distributions
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stackflow.rehearse.project import ProjectError, PulumiProject

# Why a package must be at the installed version: what serves or runs it.
_SERVED = {
    "pulumi-aws": "stackflow's aws provider is pulumi-aws {version} (on the local cloud and on "
    "AWS, the plugin follows the installed SDK)",
    "pulumi-random": "stackflow's random provider is pulumi-random {version}",
    "pulumi": "stackflow's engine is Pulumi {version}",
}
# Pulumi packages that are no provider the local cloud would need a plugin for.
_NOT_PROVIDERS = frozenset({"pulumi", "pulumi-policy"})
_SKIPPED_DIRS = frozenset({"venv", ".venv", "env", "__pycache__", "node_modules", "site-packages"})


class DependencyError(ProjectError):
    """The project needs what stackflow's environment does not have: names each one."""


@dataclass(frozen=True)
class Pin:
    """One requirement of the project and where it is written."""

    requirement: Requirement
    where: str  # "requirements.txt line 3", "pyproject.toml [project] dependencies"
    text: str  # as the project wrote it


def check_dependencies(project: PulumiProject, local: bool = False) -> list[str]:
    """Refuse a project whose pins or imports stackflow's environment does not satisfy.

    Args:
        local: the rehearsal is on the local cloud, which serves some provider packages only.

    Returns:
        One line per Pulumi package pinned at another version of the installed major, naming
        the pin and the version that runs instead.

    Raises:
        DependencyError: every unmet pin (with the installed version) and every module its code
            imports that is not importable, in one message; on the local cloud, led by the
            provider packages it does not serve.
    """
    used = imported_modules(project)
    provided = packages_distributions()
    notices: list[str] = []
    problems: list[str] = []
    found_pins = pins(project)
    for pin in found_pins:
        if _pulumi_package(pin) or _imported_by_program(pin, used, provided):
            problem, notice = _unmet(pin)
            problems.append(problem)
            notices += [notice] if notice else []
    missing = imports(project)
    problems += [f"{where} imports {name}, which is not installed" for where, name in missing]
    problems += shadowed(project)
    found = [p for p in problems if p]
    unserved = _unserved_providers(found_pins, missing) if local else []
    if unserved:
        from stackflow.localcloud.plugin.packages import PACKAGES

        names = {u.split(" ")[0] for u in unserved}
        others = [p for p in found if not any(n in p or n.replace("-", "_") in p for n in names)]
        also = (
            f"; it also needs what stackflow's Python lacks: {'; '.join(others)}" if others else ""
        )
        raise DependencyError(
            f"{project.folder}: it uses provider packages the local cloud does not serve: "
            f"{', '.join(unserved)} (the local cloud serves {' and '.join(PACKAGES.values())} "
            "only); rehearse it on AWS (--cloud aws) with them installed in stackflow's "
            f"environment ({sys.prefix}){also}. Nothing was changed."
        )
    if found:
        raise DependencyError(
            f"{project.folder}: the program runs inline in stackflow's own Python, which does "
            "not satisfy it: "
            + "; ".join(found)
            + f". Install what it needs into stackflow's environment ({sys.prefix}), or align "
            "the project's pins with what is installed. Nothing was changed."
        )
    return notices


def _unserved_providers(found_pins: list[Pin], missing: list[tuple[str, str]]) -> list[str]:
    """The provider packages the project pins or imports that the local cloud has no plugin
    for, each with where it is first named ("pulumi-docker (requirements.txt line 3)")."""
    from stackflow.localcloud.plugin.packages import PACKAGES

    served = set(PACKAGES.values()) | _NOT_PROVIDERS
    named: dict[str, str] = {}
    for pin in found_pins:
        name = canonicalize_name(pin.requirement.name)
        if name.startswith("pulumi-") and name not in served:
            named.setdefault(name, pin.where)
    for where, module in missing:
        name = canonicalize_name(module)
        if name.startswith("pulumi-") and name not in served:
            named.setdefault(name, where)
    return [f"{name} ({where})" for name, where in named.items()]


def _pulumi_package(pin: Pin) -> bool:
    name = canonicalize_name(pin.requirement.name)
    return name == "pulumi" or name.startswith("pulumi-")


def _imported_by_program(pin: Pin, used: set[str], provided: Mapping[str, Sequence[str]]) -> bool:
    """Whether the program imports a module of the pinned distribution (`provided`: module ->
    the installed distributions that provide it; for one not installed here, a module named as
    the distribution is)."""
    name = canonicalize_name(pin.requirement.name)
    modules = {m for m, dists in provided.items() if name in map(canonicalize_name, dists)}
    return bool(used & (modules or {name.replace("-", "_")}))


def _unmet(pin: Pin) -> tuple[str, str]:
    """(why the pin is unmet, or ""; the notice of a Pulumi package run at another version of
    the same major, or "")."""
    req = pin.requirement
    if req.marker is not None and not req.marker.evaluate():
        return "", ""
    try:
        have = installed_version(req.name)
    except PackageNotFoundError:
        return f"{pin.where}: {pin.text} is not installed", ""
    if req.specifier.contains(have, prereleases=True):
        return "", ""
    if _pulumi_package(pin) and _same_major(req.specifier, have):
        return "", (
            f"{pin.where} pins {pin.text}; it runs with the installed {req.name} {have} "
            "(the same major version)"
        )
    why = _SERVED.get(canonicalize_name(req.name), "")
    because = f"; {why.format(version=have)}" if why else ""
    return f"{pin.where} pins {pin.text}, and {req.name} {have} is installed{because}", ""


def _same_major(specifier: SpecifierSet, have: str) -> bool:
    """Whether `specifier` accepts some version of `have`'s major (3.228.0 for 3.259.0)."""
    major = Version(have).major
    candidates = [Version(f"{major}.0.0")]
    for clause in specifier:
        try:
            candidates.append(Version(clause.version.rstrip(".*")))
        except InvalidVersion:
            continue
    return any(v.major == major and specifier.contains(v, prereleases=True) for v in candidates)


def pins(project: PulumiProject) -> list[Pin]:
    """The requirements of requirements.txt (and the files its `-r` lines name) and of
    pyproject.toml ([project] dependencies, [tool.poetry.dependencies])."""
    found: list[Pin] = []
    requirements = project.folder / "requirements.txt"
    if requirements.is_file():
        found += _requirements_file(requirements, project.folder, set())
    pyproject = project.folder / "pyproject.toml"
    if pyproject.is_file():
        found += _pyproject(pyproject)
    return found


def _requirements_file(path: Path, root: Path, seen: set[Path]) -> list[Pin]:
    if path in seen:
        return []
    seen.add(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DependencyError(f"{path}: cannot be read ({exc})") from None
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    found: list[Pin] = []
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            included = (path.parent / line.split(None, 1)[1].strip()).resolve()
            found += _requirements_file(included, root, seen)
            continue
        if line.startswith("-") or line.startswith((".", "/")) or "://" in line.split("@")[0]:
            continue  # pip options, constraints, editable installs and local paths pin nothing
        try:
            found.append(Pin(Requirement(line), f"{shown} line {number}", line))
        except InvalidRequirement as exc:
            raise DependencyError(
                f"{path}, line {number}: not a requirement ({exc}). Nothing was changed."
            ) from None
    return found


def _pyproject(path: Path) -> list[Pin]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DependencyError(f"{path}: cannot be read as TOML ({exc})") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise DependencyError(f"{path}: cannot be read as TOML (nested too deep)") from None
    found: list[Pin] = []
    for text in data.get("project", {}).get("dependencies", []) or []:
        try:
            where = "pyproject.toml [project] dependencies"
            found.append(Pin(Requirement(str(text)), where, str(text)))
        except InvalidRequirement as exc:
            raise DependencyError(
                f"{path}: dependency {text!r} is not a requirement ({exc})"
            ) from None
    poetry = data.get("tool", {}).get("poetry", {}).get("dependencies", {}) or {}
    for name, spec in poetry.items():
        if name.lower() == "python":
            continue
        wanted = spec.get("version", "*") if isinstance(spec, dict) else str(spec)
        where = "pyproject.toml [tool.poetry.dependencies]"
        try:
            requirement = Requirement(f"{name}{_poetry_specifier(wanted)}")
            found.append(Pin(requirement, where, f"{name} = {wanted!r}"))
        except (InvalidRequirement, InvalidSpecifier, ValueError):
            raise DependencyError(
                f"{path}: {name} = {wanted!r} is not a version constraint"
            ) from None
    return found


def _poetry_specifier(constraint: str) -> str:
    """Poetry's `^1.2`, `~1.2`, `1.2.3`, `*` as a PEP 440 specifier."""
    parts = [c.strip() for c in constraint.split(",") if c.strip()]
    out: list[str] = []
    for part in parts:
        if part == "*":
            continue
        if part[0] in "^~" and part[1:2] != "=":
            numbers = [int(n) for n in part[1:].split(".")]
            out.append(f">={part[1:]}")
            if part[0] == "^":
                first = next((i for i, n in enumerate(numbers) if n), len(numbers) - 1)
            else:
                first = min(1, len(numbers) - 1)
            upper = [*numbers[:first], numbers[first] + 1]
            out.append(f"<{'.'.join(map(str, upper))}")
        elif part[0].isdigit():
            out.append(f"=={part}")
        else:
            out.append(part)
    specifier = ",".join(out)
    SpecifierSet(specifier)  # InvalidSpecifier: refused by the caller
    return specifier


def imported_modules(project: PulumiProject) -> set[str]:
    """Every top-level module the program's code imports (the project's own included)."""
    found: set[str] = set()
    for path in _sources(project.program_dir):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):
            continue  # `imports` names the file that is not valid Python
        found |= {module.split(".")[0] for _, module in _imported(tree, guarded_too=True)}
    return found


def imports(project: PulumiProject) -> list[tuple[str, str]]:
    """(file and line, module) for each top-level module the program's code imports that is
    neither the standard library, a module of the project's own, nor importable here. Imports
    inside a `try` (optional ones) are left out."""
    folder = project.program_dir
    local = _local_modules(folder)
    missing: list[tuple[str, str]] = []
    for path in _sources(folder):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            raise DependencyError(
                f"{path}{f', line {line}' if line else ''}: not valid Python ({exc}). "
                "Nothing was changed."
            ) from None
        for node, module in _imported(tree):
            top = module.split(".")[0]
            if top in local or top in sys.stdlib_module_names or top == "__future__":
                continue
            if importlib.util.find_spec(top) is None:
                missing.append((f"{path.relative_to(project.folder)} line {node.lineno}", top))
    return missing


def shadowed(project: PulumiProject) -> list[str]:
    """The project's own top-level modules whose names stackflow's Python has already loaded
    from elsewhere: `import <name>` in the program would get that one, not the project's."""
    folder = project.program_dir
    found = []
    for name in sorted(_local_modules(folder)):
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None) if module is not None else None
        if file and not Path(file).resolve().is_relative_to(folder):
            found.append(
                f"its module {name} has the name of one stackflow's Python has loaded ({file}); "
                "rename the project's"
            )
    return found


def _local_modules(folder: Path) -> set[str]:
    """The names the program's folder gives its own top-level modules and packages."""
    return {p.stem for p in folder.glob("*.py") if p.stem != "__main__"} | {
        p.name
        for p in folder.iterdir()
        if p.is_dir()
        and p.name not in _SKIPPED_DIRS
        and not p.name.startswith(".")
        and any(p.glob("*.py"))  # a package (a folder of assets is none)
    }


def _sources(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*.py")):
        inside = path.relative_to(folder).parts[:-1]
        if not any(part in _SKIPPED_DIRS or part.startswith(".") for part in inside):
            yield path


def _imported(tree: ast.AST, *, guarded_too: bool = False) -> Iterator[tuple[Any, str]]:
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and not guarded_too:
            guarded.update(id(inner) for part in node.body for inner in ast.walk(part))
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node, node.module
