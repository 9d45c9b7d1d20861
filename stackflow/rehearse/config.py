"""A rehearsed project's config, as `pulumi up` would give it to the program: the values its
Pulumi.yaml declares under `config` (a value or a `default`), then its Pulumi.<stack>.yaml's
(secure values decrypted with the project's passphrase, and kept secret). The engine sets them on
stackflow's own copy of the stack; the project's files are only read.

Values reach the program as Pulumi passes them: text, with `true`/`false` for booleans and JSON for
lists and objects (what `Config.get_bool`, `get_int` and `get_object` read).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from stackflow.engine.base import ConfigValue
from stackflow.errors import echo
from stackflow.rehearse.project import ProjectError, PulumiProject, load_yaml
from stackflow.rehearse.secrets import decrypter, passphrase_from

# The keys that make a Pulumi.yaml `config` entry a declaration rather than a value.
_DECLARATION = frozenset({"type", "description", "default", "value", "secret", "items"})
_SECURE = "secure"


def project_config(
    project: PulumiProject, stack: str, environ: Mapping[str, str]
) -> dict[str, ConfigValue]:
    """The config of `stack`: project defaults, then the stack file's values (which win).

    Args:
        environ: where the project's passphrase is read (PULUMI_CONFIG_PASSPHRASE or _FILE),
            needed only when the stack file holds secure values.

    Raises:
        ProjectError: a key without its namespace, an ESC environment, a file that is not YAML.
        SecureValueError: secure values that cannot be decrypted here (naming file and keys).
    """
    config: dict[str, ConfigValue] = {}
    for key, declared in project.config.items():
        full = str(key) if ":" in str(key) else f"{project.name}:{key}"
        secret = False
        value = declared
        if isinstance(declared, Mapping) and _DECLARATION & set(declared):
            value = declared.get("value", declared.get("default"))
            secret = bool(declared.get("secret"))
        if value is not None:
            config[full] = ConfigValue(text(value), secret=secret)
    config.update(_stack_values(project, stack, environ))
    return config


def _stack_values(
    project: PulumiProject, stack: str, environ: Mapping[str, str]
) -> dict[str, ConfigValue]:
    path = project.stack_file(stack)
    if not path.is_file():
        return {}
    data = load_yaml(path) or {}
    if not isinstance(data, Mapping):
        raise ProjectError(f"{path}: not a Pulumi stack file (expected `config:`)")
    if data.get("environment"):
        raise ProjectError(
            f"{path}: environment: imports Pulumi ESC environments, which need Pulumi Cloud; "
            "give their values under config: instead. Nothing was changed."
        )
    values = data.get("config") or {}
    if not isinstance(values, Mapping):
        raise ProjectError(f"{path}: config must be a mapping of keys to values")
    bare = [str(k) for k in values if str(k).count(":") not in (1, 2)]
    if bare:
        raise ProjectError(
            f"{path}: config key {', '.join(echo(k) for k in bare)} has no namespace; accepted: "
            f"<namespace>:<name>, e.g. {project.name}:{bare[0]} or aws:region (as `pulumi` "
            "requires in a stack file). Nothing was changed."
        )
    secure = [str(k) for k, v in values.items() if _holds_secure(v)]
    decrypt: Callable[[str], str] | None = None
    if secure:
        decrypt = decrypter(path, data, secure, passphrase_from(environ))
    found: dict[str, ConfigValue] = {}
    for key, value in values.items():
        if value is None:
            continue
        opened = _opened(value, decrypt) if decrypt is not None else value
        found[str(key)] = ConfigValue(text(opened), secret=str(key) in secure)
    return found


def _holds_secure(value: Any) -> bool:
    if isinstance(value, Mapping):
        if set(value) == {_SECURE}:
            return True
        return any(_holds_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_secure(v) for v in value)
    return False


def _opened(value: Any, decrypt: Callable[[str], str]) -> Any:
    """`value` with every `{secure: ...}` inside it replaced by its plaintext."""
    if isinstance(value, Mapping):
        if set(value) == {_SECURE}:
            return decrypt(str(value[_SECURE]))
        return {k: _opened(v, decrypt) for k, v in value.items()}
    if isinstance(value, list):
        return [_opened(v, decrypt) for v in value]
    return value


def text(value: Any) -> str:
    """A config value as Pulumi hands it to a program."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping | list):
        return json.dumps(value, default=str)
    return str(value)
