"""The policy packs an environment names, read once per run: each pack's files (what is hashed is
what runs), its digest, and the config that tells Pulumi how each rule is enforced.

A pack is what `pulumi policy new aws-python` makes: a folder with a `PulumiPolicy.yaml` whose
runtime is python, a `__main__.py` that builds a `PolicyPack`, and a `requirements.txt`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml  # type: ignore[import-untyped]

from stackflow.errors import SettingsError

PACK_FILE = "PulumiPolicy.yaml"
ENTRY = "__main__.py"
REQUIREMENTS = "requirements.txt"
CONSTRAINTS = Path(__file__).with_name("constraints.txt")
# What a pack's folder may hold that is not the pack: virtualenvs, caches, version control.
NOT_THE_PACK = frozenset(
    {"venv", ".venv", "__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
MAX_FILES = 500  # a pack is a few files; more means the folder holds something else


class PolicyPackError(SettingsError):
    """A policy pack that cannot run: missing, not a Python pack, or a setting naming a rule no
    pack has. Raised before anything runs."""


@dataclass(frozen=True)
class PackSource:
    """One pack as read: its folder and files (relative path -> bytes)."""

    folder: Path
    files: Mapping[str, bytes] = field(repr=False)

    @property
    def label(self) -> str:
        return self.folder.name

    @property
    def requirements(self) -> bytes:
        """Its requirements.txt (empty: pulumi-policy alone)."""
        return self.files.get(REQUIREMENTS, b"")

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return h.hexdigest()

    def manifest(self) -> dict[str, Any]:
        """Its PulumiPolicy.yaml as data."""
        loaded = yaml.safe_load(self.files[PACK_FILE]) or {}
        return loaded if isinstance(loaded, dict) else {}


@dataclass(frozen=True)
class PolicySet:
    """The packs one environment runs and how their rules are enforced there."""

    packs: tuple[PackSource, ...]
    enforcement: str  # mandatory, advisory, or pack (each rule as its pack says)
    levels: Mapping[str, str] = field(default_factory=dict)
    disabled: Mapping[str, str] = field(default_factory=dict)  # rule -> why
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def pack_config(self) -> dict[str, Any]:
        """The `--policy-pack-config` every pack gets, in Pulumi's format: `all` for the
        environment's level, then each rule's level, settings, or `disabled`."""
        found: dict[str, Any] = {}
        if self.enforcement != "pack":
            found["all"] = self.enforcement
        for rule in sorted(set(self.levels) | set(self.config)):
            properties = dict(self.config.get(rule, {}))
            if rule in self.levels:
                properties["enforcementLevel"] = self.levels[rule]
            found[rule] = properties
        found.update({rule: "disabled" for rule in sorted(self.disabled)})
        return found

    @property
    def digest(self) -> str:
        """What a stack's fingerprint takes of its policies: every pack's files, the config,
        and the pinned versions their virtualenvs get (a new rule reaches a skipped stack)."""
        h = hashlib.sha256()
        for pack in self.packs:
            h.update(pack.digest.encode())
        h.update(json.dumps(self.pack_config(), sort_keys=True).encode())
        h.update(CONSTRAINTS.read_bytes())
        return h.hexdigest()

    def as_dict(self) -> dict[str, Any]:
        """How the summary, the plan and the records show them (the reasons included)."""
        return {
            "packs": [p.label for p in self.packs],
            "enforcement": self.enforcement,
            "levels": dict(self.levels),
            "disabled": dict(self.disabled),
        }


class Chosen(Protocol):
    """An environment's [policy] settings as a policy set reads them
    (`stackflow.config.policy.PolicySettings`, which the settings build on this module)."""

    @property
    def packs(self) -> Sequence[Path]: ...

    @property
    def enforcement(self) -> str | None: ...

    @property
    def levels(self) -> Mapping[str, str]: ...

    @property
    def disabled(self) -> Mapping[str, str]: ...

    @property
    def config(self) -> Mapping[str, Mapping[str, Any]]: ...


def resolve(
    chosen: Chosen, project_dir: Path, named_in: str | None, kind_enforcement: str
) -> PolicySet | None:
    """An environment's policy set (None: its [policy] names no packs): each pack read (a
    relative folder is the project's), at the level its settings or else its kind give.

    Args:
        chosen: the environment's [policy] settings.
        project_dir: the project's folder, which a relative pack folder is under.
        named_in: the file that names the packs (for errors).
        kind_enforcement: the enforcement its environment kind gives by default.

    Raises:
        PolicyPackError: a pack folder that is missing or not a Python policy pack.
    """
    if not chosen.packs:
        return None
    packs = tuple(read_pack(project_dir / f, named_in) for f in chosen.packs)
    enforcement = chosen.enforcement or kind_enforcement
    return PolicySet(packs, enforcement, chosen.levels, chosen.disabled, chosen.config)


def read_pack(folder: Path, named_in: str | None = None) -> PackSource:
    """One pack's files, checked: a folder with a PulumiPolicy.yaml of the python runtime and a
    __main__.py.

    Raises:
        PolicyPackError: naming the folder, what is wrong and what a pack holds.
    """
    where = f"[policy] packs in {named_in or 'the environment file'}"
    if not (folder / PACK_FILE).is_file():
        raise PolicyPackError(
            f"{where}: {folder} is not a policy pack (no {PACK_FILE}); a pack is a folder "
            f"holding {PACK_FILE}, {ENTRY} and {REQUIREMENTS}, as `pulumi policy new "
            "aws-python` makes one. Nothing was changed."
        )
    files: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_dir() or NOT_THE_PACK & set(relative.parts) or path.suffix == ".pyc":
            continue
        files[relative.as_posix()] = path.read_bytes()
        if len(files) > MAX_FILES:
            raise PolicyPackError(
                f"{where}: {folder} holds more than {MAX_FILES} files; a pack holds its policy "
                "code only. Nothing was changed."
            )
    pack = PackSource(folder, files)
    try:
        runtime = pack.manifest().get("runtime")
    except yaml.YAMLError as exc:
        raise PolicyPackError(f"{where}: {folder / PACK_FILE} is not YAML ({exc})") from None
    name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if name != "python":
        raise PolicyPackError(
            f"{where}: {folder} is a {name or 'runtime-less'} policy pack; stackflow runs Python "
            "packs (runtime: python in its PulumiPolicy.yaml). Nothing was changed."
        )
    if ENTRY not in files:
        raise PolicyPackError(
            f"{where}: {folder} has no {ENTRY}, where a Python pack builds its PolicyPack. "
            "Nothing was changed."
        )
    return pack
