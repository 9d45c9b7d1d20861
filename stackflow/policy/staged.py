"""What the CLI is given for an environment's packs: a copy of each pack as it was read (the files
its fingerprint hashed), whose PulumiPolicy.yaml points at the pack's virtualenv, the rules each
declares, and the config file saying how each rule is enforced.

Through the copy the pack runs the same whichever way the CLI starts it: through the
`pulumi-analyzer-policy-python` plugin (`-virtualenv=<its virtualenv>`), or through a Python
language host where one is installed beside the CLI, which reads the same option. The pack's own
folder is never written to.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from stackflow.policy.packs import PACK_FILE, PackSource, PolicyPackError, PolicySet
from stackflow.policy.venv import ensure_venv
from stackflow.processes import clean_environment
from stackflow.state import private_folder

INTROSPECT = Path(__file__).with_name("introspect.py")
INTROSPECT_TIMEOUT_S = 120


@dataclass(frozen=True)
class Rule:
    """A rule a pack declares, at the level its code gives it."""

    pack: str
    name: str
    level: str
    description: str = ""


@dataclass(frozen=True)
class PreparedPolicies:
    """The staged packs and the config file, as `pulumi preview/up` takes them."""

    folders: tuple[Path, ...]
    config_file: Path
    rules: tuple[Rule, ...]

    def options(self) -> dict[str, Any]:
        """The Automation API's `policy_packs` and `policy_pack_configs` (one config per pack)."""
        return {
            "policy_packs": [str(f) for f in self.folders],
            "policy_pack_configs": [str(self.config_file)] * len(self.folders),
        }


def prepare(policies: PolicySet, root: Path, say: Callable[[str], None]) -> PreparedPolicies:
    """Make each pack's virtualenv, stage it, read its rules, and write the config; idempotent
    and cheap once done (every piece is kept by content).

    Raises:
        PolicyPackError: a virtualenv pip could not make, a pack that does not start, or a
            setting ([policy] levels, disabled, config) naming a rule no pack declares.
    """
    private_folder(root)
    folders, rules = [], []
    for pack in policies.packs:
        venv = ensure_venv(pack.requirements, pack.label, say)
        folder = stage(pack, venv, root)
        folders.append(folder)
        rules.extend(rules_of(folder, venv, pack.label))
    _check_names(policies, rules)
    config_file = root / f"config-{policies.digest[:16]}.json"
    if not config_file.is_file():
        _write(config_file, json.dumps(policies.pack_config(), indent=2, sort_keys=True).encode())
    return PreparedPolicies(tuple(folders), config_file, tuple(rules))


def stage(pack: PackSource, venv: Path, root: Path) -> Path:
    """The copy of `pack` the CLI runs (made once per content and virtualenv)."""
    target = root / "packs" / f"{pack.label}-{pack.digest[:12]}-{venv.name}"
    if (target / PACK_FILE).is_file():
        return target
    scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    for name, content in pack.files.items():
        path = scratch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    manifest = pack.manifest()
    runtime = manifest.get("runtime")
    options = dict(runtime.get("options") or {}) if isinstance(runtime, dict) else {}
    options["virtualenv"] = str(venv)  # the pack's virtualenv, whichever the CLI starts it by
    manifest["runtime"] = {"name": "python", "options": options}
    (scratch / PACK_FILE).write_text(yaml.safe_dump(manifest, sort_keys=False))
    try:
        scratch.rename(target)
    except OSError:  # another run staged the same content first
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def rules_of(folder: Path, venv: Path, label: str) -> list[Rule]:
    """The rules a staged pack declares, read once by running its `__main__.py` in its
    virtualenv with pulumi-policy's PolicyPack recording instead of serving.

    Raises:
        PolicyPackError: the pack's code failed (its error's last lines).
    """
    cache = folder.with_name(folder.name + ".rules.json")
    if not cache.is_file():
        try:
            done = subprocess.run(
                [str(venv / "bin" / "python"), str(INTROSPECT), str(folder)],
                capture_output=True,
                text=True,
                env=clean_environment(),
                timeout=INTROSPECT_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise PolicyPackError(
                f"policy pack {label}: its __main__.py did not finish within "
                f"{INTROSPECT_TIMEOUT_S}s when its rules were read"
            ) from None
        if done.returncode != 0:
            last = " ".join(done.stderr.strip().splitlines()[-3:])
            raise PolicyPackError(
                f"policy pack {label}: its __main__.py failed when its rules were read: {last}",
                what_to_do=f"run the pack as Pulumi would (`pulumi preview --policy-pack "
                f"{folder}`) to see all of it; fix the pack. Nothing was changed.",
            )
        _write(cache, done.stdout.encode())
    found = json.loads(cache.read_text())
    return [
        Rule(entry["pack"], rule["name"], rule["level"], rule.get("description", ""))
        for entry in found
        for rule in entry["rules"]
    ]


def _check_names(policies: PolicySet, rules: list[Rule]) -> None:
    known = {r.name for r in rules}
    for setting, names in (
        ("levels", policies.levels),
        ("disabled", policies.disabled),
        ("config", policies.config),
    ):
        unknown = sorted(set(names) - known)
        if unknown:
            packs = ", ".join(p.label for p in policies.packs)
            raise PolicyPackError(
                f"[policy] {setting}: {', '.join(unknown)} is not a rule of the pack(s) {packs}; "
                f"their rules: {', '.join(sorted(known)) or 'none'}. Nothing was changed."
            )


def _write(path: Path, content: bytes) -> None:
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_bytes(content)
    scratch.replace(path)
