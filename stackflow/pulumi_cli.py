"""The Pulumi CLI that the automation engine runs by path: reused from a per-user cache, or built.

The CLI lives outside the checkout, keyed by version, at `cache_root()/pulumi/v<version>/bin/pulumi`,
so a second clone or a CI run on the same machine reuses it. Its version is always the installed
`pulumi` SDK's (SDK and CLI move together). It comes from, in order:

1. the cache, if that binary reports exactly `v<version>` (checked once, then remembered in a stamp
   keyed by the file's identity, so a run costs no subprocess);
2. a `pulumi` on PATH that reports exactly `v<version>`: linked into the cache (a symlink, so the
   engine always uses the cache path, and the CLI still finds the language hosts beside it);
3. a build from source with Go, from the wrapper module in scripts/pulumi-cli, whose go.sum pins
   every module by checksum (`-mod=readonly`: go.mod and go.sum are never changed by a build).

    python -m stackflow.pulumi_cli ensure    reuse or build; prints where the CLI is
    python -m stackflow.pulumi_cli path      the CLI's path (exit 1 if there is none yet)
    python -m stackflow.pulumi_cli version   the version needed, as `pulumi version` prints it
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from importlib.metadata import version as package_version
from pathlib import Path

from stackflow.errors import EngineUnavailable

CLI_VERSION = package_version("pulumi")
MODULE_DIR = Path(__file__).resolve().parents[1] / "scripts" / "pulumi-cli"
CLI_PACKAGE = "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
# Without this the binary's `pulumi version` prints nothing and the Automation API refuses it.
VERSION_SYMBOL = "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"
OLDEST_GO = (1, 21)  # from 1.21 on, Go fetches the newer toolchain that go.mod asks for by itself
PROGRESS_SECONDS = 20.0
TAIL_LINES = 30
INSTALL_URL = "https://www.pulumi.com/docs/install/"

Say = Callable[[str], None]


# --- where it lives ------------------------------------------------------------------------------


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


# --- finding it ----------------------------------------------------------------------------------


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
    if _verified(cached):
        return cached
    found = shutil.which("pulumi")
    if found is None:
        return None
    candidate = Path(found).resolve()
    if candidate == cached.resolve() or _reported_version(candidate) != f"v{CLI_VERSION}":
        return None
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        link = cached.with_name(f".pulumi.{os.getpid()}.link")
        link.unlink(missing_ok=True)
        link.symlink_to(candidate)
        os.replace(link, cached)  # atomic: a concurrent run sees the old entry or the new one
        _write_stamp(cached)
    except OSError as exc:
        raise EngineUnavailable(
            f"found the Pulumi CLI v{CLI_VERSION} at {candidate} but cannot link it into the cache "
            f"({exc}). Set STACKFLOW_CACHE_DIR to a writable folder and run "
            "`python -m stackflow.pulumi_cli ensure` again."
        ) from exc
    return cached


def _reported_version(binary: Path) -> str | None:
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


def _verified(binary: Path) -> bool:
    """True if `binary` reports `v<CLI_VERSION>`; asks it only when the stamp does not match."""
    fingerprint = _fingerprint(binary)
    if fingerprint is None:
        return False
    try:
        if _stamp_path(binary).read_text() == fingerprint:
            return True
    except OSError:
        pass  # no stamp yet: ask the binary
    if _reported_version(binary) != f"v{CLI_VERSION}":
        return False
    with suppress(OSError):  # a read-only cache still works; it is just asked again next time
        _write_stamp(binary)
    return True


def _write_stamp(binary: Path) -> None:
    fingerprint = _fingerprint(binary)
    if fingerprint is None:
        return
    stamp = _stamp_path(binary)
    partial = stamp.with_name(f".verified.{os.getpid()}")
    partial.write_text(fingerprint)
    os.replace(partial, stamp)


# --- building it ---------------------------------------------------------------------------------


def build_cli(say: Say = print) -> Path:
    """Build the Pulumi CLI v<CLI_VERSION> with Go into the cache, under a lock; returns its path.

    Steps, each announced through `say`: "download modules" (only those the CLI needs, checked
    against go.sum), "compile" (with a progress line every ~20 s), "verify" (`pulumi version`).
    The binary is verified under a temporary name and then renamed into place, so `cli_path()`
    never holds a partial or wrong binary. A concurrent build of the same version is waited for,
    and its result reused.

    Args:
        say: receives each progress line (default: print).

    Raises:
        EngineUnavailable: Go is missing or too old, the Go module's pin does not match the SDK,
            the cache is not writable, or a step failed (names the step, shows the tail of Go's
            output and the log's path).
    """
    required_go = _check_module()
    go = shutil.which("go")
    if go is None:
        raise EngineUnavailable(
            f"building the Pulumi CLI v{CLI_VERSION} needs Go, which is not on PATH. "
            + _go_hint(required_go)
        )
    root = cli_root()
    try:
        (root / "bin").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EngineUnavailable(
            f"cannot create the Pulumi CLI cache folder {root} ({exc}); "
            "set STACKFLOW_CACHE_DIR to a writable folder and try again."
        ) from exc
    go_version = _check_go(go, required_go, cwd=root)
    with _build_lock(root, say):
        if _verified(cli_path()):  # another setup built it while this one waited
            say(f"Pulumi CLI v{CLI_VERSION}: reused {cli_path()} (built meanwhile by another run)")
            return cli_path()
        return _build(go, go_version, root, say)


def ensure_cli(say: Say = print) -> Path:
    """The Pulumi CLI v<CLI_VERSION> in the cache: reused if there (or on PATH), else built.

    Args:
        say: receives each progress line (default: print).

    Raises:
        EngineUnavailable: as `find_cli` and `build_cli`; the message says what to do.
    """
    found = find_cli()
    if found is None:
        return build_cli(say)
    target = f" (links to {os.readlink(found)})" if found.is_symlink() else ""
    say(f"Pulumi CLI v{CLI_VERSION}: reused {found}{target}")
    return found


def _go_hint(required_go: str) -> str:
    return (
        f"Install Go >= {required_go} from your package manager or https://go.dev/dl "
        "(Debian 12's golang-go is 1.19, too old), then run `python -m stackflow.pulumi_cli "
        f"ensure` again; or put a Pulumi CLI v{CLI_VERSION} on PATH ({INSTALL_URL})."
    )


def _check_module() -> str:
    """Check that the wrapper Go module pins the SDK's version; returns the Go version it needs."""
    try:
        go_mod = (MODULE_DIR / "go.mod").read_text()
    except OSError as exc:
        raise EngineUnavailable(
            f"the Go module that builds the Pulumi CLI is missing ({exc}); it ships with the "
            "stackflow checkout in scripts/pulumi-cli: run from a full checkout."
        ) from exc
    pinned = re.search(r"^\s*github\.com/pulumi/pulumi/pkg/v3\s+v(\S+)", go_mod, re.MULTILINE)
    if pinned is None or pinned.group(1) != CLI_VERSION:
        at = f"v{pinned.group(1)}" if pinned else "no version"
        raise EngineUnavailable(
            f"{MODULE_DIR / 'go.mod'} pins the Pulumi CLI at {at}, but the installed pulumi SDK is "
            f"{CLI_VERSION}; they must match. Install the SDK the checkout pins (bash "
            f"scripts/setup.sh), or move the pin: cd {MODULE_DIR} && go get "
            f"github.com/pulumi/pulumi/pkg/v3@v{CLI_VERSION} && go mod tidy."
        )
    wanted = re.search(r"^go\s+(\S+)", go_mod, re.MULTILINE)
    return wanted.group(1) if wanted else "1.24"


def _check_go(go: str, required_go: str, cwd: Path) -> str:
    """The local Go's version (e.g. go1.26.8); raises if it cannot build the module at all."""
    try:
        # Run outside the module, so this reports the local toolchain rather than switching.
        done = subprocess.run(
            [go, "version"], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise EngineUnavailable(
            f"`{go} version` could not run ({exc}). " + _go_hint(required_go)
        ) from exc
    found = re.search(r"\bgo(\d+)\.(\d+)(\S*)", done.stdout)
    if done.returncode != 0 or found is None:
        raise EngineUnavailable(
            f"`{go} version` failed: {(done.stdout + done.stderr).strip()[-500:]}. "
            + _go_hint(required_go)
        )
    if (int(found.group(1)), int(found.group(2))) < OLDEST_GO:
        raise EngineUnavailable(
            f"{go} is Go {found.group(1)}.{found.group(2)}, too old to build the Pulumi CLI "
            f"(scripts/pulumi-cli/go.mod needs Go {required_go}). " + _go_hint(required_go)
        )
    return found.group(0)


@contextmanager
def _build_lock(root: Path, say: Say) -> Iterator[None]:
    """Hold an exclusive lock on `root/.lock` (never deleted, so every run locks the same file)."""
    lock = root / ".lock"
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"Pulumi CLI v{CLI_VERSION}: another run is building it (lock {lock}); waiting")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # closing the file releases the lock, also if this process dies


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOWORK"] = "off"  # a go.work above the checkout must not change what is built
    return env


def _build(go: str, go_version: str, root: Path, say: Say) -> Path:
    log = root / "build.log"
    target = cli_path()
    partial = target.with_name(f".pulumi.{os.getpid()}.tmp")
    for stale in target.parent.glob(".pulumi.*.tmp"):  # under the lock: left by a killed build
        stale.unlink(missing_ok=True)
    started = time.monotonic()
    say(f"Pulumi CLI v{CLI_VERSION}: building it from source with {go_version} (log: {log})")
    log.write_text(f"building {CLI_PACKAGE} v{CLI_VERSION} with {go_version}\n")
    env = _go_env()
    try:
        # -mod=readonly on the command line (it overrides GOFLAGS): go.sum is enforced, never edited.
        packages = _run_step(
            "download modules",
            [go, "list", "-mod=readonly", "-deps", CLI_PACKAGE],
            what="the modules the CLI needs, checked against go.sum",
            env=env,
            log=log,
            say=say,
        )
        ldflags = f"-s -w -X {VERSION_SYMBOL}=v{CLI_VERSION}"
        build = [go, "build", "-mod=readonly", "-v", "-trimpath", "-ldflags", ldflags]
        _run_step(
            "compile",
            [*build, "-o", str(partial), CLI_PACKAGE],
            what="seconds if Go's build cache is warm; cold, ~7 min on 2 cores and ~1.7 GB of memory",
            env=env,
            log=log,
            say=say,
            out_of=packages,
        )
        say("verify: pulumi version")
        reported = _reported_version(partial)
        with log.open("a") as out:
            out.write(f"== verify: pulumi version -> {reported!r}\n")
        if reported != f"v{CLI_VERSION}":
            raise EngineUnavailable(
                f"building the Pulumi CLI v{CLI_VERSION} failed at step 'verify': the new binary's "
                f"`pulumi version` printed {reported!r}, not 'v{CLI_VERSION}'. Log: {log}. Check "
                f"that -X {VERSION_SYMBOL} still names the version variable in this release."
            )
        os.replace(partial, target)
        _write_stamp(target)
    finally:
        partial.unlink(missing_ok=True)
    say(f"Pulumi CLI v{CLI_VERSION}: built {target} in {_took(time.monotonic() - started)}")
    return target


_PACKAGE_LINE = re.compile(r"^[\w.~/-]+$")  # an import path: what `go list` and `go build -v` print


def _run_step(
    step: str,
    argv: list[str],
    *,
    what: str,
    env: dict[str, str],
    log: Path,
    say: Say,
    out_of: int = 0,
) -> int:
    """Run one Go command in the wrapper module, its output appended to `log`.

    Says a progress line every PROGRESS_SECONDS: elapsed time and, given `out_of` (the package
    count), how many packages Go has printed so far.

    Returns:
        The number of package lines the command printed.

    Raises:
        EngineUnavailable: the command failed; names `step`, shows the tail of its output.
    """
    command = " ".join(argv)
    with log.open("ab") as out:
        out.write(f"== {step}: {command}\n".encode())
        out.flush()
        start = out.tell()
        began = time.monotonic()
        say(f"{step}: {what}")
        proc = subprocess.Popen(argv, cwd=MODULE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    code = proc.wait(timeout=PROGRESS_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    done = ""
                    if out_of:
                        done = f", {_count_packages(_read_from(log, start))}/{out_of} packages"
                    say(f"{step}: {_took(time.monotonic() - began)}{done}")
        finally:
            if proc.poll() is None:  # interrupted: do not leave Go running
                proc.kill()
                proc.wait()
    output = _read_from(log, start)
    if code != 0:
        tail = "\n".join(output.rstrip().splitlines()[-TAIL_LINES:])
        raise EngineUnavailable(
            f"building the Pulumi CLI v{CLI_VERSION} failed at step '{step}' (`{command}` exited "
            f"with {code}). Last lines of Go's output:\n{tail}\nFull log: {log}. Fix the cause "
            "and run `python -m stackflow.pulumi_cli ensure` again, or put a Pulumi CLI "
            f"v{CLI_VERSION} on PATH ({INSTALL_URL})."
        )
    count = _count_packages(output)
    detail = f"{count} packages"
    if out_of:
        detail = f"{count} packages compiled, {max(out_of - count, 0)} from Go's build cache"
    say(f"{step}: done in {_took(time.monotonic() - began)} ({detail})")
    return count


def _read_from(log: Path, offset: int) -> str:
    with log.open("rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


def _count_packages(output: str) -> int:
    return sum(1 for line in output.splitlines() if _PACKAGE_LINE.match(line))


def _took(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


# --- command line --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """`python -m stackflow.pulumi_cli [ensure|path|version]`; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m stackflow.pulumi_cli",
        description=f"The Pulumi CLI v{CLI_VERSION} that stackflow's automation engine runs.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="ensure",
        choices=["ensure", "path", "version"],
        help="ensure: reuse or build it (default); path: print where it is; version: the one needed",
    )
    command = parser.parse_args(argv).command
    try:
        if command == "version":
            print(f"v{CLI_VERSION}")
        elif command == "path":
            found = find_cli()
            if found is None:
                print(
                    f"no Pulumi CLI v{CLI_VERSION} in {cli_path().parent} or on PATH; "
                    "run `python -m stackflow.pulumi_cli ensure`",
                    file=sys.stderr,
                )
                return 1
            print(found)
        else:
            ensure_cli()
    except EngineUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
