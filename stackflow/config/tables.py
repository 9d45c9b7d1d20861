"""The README's settings tables, generated from the models and their homes (docs follow code)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stackflow import PROJECT_ROOT
from stackflow.config.model import Settings
from stackflow.config.sections import SECTIONS
from stackflow.config.sources import ENVIRONMENT, HOMES, MACHINE, PROJECT, Key, dotted, variable

Row = tuple[str, str, str]  # (name, default, description)


def _field(key: Key) -> Any:
    model: type[BaseModel] = SECTIONS[key[0]] if len(key) == 2 else Settings
    return model.model_fields[key[-1]]


def _default(key: Key) -> str:
    info = _field(key)
    default: Any = info.default
    if info.default_factory is not None:
        default = info.default_factory()
    if isinstance(default, Path):
        default = str(default).replace(str(PROJECT_ROOT), ".")
    if default is None:
        return ""
    return json.dumps(default) if isinstance(default, list | dict) else str(default)


def _file_key(key: Key) -> str:
    return f"[{key[0]}] {key[1]}" if len(key) == 2 else key[0]


def settings_rows(home: str) -> list[Row]:
    """Every setting of one home: `environment` (file keys), `project` (stackflow.toml keys) or
    `machine` (variables)."""
    rows = []
    for key, homes in HOMES.items():
        if home not in homes:
            continue
        name = variable(key) if home == MACHINE else _file_key(key)
        description = _field(key).description or ""
        if home == PROJECT and MACHINE in homes:
            description += f" This machine may override it: {variable(key)}."
        rows.append((name, _default(key), description))
    return rows


HOMES_IN_ORDER = (ENVIRONMENT, PROJECT, MACHINE)


def settings_table() -> list[Row]:
    """Every setting, each under the name its home uses (for tests that want them all)."""
    return [row for home in HOMES_IN_ORDER for row in settings_rows(home)]


__all__ = ["HOMES_IN_ORDER", "dotted", "settings_rows", "settings_table"]
