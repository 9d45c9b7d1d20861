"""A policy pack's virtualenv: pulumi-policy and what the pack's requirements.txt asks, installed
by pip from the package index under the pinned versions (constraints.txt beside this module).

pulumi-policy 1.21 needs protobuf 5.29 while stackflow's own environment locks 6.x: a pack never
runs in stackflow's interpreter. One virtualenv per distinct set of requirements, made once under
a lock and kept in the per-user cache (`<cache>/policy/venvs/<key>`), so every checkout, run and
worker on the machine shares it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from stackflow.policy.packs import CONSTRAINTS, PolicyPackError
from stackflow.processes import clean_environment, folder_lock, log_tail
from stackflow.pulumi_cli.cache import cache_root

READY = ".ready"  # written last: a folder without it is a make that did not finish
PIP_TIMEOUT_S = 900


def normalized(requirements: bytes) -> list[str]:
    """A requirements file's lines as pip reads them: comments and blank lines dropped."""
    lines = requirements.decode("utf-8", errors="replace").splitlines()
    return sorted({line.split("#", 1)[0].strip() for line in lines} - {""})


def venv_key(requirements: bytes) -> str:
    """The virtualenv a pack with these requirements runs in: this Python's version, the pins
    and the requirements (the same lines in another order or with comments: the same one)."""
    h = hashlib.sha256()
    h.update(f"{sys.version_info.major}.{sys.version_info.minor}".encode())
    h.update(CONSTRAINTS.read_bytes())
    h.update("\n".join(normalized(requirements)).encode())
    return h.hexdigest()[:16]


def venvs_root() -> Path:
    return cache_root() / "policy" / "venvs"


def ensure_venv(requirements: bytes, pack: str, say: Callable[[str], None]) -> Path:
    """The folder of the virtualenv for these requirements, made now if missing.

    Raises:
        PolicyPackError: pip could not install them (naming the pack and pip's last lines).
    """
    key = venv_key(requirements)
    root = venvs_root()
    folder = root / key
    if (folder / READY).is_file():
        return folder
    with folder_lock(root, f".{key}.lock"):
        if (folder / READY).is_file():  # another run made it while this one waited
            return folder
        say(
            f"policy pack {pack}: making its virtualenv (pulumi-policy and its requirements, "
            f"pip from the package index; once per machine, about 30 s): {folder}"
        )
        shutil.rmtree(folder, ignore_errors=True)
        _make(folder, requirements, pack)
        (folder / READY).write_text(key + "\n")
    return folder


def _make(folder: Path, requirements: bytes, pack: str) -> None:
    env = clean_environment({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"})
    log = folder.with_name(folder.name + ".log")
    wanted = folder.with_name(folder.name + ".requirements.txt")
    wanted.write_text("\n".join(normalized(requirements)) + "\n")
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS)]
    steps = [
        [sys.executable, "-m", "venv", str(folder)],
        [*pip, "pulumi-policy", "-r", str(wanted)],
    ]
    with log.open("w") as out:
        for step in steps:
            try:
                done = subprocess.run(
                    step, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=PIP_TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                done = None
            if done is None or done.returncode != 0:
                shutil.rmtree(folder, ignore_errors=True)
                raise PolicyPackError(
                    f"policy pack {pack}: its virtualenv could not be made ({' '.join(step[:4])} "
                    f"failed; the log is {log}): {log_tail(log, 600).strip()}",
                    what_to_do="check the pack's requirements.txt against the versions stackflow "
                    "pins for packs (stackflow/policy/constraints.txt) and that pip reaches the "
                    "package index, then run again. Nothing was changed.",
                )
