"""What the real engine's tools cost to get and to start: the Pulumi CLI build, the provider plugin.

- `cli_build_cached_s`: `python -m stackflow.pulumi_cli ensure` with the CLI already in the cache
  (what every setup.sh after the first pays), whole process, median of `--runs`.
- `cli_build_cold`: the same into empty temporary GOMODCACHE, GOCACHE and STACKFLOW_CACHE_DIR:
  download the modules and compile the CLI from source (~7 minutes on 2 cores). Only with
  `--cold-build`; otherwise the figure of the last run that did it is carried over with its date.
- `plugin_start_s`: from spawning the project's `pulumi-resource-aws` (and `-random`) plugin, as the
  engine does, until it prints its port; its peak RSS then. Median of `--runs`, after one untimed
  start. How large the plugins grow while they work is in bench/compare.py's memory figures.

Both sides of bench/compare.py (stackflow and the plain script) use this same CLI and plugins, so
these figures have no separate baseline.

    .venv/bin/python bench/toolchain.py [--runs 5] [--cold-build] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchkit import PYTHON, RESULTS, ROOT, median, merge_results, run_metadata, say

# The last cold build measured before this script could (setup.sh's own log, on this 2-core
# machine, Go 1.26, empty module and build caches): carried over until a run with --cold-build.
EARLIER_COLD_BUILD = {
    "total_s": 398.0,
    "download_modules_s": 33.0,
    "measured": "2026-11-23",
    "how": "scripts/setup.sh's first build of the Pulumi CLI (its log: built ... in 6 min 38 s)",
}


def _env_without_pulumi_on_path(extra: dict[str, str]) -> dict[str, str]:
    """A PATH without any `pulumi` (one that fits would be linked instead of built)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    kept = [p for p in env.get("PATH", "").split(os.pathsep) if not Path(p, "pulumi").exists()]
    env["PATH"] = os.pathsep.join(kept)
    env.update(extra)
    return env


def cli_cached(runs: int) -> dict[str, Any]:
    walls = []
    for _ in range(runs + 1):  # the first is a warm-up
        started = time.perf_counter()
        subprocess.run(
            [PYTHON, "-m", "stackflow.pulumi_cli", "ensure"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        walls.append(time.perf_counter() - started)
    return {"median_s": round(median(walls[1:]), 3), "runs_s": [round(w, 3) for w in walls[1:]]}


def _seconds(text: str) -> float:
    """`6 min 38 s` or `33 s` (stackflow.pulumi_cli's wording) in seconds."""
    found = re.match(r"(?:(\d+) min )?(\d+) s", text.strip())
    if found is None:
        raise ValueError(f"not a duration: {text!r}")
    return int(found.group(1) or 0) * 60 + int(found.group(2))


def cli_cold() -> dict[str, Any]:
    """Build the CLI from nothing into temporary caches; the figures its own progress lines give."""
    with tempfile.TemporaryDirectory(prefix="stackflow-bench-cold-build-") as tmp:
        env = _env_without_pulumi_on_path(
            {
                "STACKFLOW_CACHE_DIR": str(Path(tmp) / "cache"),
                "GOMODCACHE": str(Path(tmp) / "gomod"),
                "GOCACHE": str(Path(tmp) / "gocache"),
            }
        )
        say("cold build of the Pulumi CLI into empty caches (~7 minutes on 2 cores) ...")
        started = time.perf_counter()
        done = subprocess.run(
            [PYTHON, "-m", "stackflow.pulumi_cli", "ensure"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
        # Go's module cache is read-only by design; make it deletable for the cleanup.
        subprocess.run(["chmod", "-R", "u+w", str(Path(tmp) / "gomod")], check=False)
    if done.returncode != 0:
        raise RuntimeError(f"cold build failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    modules = re.search(r"download modules: done in ([\dmins ]+?) \(", done.stdout)
    built = re.search(r"built .* in ([\dmins ]+)$", done.stdout, re.MULTILINE)
    return {
        "total_s": round(wall, 1),
        "download_modules_s": _seconds(modules.group(1)) if modules else None,
        "reported_build_s": _seconds(built.group(1)) if built else None,
        "measured": datetime.now(UTC).date().isoformat(),
        "how": "bench/toolchain.py --cold-build (empty GOMODCACHE, GOCACHE, STACKFLOW_CACHE_DIR)",
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def plugin_start(package: str, runs: int, home: Path) -> dict[str, Any]:
    """Start the plugin as the engine does (its executable in the Pulumi home, an engine address
    as argument, stdin open) until it prints its port; then close stdin, which ends it."""
    from stackflow.localcloud.install import install_plugins, plugin_dir

    install_plugins(home)
    executable = plugin_dir(home, package) / f"pulumi-resource-{package}"
    walls: list[float] = []
    peaks: list[float] = []
    for _ in range(runs + 1):  # the first is a warm-up
        started = time.perf_counter()
        process = subprocess.Popen(
            [str(executable), "127.0.0.1:1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert process.stdout is not None and process.stdin is not None
        port = process.stdout.readline().strip()
        walls.append(time.perf_counter() - started)
        if not port.isdigit():
            process.kill()
            raise RuntimeError(f"{executable} printed {port!r}, not a port")
        peaks.append(_peak_rss_mb(process.pid))
        process.stdin.close()
        process.wait(timeout=30)
    return {
        "median_s": round(median(walls[1:]), 3),
        "runs_s": [round(w, 3) for w in walls[1:]],
        "peak_rss_mb_at_start": round(median(peaks[1:]), 1),
    }


def measure(runs: int, cold_build: bool) -> dict[str, Any]:
    previous = json.loads(RESULTS.read_text()).get("toolchain", {}) if RESULTS.exists() else {}
    with tempfile.TemporaryDirectory(prefix="stackflow-bench-plugins-") as home:
        plugins = {p: plugin_start(p, runs, Path(home)) for p in ("aws", "random")}
    say(f"plugin start: {plugins}")
    cached = cli_cached(runs)
    say(f"CLI ensure (cached): {cached}")
    if cold_build:
        cold = cli_cold() | {"this_run": True}
        say(f"CLI cold build: {cold}")
    else:
        cold = {**previous.get("cli_build_cold", EARLIER_COLD_BUILD), "this_run": False}
    return {"plugin_start": plugins, "cli_build_cached": cached, "cli_build_cold": cold}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each (median)")
    parser.add_argument("--cold-build", action="store_true", help="also build the CLI from zero")
    parser.add_argument("--out", type=Path, help="write results here instead of bench/results.json")
    args = parser.parse_args(argv)
    results = measure(args.runs, args.cold_build)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))
        return
    merge_results({"toolchain": results, **run_metadata()})
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()


def figures(results: dict[str, Any]) -> dict[str, Any]:
    """The table's rows for these results (no separate baseline: both sides share the tools)."""
    from benchkit import figure

    from stackflow.pulumi_cli import CLI_VERSION

    cached, cold = results["cli_build_cached"], results["cli_build_cold"]
    shared = "same (the script runs this CLI)"
    when = "this run" if cold.get("this_run") else f"measured {cold['measured']}, not this run"
    rows = {
        "cli_build_cached_s": figure(
            f"Pulumi CLI v{CLI_VERSION}, cached: `python -m stackflow.pulumi_cli ensure` (median of "
            f"{len(cached['runs_s'])})",
            cached["median_s"],
            shared,
            "s",
            "`bench/toolchain.py`",
        ),
        "cli_build_cold_s": figure(
            f"Pulumi CLI v{CLI_VERSION}, cold build from Go modules ({when}; modules download "
            f"{cold.get('download_modules_s')} s)",
            cold["total_s"],
            shared,
            "s",
            "`bench/toolchain.py --cold-build`" if cold.get("this_run") else cold["how"],
        ),
    }
    for package, entry in results["plugin_start"].items():
        rows[f"plugin_start_{package}_s"] = figure(
            f"{package} provider plugin start, spawn to port printed (median of "
            f"{len(entry['runs_s'])}; peak RSS then {entry['peak_rss_mb_at_start']:.0f} MiB)",
            entry["median_s"],
            "same (the script uses these plugins)",
            "s",
            "`bench/toolchain.py`",
        )
    return rows
