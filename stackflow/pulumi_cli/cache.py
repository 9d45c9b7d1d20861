"""Where the engine's Pulumi CLI lives (a per-user cache keyed by version) and finding one that
reports exactly the version the installed SDK needs, there or on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import suppress
from importlib.metadata import version as package_version
from pathlib import Path

from stackflow.errors import EngineUnavailable

CLI_VERSION = package_version("pulumi")  # SDK and CLI move together


def cache_root() -> Path:
    """stackflow's per-user cache folder (created by whoever writes into it, not here).

    `$STACKFLOW_CACHE_DIR`, else `$XDG_CACHE_HOME/stackflow` (if absolute, as the XDG spec asks),
    else `~/.cache/stackflow`.
    """
    explicit = os.environ.get("STACKFLOW_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "stackflow"
    return Path.home() / ".cache" / "stackflow"


def cli_root() -> Path:
    """The folder to pass as `pulumi.automation.PulumiCommand(root=...)`: it holds `bin/pulumi`."""
    return cache_root() / "pulumi" / f"v{CLI_VERSION}"


def cli_path() -> Path:
    """Where the engine's Pulumi CLI is (or will be, once `ensure_cli` has run)."""
    return cli_root() / "bin" / "pulumi"


def find_cli() -> Path | None:
    """The cached CLI if it reports exactly `v<CLI_VERSION>`, else one on PATH that does.

    A matching `pulumi` on PATH is symlinked into the cache and the cache path is returned, so the
    engine always runs `cli_path()`; if that file is later replaced by another version, the link no
    longer verifies and this looks again.

    Returns:
        `cli_path()`, or None when neither the cache nor PATH has the exact version.

    Raises:
        EngineUnavailable: a matching CLI is on PATH but the cache folder is not writable.
    """
    cached = cli_path()
    if verified(cached):
        return cached
    found = shutil.which("pulumi")
    if found is None:
        return None
    candidate = Path(found).resolve()
    if candidate == cached.resolve() or reported_version(candidate) != f"v{CLI_VERSION}":
        return None
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        link = cached.with_name(f".pulumi.{os.getpid()}.link")
        link.unlink(missing_ok=True)
        link.symlink_to(candidate)
        os.replace(link, cached)  # atomic: a concurrent run sees the old entry or the new one
        write_stamp(cached)
    except OSError as exc:
        raise EngineUnavailable(
            f"found the Pulumi CLI v{CLI_VERSION} at {candidate} but cannot link it into the cache "
            f"({exc}). Set STACKFLOW_CACHE_DIR to a writable folder and run "
            "`python -m stackflow.pulumi_cli ensure` again."
        ) from exc
    return cached


def reported_version(binary: Path) -> str | None:
    """What `binary version` prints (stripped), or None if it cannot run or fails."""
    try:
        done = subprocess.run(
            [str(binary), "version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            # No network for a version, and its log goes to a home of ours, never ~/.pulumi/logs.
            env={
                **os.environ,
                "PULUMI_SKIP_UPDATE_CHECK": "true",
                "PULUMI_HOME": str(binary.parent.parent / "home"),
            },
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _stamp_path(binary: Path) -> Path:
    return binary.parent.parent / ".verified"


def _fingerprint(binary: Path) -> str | None:
    """The version wanted plus the identity of the file `binary` resolves to, or None if absent."""
    try:
        st = binary.stat()  # follows a link: a replaced target changes the fingerprint
    except OSError:
        return None
    return f"v{CLI_VERSION} {st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns}"


def verified(binary: Path) -> bool:
    """True if `binary` reports `v<CLI_VERSION>`; asks it only when the stamp does not match."""
    fingerprint = _fingerprint(binary)
    if fingerprint is None:
        return False
    try:
        if _stamp_path(binary).read_text() == fingerprint:
            return True
    except OSError:
        pass  # no stamp yet: ask the binary
    if reported_version(binary) != f"v{CLI_VERSION}":
        return False
    with suppress(OSError):  # a read-only cache still works; it is just asked again next time
        write_stamp(binary)
    return True


def write_stamp(binary: Path) -> None:
    fingerprint = _fingerprint(binary)
    if fingerprint is None:
        return
    stamp = _stamp_path(binary)
    partial = stamp.with_name(f".verified.{os.getpid()}")
    partial.write_text(fingerprint)
    os.replace(partial, stamp)
