"""Building the Pulumi CLI from source with Go, into the cache, under a lock.

From the wrapper module in scripts/pulumi-cli, whose go.sum pins every module by checksum
(`-mod=readonly`: go.mod and go.sum are never changed by a build).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from stackflow import PROJECT_ROOT
from stackflow.errors import EngineUnavailable
from stackflow.pulumi_cli.cache import (
    CLI_VERSION,
    cli_path,
    cli_root,
    reported_version,
    verified,
    write_stamp,
)

MODULE_DIR = PROJECT_ROOT / "scripts" / "pulumi-cli"
CLI_PACKAGE = "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
# Without this the binary's `pulumi version` prints nothing and the Automation API refuses it.
VERSION_SYMBOL = "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"
OLDEST_GO = (1, 21)  # from 1.21 on, Go fetches the newer toolchain that go.mod asks for by itself
PROGRESS_SECONDS = 20.0
TAIL_LINES = 30
INSTALL_URL = "https://www.pulumi.com/docs/install/"

Say = Callable[[str], None]


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
        if verified(cli_path()):  # another setup built it while this one waited
            say(f"Pulumi CLI v{CLI_VERSION}: reused {cli_path()} (built meanwhile by another run)")
            return cli_path()
        return _build(go, go_version, root, say)


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
        reported = reported_version(partial)
        with log.open("a") as out:
            out.write(f"== verify: pulumi version -> {reported!r}\n")
        if reported != f"v{CLI_VERSION}":
            raise EngineUnavailable(
                f"building the Pulumi CLI v{CLI_VERSION} failed at step 'verify': the new binary's "
                f"`pulumi version` printed {reported!r}, not 'v{CLI_VERSION}'. Log: {log}. Check "
                f"that -X {VERSION_SYMBOL} still names the version variable in this release."
            )
        os.replace(partial, target)
        write_stamp(target)
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
