"""Where each setting comes from, and reading those places with errors that name them.

Three homes, one rule: what an environment deploys lives in its file in the repository, so every
run (CLI, UI, schedule, worker) deploys the same thing for it.

- `environments/<name>.toml` (or, for ephemeral names, `environments/templates/ephemeral.toml`):
  what the environment deploys: its kind, cloud, region, network, database, app, migrations
  folder, approval policy.
- `stackflow.toml` at the project's root: what the team shares: project name, backend,
  secrets provider, retry budget.
- `STACKFLOW_*` variables (and a `.env` in the working folder): what belongs to this machine:
  state folder, ports, credentials, the passphrase, timeouts, where the project is. They may
  override the project file's backend and retry settings, never an environment's.

The machine's variables are read in `stackflow.config.machine`: a variable naming an environment
setting is reported by `stray_variables` (the CLI refuses it; a flow run ignores it and says so),
never applied.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackflow.config.kinds import EPHEMERAL_FORMS, kind_of
from stackflow.config.sections import SECTIONS
from stackflow.errors import SettingsError

PREFIX = "STACKFLOW_"
PROJECT_FILE = "stackflow.toml"
ENVIRONMENTS_DIR = "environments"
TEMPLATES_DIR = "templates"

ENVIRONMENT, PROJECT, MACHINE = "environment", "project", "machine"

Key = tuple[str, ...]
"""A setting's path: ("state_dir",) or ("app", "desired_count")."""

_E, _P, _M = frozenset({ENVIRONMENT}), frozenset({PROJECT}), frozenset({MACHINE})
_PM = _P | _M

HOMES: dict[Key, frozenset[str]] = {
    ("kind",): _E,
    ("ttl_hours",): _E,
    ("cloud",): _E,
    ("project",): _P,
    ("graph",): _P,
    ("pulumi_org",): _P,
    ("backend_url",): _PM,
    ("records_url",): _PM,
    ("secrets_provider",): _PM,
    ("stack_retries",): _PM,
    ("retry_delay_s",): _PM,
    ("stall_timeout_s",): _PM,
    ("cancel_grace_s",): _PM,
    ("project_dir",): _M,
    ("state_dir",): _M,
    ("state_passphrase",): _M,
    ("pulumi_access_token",): _M,
    ("local_prefect_port",): _M,
    ("aws", "region"): _E,
    ("aws", "profile"): _M,
    ("migrations", "dir"): _E,
    ("migrations", "tls"): _E,
    ("migrations", "allow_out_of_order"): _E,
    ("migrations", "allow_missing"): _E,
    ("migrations", "strip_definer"): _E,
    ("migrations", "wait_timeout_s"): _PM,
    ("migrations", "connect_timeout_s"): _PM,
    ("migrations", "read_timeout_s"): _PM,
    ("migrations", "write_timeout_s"): _PM,
    ("migrations", "lock_timeout_s"): _PM,
    ("migrations", "retries"): _PM,
    ("migrations", "tls_ca"): _M,
    ("approval", "required"): _E,
    ("approval", "timeout_s"): _E,
    ("approval", "unprotect"): _E,
    ("approval", "exact_commit"): _E,
    ("approval", "approvers"): _E,
    ("approval", "approvals_needed"): _E,
    ("approval", "requester_may_approve"): _E,
    ("approval", "allowed_signers"): _M,  # a trusted place: never the deployed commit's files
    ("approval", "signing_key"): _M,
    ("git", "repository"): _P | _E,
    ("git", "branch"): _E,
    ("git", "interval_s"): _P | _E,
    ("git", "review_branches"): _P,
    ("git", "credentials_block"): _P,
    ("git", "max_export_mb"): _PM,
    ("git", "max_export_files"): _PM,
    ("policy", "packs"): _P | _E,
    ("policy", "enforcement"): _E,
    ("policy", "levels"): _E,
    ("policy", "disabled"): _E,
    ("policy", "config"): _P | _E,
    ("notifications", "block"): _PM,
    ("git", "notes"): _PM,
    ("localcloud", "port"): _M,
    ("localcloud", "dir"): _M,
}
# Whole sections that live in an environment's file.
for _section in ("network", "database", "app"):
    for _name in SECTIONS[_section].model_fields:
        HOMES[(_section, _name)] = _E

SECRET_KEYS: frozenset[Key] = frozenset({("state_passphrase",), ("pulumi_access_token",)})
URL_KEYS: frozenset[Key] = frozenset({("backend_url",), ("records_url",)})


def variable(key: Key) -> str:
    """The variable that names a setting: STACKFLOW_APP_DESIRED_COUNT for ("app", "desired_count")."""
    return PREFIX + "_".join(key).upper()


def dotted(key: Key) -> str:
    return ".".join(key)


def homes_of(key: Key) -> frozenset[str]:
    return HOMES.get(key, frozenset())


@dataclass
class Layer:
    """Values read from one place, and the label errors use for each of them."""

    values: dict[str, Any] = field(default_factory=dict)  # nested: {"app": {"cpu": 256}}
    origins: dict[Key, str] = field(default_factory=dict)

    def set(self, key: Key, value: Any, origin: str) -> None:
        target = self.values
        for part in key[:-1]:
            target = target.setdefault(part, {})
        target[key[-1]] = value
        self.origins[key] = origin


def merge(layers: list[Layer]) -> Layer:
    """Later layers win, key by key."""
    merged = Layer()
    for layer in layers:
        for key, origin in layer.origins.items():
            value: Any = layer.values
            for part in key:
                value = value[part]
            merged.set(key, value, origin)
    return merged


# --- files -------------------------------------------------------------------------------------


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(
            f"{shown}: not valid TOML: {exc}; fix the file. Nothing was changed."
        ) from None
    except UnicodeDecodeError:
        raise SettingsError(
            f"{shown}: not UTF-8 text; save it as UTF-8. Nothing was changed."
        ) from None
    except RecursionError:  # Python's TOML parser recurses once per level of nesting
        raise SettingsError(
            f"{shown}: arrays or tables nested too deep to read (thousands of levels); a "
            "settings file needs a few. Nothing was changed.",
            what_to_do=f"remove the deeply nested value from {shown}: each setting is a plain "
            "value, a short list or a table of them",
        ) from None
    except OSError as exc:
        raise SettingsError(f"{shown}: cannot be read ({exc.strerror or exc}).") from None


def _flatten(table: Mapping[str, Any], prefix: Key = ()) -> Iterator[tuple[Key, Any]]:
    for name, value in table.items():
        key = (*prefix, str(name))
        if isinstance(value, Mapping) and not prefix and name in SECTIONS:
            yield from _flatten(value, key)
        else:
            yield key, value


def _where_instead(key: Key) -> str:
    homes = homes_of(key)
    if MACHINE in homes and PROJECT not in homes:
        return f"it belongs to this machine: set {variable(key)}"
    if PROJECT in homes:
        return f"it belongs to the project: set it in {PROJECT_FILE}"
    return "it belongs to an environment: set it in environments/<name>.toml"


def read_file(path: Path, home: str, shown: str) -> Layer:
    """One settings file (an environment's or the project's), every key checked for its home.

    Raises:
        SettingsError: not TOML, a key that is not a setting, or a setting of another home.
    """
    layer, problems = Layer(), []
    for key, value in _flatten(_read_toml(path, shown)):
        if key not in HOMES:
            section = SECTIONS.get(key[0]) if len(key) == 2 else None
            accepted = (
                f"keys of [{key[0]}]: {', '.join(section.model_fields)}"
                if section is not None
                else "see docs/reference/settings.md"
            )
            problems.append(f"{shown}: {dotted(key)}: not a setting; accepted {accepted}")
        elif home not in homes_of(key):
            problems.append(f"{shown}: {dotted(key)}: not set here; {_where_instead(key)}")
        else:
            layer.set(key, value, f"{shown}: {dotted(key)}")
    if problems:
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems))
    return layer


class LinkRefused(SettingsError):
    """A settings file that is a link leaving the project, or an absolute one."""


def check_inside(project_dir: Path, path: Path, shown: str) -> Path:
    """`path`, when it is the project's own: not a link that is absolute or leaves the project
    (a file of the repository decides what deploys, never one elsewhere on the worker).

    Raises:
        LinkRefused: naming the file and where it points.
    """
    if path.is_symlink():
        target = os.readlink(path)
        if os.path.isabs(target):
            raise LinkRefused(
                f"{shown} is a link to an absolute path ({target}): settings files are the "
                "project's own; replace the link with the file. Nothing was changed."
            )
    try:
        inside = path.resolve().is_relative_to(project_dir.resolve())
    except (OSError, RuntimeError):  # a loop of links
        inside = False
    if not inside:
        raise LinkRefused(
            f"{shown} leads outside the project ({project_dir}) through a link: settings files "
            "are the project's own; replace the link with the file. Nothing was changed."
        )
    return path


def project_layer(project_dir: Path) -> tuple[Layer, Path | None]:
    """The project file's settings ({} when the project has no stackflow.toml).

    Raises:
        SettingsError: the file is not accepted; LinkRefused: it is a link leaving the project.
    """
    path = project_dir / PROJECT_FILE
    if not path.is_file() and not path.is_symlink():
        return Layer(), None
    check_inside(project_dir, path, PROJECT_FILE)
    return read_file(path, PROJECT, PROJECT_FILE), path


def declared_environments(project_dir: Path) -> list[str]:
    """The environments the project declares: one file each under environments/."""
    folder = project_dir / ENVIRONMENTS_DIR
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


class UnknownEnvironment(SettingsError):
    """An environment the project declares no file (or template) for."""


def environment_file(project_dir: Path, name: str) -> tuple[Path, bool]:
    """The file that says what `name` deploys, and whether it is its kind's template.

    A name the project declares has its own file; any other name takes the template of the kind
    it implies, where the project has one (this repository has one for ephemeral names only, so
    a typo never deploys a new environment; add templates/dev.toml to allow dev-<anything>).

    Raises:
        UnknownEnvironment: naming the environment, the file to add and what is declared.
        LinkRefused: the file is a link that is absolute or leaves the project.
    """
    folder = project_dir / ENVIRONMENTS_DIR
    declared = folder / f"{name}.toml"
    if declared.is_file() or declared.is_symlink():
        return check_inside(project_dir, declared, f"{ENVIRONMENTS_DIR}/{name}.toml"), False
    template = folder / TEMPLATES_DIR / f"{kind_of(name).value}.toml"
    if template.is_file() or template.is_symlink():
        shown = f"{ENVIRONMENTS_DIR}/{TEMPLATES_DIR}/{template.name}"
        return check_inside(project_dir, template, shown), True
    known = ", ".join(declared_environments(project_dir)) or "none"
    kinds = sorted(p.stem for p in (folder / TEMPLATES_DIR).glob("*.toml"))
    forms = {"ephemeral": f"ephemeral names ({EPHEMERAL_FORMS})"}
    templated = "; ".join(
        f"{forms.get(k, f'{k} names')} use {ENVIRONMENTS_DIR}/{TEMPLATES_DIR}/{k}.toml"
        for k in kinds
    )
    raise UnknownEnvironment(
        f"environment {name!r} is not declared: add {ENVIRONMENTS_DIR}/{name}.toml to the project "
        f"({project_dir}) saying what it deploys. Declared: {known}"
        + (f"; {templated}" if templated else "")
        + ". Nothing was changed."
    )


def environment_layer(project_dir: Path, name: str) -> tuple[Layer, Path, bool]:
    path, template = environment_file(project_dir, name)
    shown = str(path.relative_to(project_dir)) if path.is_relative_to(project_dir) else str(path)
    return read_file(path, ENVIRONMENT, shown), path, template
