"""`get_settings`: one environment's settings from its file, the project file, this machine's
variables and explicit arguments; every bad value reported at once, naming where it was set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stackflow import PROJECT_ROOT
from stackflow.backends import mask_url, url_secrets
from stackflow.config.kinds import validate_environment_name
from stackflow.config.machine import (
    default_dotenv,
    machine_layer,
    machine_variables,
    stray_variables,
)
from stackflow.config.model import Settings, SettingsSource
from stackflow.config.sections import SECTIONS, GitSettings
from stackflow.config.sources import (
    SECRET_KEYS,
    URL_KEYS,
    Key,
    Layer,
    dotted,
    environment_layer,
    merge,
    project_layer,
    variable,
)
from stackflow.errors import SettingsError, echo
from stackflow.redact import MASK

ARGUMENT = "argument"


def _argument_layer(arguments: Mapping[str, Any], labels: Mapping[str, str]) -> Layer:
    layer = Layer()
    for name, value in arguments.items():
        if name in SECTIONS and isinstance(value, Mapping):
            for field, inner in value.items():
                layer.set((name, field), inner, labels.get(name, f"{ARGUMENT} {name}.{field}"))
        else:
            layer.set((name,), value, labels.get(name, f"{ARGUMENT} {name}"))
    return layer


def _shown(key: Key, value: Any) -> str:
    if key in SECRET_KEYS:
        return MASK
    if key in URL_KEYS and isinstance(value, str):
        return mask_url(value)
    return str(value)


def _format(exc: ValidationError, origins: Mapping[Key, str]) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = tuple(str(p) for p in err.get("loc", ()) if isinstance(p, str))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "string_pattern_mismatch" and loc:
            model = SECTIONS.get(loc[0]) if len(loc) == 2 else Settings
            info = model.model_fields.get(loc[-1]) if model is not None else None
            if info is not None and info.description:
                msg = f"not accepted; accepted: {info.description}"
        if err.get("type") == "extra_forbidden" and loc:
            msg = "not a setting"
        key = loc[:2] if loc and loc[0] in SECTIONS else loc[:1]
        origin = origins.get(key)
        if origin is None and key:
            origin = dotted(key)
        lines.append(f"{origin}: {msg}" if origin else msg)
    return lines


def get_settings(
    environment: str | None = None,
    cloud: str | None = None,
    *,
    project_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    strict: bool = True,
    **overrides: Any,
) -> Settings:
    """Read and validate the settings of one environment.

    Args:
        environment: the environment (the CLI's --env, the flow's parameter); default "dev".
        cloud: where to deploy, when not what the environment's file says (the CLI's --cloud).
        project_dir: the project (stackflow.toml, environments/); default STACKFLOW_PROJECT_DIR,
            else the checkout stackflow runs from.
        environ: the variables to read (default: this process's).
        strict: refuse variables that name settings they may not set (the CLI); with False they
            are ignored and listed in `settings.source.ignored` (a flow run says so in its log).
        overrides: explicit values for any setting, sections as dicts (programs and tests).

    Raises:
        SettingsError: one line per problem, naming the file and key, the variable, or the
            argument, and what is accepted; secrets and passwords are never repeated.
    """
    env = os.environ if environ is None else environ
    found = machine_variables(env, default_dotenv())
    stray = stray_variables(found)
    if strict and stray:
        raise SettingsError("invalid settings:\n  " + "\n  ".join(stray))
    machine = machine_layer(found)
    labels = {"environment": "environment (--env)"}
    arguments = dict(overrides)
    if environment is not None:
        arguments["environment"] = environment
    if cloud is not None:
        arguments["cloud"] = cloud
    if project_dir is not None:
        arguments["project_dir"] = project_dir
    given = _argument_layer(arguments, labels)

    # Where the project is comes first: its files hold everything else.
    if arguments.get("project_dir"):
        chosen_dir, named = arguments["project_dir"], "the project folder given"
    elif machine.values.get("project_dir"):
        chosen_dir, named = machine.values["project_dir"], "STACKFLOW_PROJECT_DIR"
    else:
        chosen_dir, named = PROJECT_ROOT, "the checkout's folder"
    root = project_root(Path(chosen_dir), named)
    project, project_file = project_layer(root)
    _refuse_committed_passwords(project)
    name = str(arguments.get("environment", "dev"))
    try:
        validate_environment_name(name)
    except ValueError as exc:
        raise SettingsError(f"invalid settings:\n  environment (--env): {exc}") from None
    env_layer, env_file, template = environment_layer(root, name)  # UnknownEnvironment: as is

    merged = merge([project, env_layer, machine, given])
    merged.set(("project_dir",), root, merged.origins.get(("project_dir",), "project folder"))
    overridden = {
        dotted(k): f"{_shown(k, _value(merged.values, k))} ({o})"
        for k, o in merged.origins.items()
        if ".toml: " not in o and k not in (("environment",), ("project_dir",))
    }
    source = SettingsSource(
        project_dir=str(root),
        project_file=str(project_file) if project_file else None,
        environment_file=str(env_file.relative_to(root))
        if env_file and env_file.is_relative_to(root)
        else str(env_file),
        template=template,
        overrides=overridden,
        ignored=tuple(stray),
    )
    try:
        return Settings(**merged.values, source=source)
    except ValidationError as exc:
        raise SettingsError(
            "invalid settings:\n  " + "\n  ".join(_format(exc, merged.origins))
        ) from None


class ProjectFolderError(SettingsError):
    """The project folder (STACKFLOW_PROJECT_DIR) is not a folder this machine can read."""


def project_root(chosen: Path, named: str) -> Path:
    """The project folder `chosen`, resolved, once it is shown to be a folder.

    Args:
        named: where it came from, as the error names it (STACKFLOW_PROJECT_DIR).

    Raises:
        ProjectFolderError: it does not exist, is not a folder, or its path is longer than the
            system takes; naming `named`, the path (cut short) and what to do.
    """
    shown = f"{named}={echo(str(chosen))}"
    what_to_do = "set STACKFLOW_PROJECT_DIR to the project's folder (the one with stackflow.toml "
    what_to_do += "and environments/), or unset it to use this checkout"
    try:
        root = chosen.expanduser().resolve()
        is_dir, exists = root.is_dir(), root.exists()
    except OSError as exc:  # a path longer than the system takes, a loop of links
        why = exc.strerror or str(exc)
        raise ProjectFolderError(
            f"{shown} cannot be used as the project folder ({why}; {len(str(chosen))} "
            "characters). Nothing was changed.",
            what_to_do=what_to_do,
        ) from None
    except RuntimeError:  # a loop of links on older Pythons
        raise ProjectFolderError(
            f"{shown} cannot be used as the project folder (a loop of links). Nothing was changed.",
            what_to_do=what_to_do,
        ) from None
    if not is_dir:
        what = "is a file, not a folder" if exists else "names no folder"
        raise ProjectFolderError(
            f"{shown} {what}: the project folder holds stackflow.toml and environments/. "
            "Nothing was changed.",
            what_to_do=what_to_do,
        )
    return root


def _refuse_committed_passwords(project: Layer) -> None:
    """A URL in the project file holds no password: the file is committed with the project.

    Raises:
        SettingsError: naming the file and key, and the variable that takes the URL instead.
    """
    problems = [
        f"{project.origins[key]}: holds a password, and this file is committed with the project; "
        f"take the URL out of it and set {variable(key)} to the whole URL on each machine (or in "
        "its .env) instead. Nothing was changed."
        for key in sorted(URL_KEYS)
        if key in project.origins and url_secrets(str(_value(project.values, key)))
    ]
    if problems:
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems))


def _value(values: Mapping[str, Any], key: Key) -> Any:
    current: Any = values
    for part in key:
        current = current[part]
    return current


def project_git(project_dir: Path | None = None) -> GitSettings:
    """The project file's [git] section alone (what the team follows: the repository, review
    branch patterns, their interval), whatever any environment's file says.

    Raises:
        SettingsError: the project file or its [git] section is not accepted (naming the key).
    """
    root = Path(project_dir or os.environ.get("STACKFLOW_PROJECT_DIR") or PROJECT_ROOT)
    layer, _path = project_layer(root.expanduser().resolve())
    try:
        return GitSettings(**layer.values.get("git", {}))
    except ValidationError as exc:
        raise SettingsError(
            "invalid settings:\n  " + "\n  ".join(_format(exc, layer.origins))
        ) from None
