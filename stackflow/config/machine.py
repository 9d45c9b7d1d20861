"""This machine's settings: `STACKFLOW_*` variables and a `.env` in the working folder, which set
only what belongs to the machine (see `stackflow.config.sources`), and the variables that name a
setting they may not set (reported by `stray_variables`, never applied)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from stackflow.config.sources import (
    ENVIRONMENT,
    HOMES,
    MACHINE,
    PREFIX,
    PROJECT_FILE,
    Key,
    Layer,
    dotted,
    homes_of,
    variable,
)
from stackflow.errors import SettingsError


def _dotenv(path: Path) -> dict[str, tuple[str, int]]:
    """STACKFLOW_* lines of a `.env` file: name -> (value, line).

    Raises:
        SettingsError: the file is not UTF-8 or a line cannot be parsed (naming the line).
    """
    from dotenv.parser import parse_stream

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SettingsError(
            f"{path}, line {line}: not UTF-8 text; save it as UTF-8. Nothing was changed, and "
            "no setting of that file was used."
        ) from None
    import io

    found: dict[str, tuple[str, int]] = {}
    for binding in parse_stream(io.StringIO(text)):
        line = binding.original.line
        if binding.error:
            raise SettingsError(
                f"{path}, line {line}: cannot be parsed (an unterminated quote?); fix the line. "
                "Nothing was changed, and no setting of that file was used."
            )
        if binding.key and binding.key.startswith(PREFIX):
            found[binding.key] = (binding.value or "", line)
    return found


def machine_variables(
    environ: Mapping[str, str], dotenv: Path | None
) -> dict[str, tuple[str, str]]:
    """STACKFLOW_* variables of this machine: name -> (value, where it was set); the process
    environment wins over `.env`."""
    found: dict[str, tuple[str, str]] = {}
    if dotenv is not None and dotenv.is_file():
        for name, (value, line) in _dotenv(dotenv).items():
            found[name] = (value, f"{dotenv.name} line {line}: {name}")
    for name, value in environ.items():
        if name.startswith(PREFIX):
            found[name] = (value, name)
    return found


_BY_VARIABLE: dict[str, Key] = {variable(k): k for k in HOMES}
_RETIRED_HINT = (
    "no longer a setting (the simulated engine was retired; every run uses the real Pulumi "
    "engine). Latency, faults and drift are rehearsed on the local cloud (see "
    "docs/guides/local-cloud.md); remove the variable"
)


def machine_layer(found: Mapping[str, tuple[str, str]]) -> Layer:
    """The settings this machine's variables may set."""
    layer = Layer()
    for name, (value, origin) in found.items():
        key = _BY_VARIABLE.get(name)
        if key is not None and MACHINE in homes_of(key):
            layer.set(key, value, origin)
    return layer


def stray_variables(found: Mapping[str, tuple[str, str]]) -> list[str]:
    """One message per variable that names a setting variables may not set (or a retired one)."""
    problems = []
    for name, (value, origin) in sorted(found.items()):
        key = _BY_VARIABLE.get(name)
        if name.startswith(f"{PREFIX}SIM_"):
            problems.append(f"{origin}: {_RETIRED_HINT}")
        elif name == f"{PREFIX}ENGINE":
            if value.strip().lower() != "automation":
                problems.append(
                    f"{origin}: no longer accepted (the simulated engine was retired; every run "
                    "uses the real Pulumi engine); remove it. Where runs deploy is the "
                    "environment file's `cloud` (or --cloud local|aws)"
                )
        elif name in (f"{PREFIX}ENVIRONMENT",):
            problems.append(
                f"{origin}: not a setting: choose the environment with --env (the command line) "
                "or the flow's environment parameter"
            )
        elif key is not None and MACHINE not in homes_of(key):
            where = f"`{dotted(key[1:])}` under [{key[0]}]" if len(key) == 2 else f"`{dotted(key)}`"
            home = "environments/<name>.toml" if ENVIRONMENT in homes_of(key) else PROJECT_FILE
            problems.append(
                f"{origin}: variables set only what belongs to this machine; set {where} in "
                f"{home} instead (what an environment deploys lives in the repository), and "
                "remove the variable"
            )
    return problems


def default_dotenv() -> Path | None:
    path = Path(os.getcwd()) / ".env"
    return path if path.is_file() else None
