"""Benchmark: apply 200 migrations to a real local MariaDB, then time the no-op check.

    .venv/bin/python bench/migrations.py [--files 200] [--noop-runs 20]
    .venv/bin/python bench/migrations.py --split-only [--split-mb 1,8,32]

Both go through the one migrate command the task and the CLI use (load -> wait -> migrate), so
the no-op figure includes loading the folder and the wait's connection. Starts its own MariaDB
(stackflow.localdb) in a temporary folder, prints a table, and merges
`migrations_apply_200_s` and `migrations_noop_ms` into bench/results.json (other keys kept).
Also times the statement splitter on dump-shaped text of growing size (MB/s should stay flat:
the scan is linear); `--split-only` skips the database.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from stackflow.localdb import ensure_local_mariadb, stop_local_mariadb
from stackflow.migrator.command import migrate
from stackflow.migrator.splitter import split_statements
from stackflow.processes import free_port
from stackflow.settings import MigrationSettings

RESULTS = Path(__file__).resolve().parent / "results.json"


def generate(folder: Path, count: int) -> None:
    """One DDL change per file, as in real use: a table, then columns and indexes on it."""
    folder.mkdir(parents=True)
    (folder / "V0001__create_item.sql").write_text(
        "-- the table later files change\nCREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(40));\n"
    )
    for v in range(2, count + 1):
        if v % 3 == 0:
            sql = f"CREATE TABLE side_{v} (id INT PRIMARY KEY, note VARCHAR(20) DEFAULT 'a;b');\n"
        elif v % 3 == 1:
            sql = f"INSERT INTO item (id, name) VALUES ({v}, 'row {v}; with a semicolon');\n"
        else:
            sql = f"-- column {v}\nALTER TABLE item ADD COLUMN c{v} INT NULL;\n"
        (folder / f"V{v:04d}__step_{v}.sql").write_text(sql)


_DUMP_ROWS = "INSERT INTO `item` VALUES " + ",".join(
    f"({i},'name {i}; a \\'quoted\\' value','it''s -- not a comment',NULL)" for i in range(400)
)
_DUMP_ROUTINE = (
    "DELIMITER ;;\n/*!50003 CREATE*/ /*!50017 DEFINER=CURRENT_USER*/ /*!50003 TRIGGER t_ai AFTER "
    "INSERT ON item FOR EACH ROW BEGIN\n  IF NEW.id > 0 THEN SET @n = @n + 1; END IF;\nEND */;;\n"
    "DELIMITER ;\n"
)


def dump_text(megabytes: float) -> str:
    """mysqldump-shaped text: long multi-row INSERTs, conditional comments, a trigger per MB."""
    block = f"/*!40000 ALTER TABLE `item` DISABLE KEYS */;\n{_DUMP_ROWS};\n"
    per_mb = max(1, 1_000_000 // len(block))
    return (block * per_mb + _DUMP_ROUTINE) * max(1, round(megabytes))


def split_figures(sizes_mb: list[float]) -> list[tuple[str, str]]:
    """Split dump text of each size (best of 3) and report seconds and MB/s."""
    rows = []
    for mb in sizes_mb:
        text = dump_text(mb)
        best = min(_time_split(text) for _ in range(3))
        size = len(text) / 1e6
        rows.append((f"split {size:.1f} MB dump", f"{best:.2f} s ({size / best:.1f} MB/s)"))
    return rows


def _time_split(text: str) -> float:
    started = time.perf_counter()
    split_statements(text)
    return time.perf_counter() - started


def merge_results(values: dict[str, float]) -> None:
    """Read-modify-write bench/results.json, keeping keys other benchmarks wrote.

    Takes the same lock file as the other benchmarks (results.lock) so concurrent merges queue.
    """
    with RESULTS.with_suffix(".lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        current.update(values)
        tmp = RESULTS.with_suffix(".migrations.tmp")
        tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
        tmp.replace(RESULTS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200, help="migration files to generate")
    parser.add_argument("--noop-runs", type=int, default=20, help="no-op re-runs to time")
    parser.add_argument(
        "--no-save", action="store_true", help="print only; leave results.json alone"
    )
    parser.add_argument(
        "--split-mb", default="1,8,32", help="dump sizes (MB) to time the splitter on"
    )
    parser.add_argument("--split-only", action="store_true", help="time only the splitter")
    args = parser.parse_args()
    split_rows = split_figures([float(x) for x in args.split_mb.split(",") if x])
    if args.split_only:
        _print_table(split_rows)
        return 0

    with tempfile.TemporaryDirectory(prefix="stackflow-bench-") as tmp:
        base = Path(tmp)
        folder = base / "migrations"
        generate(folder, args.files)
        started = time.perf_counter()
        target = ensure_local_mariadb(
            base / "mariadb",
            free_port(),
            user="bench",
            password=secrets.token_urlsafe(18),
            database="bench",
            log=lambda m: print(f"  {m}", file=sys.stderr),
        )
        server_s = time.perf_counter() - started
        settings = MigrationSettings(dir=folder)
        try:
            started = time.perf_counter()
            report = migrate(target, settings, protected=False)
            apply_s = time.perf_counter() - started
            assert len(report.applied) == args.files, report
            noop_ms: list[float] = []
            for _ in range(args.noop_runs):
                started = time.perf_counter()
                again = migrate(target, settings, protected=False)
                noop_ms.append((time.perf_counter() - started) * 1000)
                assert not again.applied and again.already_applied == args.files
        finally:
            stop_local_mariadb(base / "mariadb")

    median = statistics.median(noop_ms)
    rows = [
        *split_rows,
        ("local MariaDB ready (init + start)", f"{server_s:.2f} s"),
        (f"apply {args.files} migrations", f"{apply_s:.2f} s"),
        ("  per file", f"{apply_s / args.files * 1000:.1f} ms"),
        (f"no-op check, median of {args.noop_runs}", f"{median:.1f} ms"),
        ("no-op check, min / max", f"{min(noop_ms):.1f} / {max(noop_ms):.1f} ms"),
    ]
    _print_table(rows)
    if args.files == 200 and not args.no_save:
        merge_results(
            {"migrations_apply_200_s": round(apply_s, 3), "migrations_noop_ms": round(median, 2)}
        )
        print(f"saved to {RESULTS}")
    return 0


def _print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 10}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    sys.exit(main())
