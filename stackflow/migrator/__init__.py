"""Schema migrations: SQL files applied under a lock, versioned ones once each in order,
repeatable ones after them whenever they change.

Files are named as Flyway names them, `V<version>__<description>.sql` (versions like 1, 1.1,
1_1, 2.0.1) and `R__<description>.sql`, and live in one folder; they may be mysqldump output
(DELIMITER, conditional comments). Each file is recorded in the history table with its checksum,
duration, outcome and progress, so a re-run is a no-op (one SELECT), an edited applied file is
refused, and a failed file blocks later runs until someone checks the schema and clears the
record with `repair`. A database Flyway manages is adopted from its `flyway_schema_history`.

One module per concern; import from the module, this package holds no names:
  command     the one door: load -> wait -> migrate (the task, the CLI and the benchmark call it)
  names       file names and what is wrong with one
  version     versions as Flyway reads and compares them
  files       loading the folder, checksums (sha256, and Flyway's CRC32)
  splitter    a file's statements, split as the mysql client does
  lint        destructive-change findings, "needs review", the DEFINER check
  guard       statements a migration may never run (its own history, client commands)
  target      where a database is (MysqlTarget), from a URL or a database stack's outputs
  connection  connecting, waiting, the migration lock, pymysql errors classified
  history     the history table (and its upgrade in place)
  flyway      adopting a database Flyway manages, from its flyway_schema_history
  checks      DEFINERs, packet size, name case, placeholders and live columns
  plan        the pending plan, the read-only report
  pins        an approval's checksums, checked when the run starts
  apply       applying pending files with progress per statement
  admin       status, repair, baseline
  errors      the runner's exceptions
"""
