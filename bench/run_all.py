"""Run every benchmark against one Prefect server and write bench/results.json.

    .venv/bin/python bench/run_all.py                 # the full run (~6-9 minutes on 2 cores)
    .venv/bin/python bench/run_all.py --quick         # small sizes, to check it works (~3 minutes)
    .venv/bin/python bench/run_all.py --only overhead # a subset, merged into the existing file
    .venv/bin/python bench/run_all.py --markdown      # print the last results as Markdown, no run

Starts what it needs: a Prefect server (SQLite, no UI) in a temporary PREFECT_HOME on a free port,
unless PREFECT_API_URL is already set; one warm-up deploy; then each benchmark script in its own
process (task overhead and `--help`, pipeline, fan-out; bench/migrations.py starts its own MariaDB
with stackflow/localdb.py). A full run writes a fresh bench/results.json (figures, targets, versions,
cores, load, whether the server was warm), prints one table with each figure, its target and
pass/MISS, and stops what it started. Every pipeline figure comes from the **simulated** engine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import (
    PYTHON,
    RESULTS,
    ROOT,
    TARGETS,
    TITLE,
    markdown_table,
    merge_results,
    prefect_session,
    process_group_rss_mb,
    run_metadata,
    run_script,
    say,
    table,
    workdir,
)

SCRIPTS = {"overhead": "overhead.py", "pipeline": "pipeline.py", "fanout": "fanout.py"}
# --quick: the same measurements at sizes that only show the scripts work (figures not comparable).
QUICK = {
    "overhead": ["--tasks", "10"],
    "pipeline": ["--repeat", "1", "--latency", '{"*": 1.0}'],
    "fanout": ["--sizes", "1,4", "--latency", "1.0"],
}
MIGRATION_KEYS = ("migrations_apply_200_s", "migrations_noop_ms")
MIGRATIONS_TIMEOUT_S = 300
LOGS = Path(tempfile.gettempdir()) / "stackflow-bench-logs"  # kept after the run, for a failure


def run_migrations(log: Path) -> dict[str, Any]:
    """bench/migrations.py merges its own keys into bench/results.json; read them back after."""
    script = ROOT / "bench" / "migrations.py"
    started = time.monotonic()
    try:
        with log.open("w") as handle:
            done = subprocess.run(
                [PYTHON, str(script)],
                cwd=ROOT,
                stdout=handle,
                stderr=subprocess.STDOUT,
                timeout=MIGRATIONS_TIMEOUT_S,
                check=False,
            )
        failure = f"exit {done.returncode}" if done.returncode else None
    except subprocess.TimeoutExpired:
        failure = f"no result within {MIGRATIONS_TIMEOUT_S}s"
    if failure:
        say(f"bench/migrations.py failed ({failure}); log tail:\n{log.read_text()[-2000:]}")
        return {
            **dict.fromkeys(MIGRATION_KEYS),
            "migrations_note": f"bench/migrations.py failed at this run ({failure})",
        }
    say(f"bench/migrations.py done in {time.monotonic() - started:.0f}s")
    written = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    return {key: written.get(key) for key in MIGRATION_KEYS} | {
        "migrations_note": "real MariaDB (stackflow/localdb.py), not simulated"
    }


def write_fresh(results: dict[str, Any]) -> None:
    """Replace bench/results.json, so no figure of an earlier run survives a full run."""
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    tmp.replace(RESULTS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = [*SCRIPTS, "migrations"]
    parser.add_argument(
        "--only",
        help=f"comma-separated subset of: {', '.join(every)} (merged into the existing results)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, to check it works")
    parser.add_argument(
        "--markdown", action="store_true", help="print bench/results.json as Markdown; no run"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown_table(json.loads(RESULTS.read_text())))
        return 0
    wanted = [w.strip() for w in (args.only or ",".join(every)).split(",") if w.strip()]
    unknown = set(wanted) - set(every)
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(sorted(unknown))}; accepted: {every}")
    started = time.monotonic()
    load_before = round(os.getloadavg()[0], 2)
    results: dict[str, Any] = {}
    errors: list[str] = []
    LOGS.mkdir(exist_ok=True)
    say(f"each benchmark's output goes to {LOGS}/<name>.log")
    with workdir("all") as tmp_name, prefect_session(Path(tmp_name)) as session:
        tmp = Path(tmp_name)
        for name in wanted:
            if name == "migrations":
                results.update(run_migrations(LOGS / "migrations.log"))
                continue
            extra = QUICK[name] if args.quick else []
            try:
                results.update(
                    run_script(SCRIPTS[name], tmp / f"{name}.json", LOGS / f"{name}.log", extra)
                )
            except RuntimeError as exc:
                errors.append(str(exc))
                say(str(exc))
        if session.server_pid is not None:
            results["prefect_server_rss_mb"] = process_group_rss_mb(session.server_pid)
    results["bench_wall_s"] = round(time.monotonic() - started, 1)
    meta = run_metadata(warm=session.warm)
    meta["load_average_1m_at_start"] = load_before
    meta["quick"] = args.quick
    meta["prefect_server"] = "started by run_all (SQLite)" if session.started_here else "given"
    meta["targets"] = {k: f"{op} {bound:g}" for k, (op, bound) in TARGETS.items()}
    if args.only:
        merge_results({**results, **meta})
    else:
        write_fresh({**results, **meta})
    print(table(results))
    print(
        f"\n{TITLE}\n{meta['timestamp']}  cores {meta['cores']}  load (1 min) "
        f"{load_before} at start, {meta['load_average_1m']} at end  "
        + "  ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + f"  Prefect server warm: {session.warm}  total {results['bench_wall_s']:.0f}s"
    )
    print(f"written to {RESULTS.relative_to(ROOT)}")
    for error in errors:
        print(f"error: {error.splitlines()[0]}")
    return 1 if errors else 0


if __name__ == "__main__":
    os.chdir(ROOT)
    raise SystemExit(main())
