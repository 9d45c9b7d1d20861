"""Schema migrations: numbered SQL files applied once each, in order, under a lock.

Files are named `V<version>__<description>.sql` and live in one folder; they may be mysqldump
output (DELIMITER, conditional comments). Each file is recorded in the history table with its
checksum, duration, outcome and progress, so a re-run is a no-op (one SELECT), an edited applied
file is refused, and a failed file blocks later runs until someone checks the schema and clears
the record with `repair`.

One module per concern; import from the module, this package holds no names:
  command     the one door: load -> wait -> migrate (the task, the CLI and the benchmark call it)
  files       numbered SQL files, loading, checksums
  splitter    a file's statements, split as the mysql client does
  lint        destructive-change findings, "needs review", the DEFINER check
  guard       statements a migration may never run (its own history, client commands)
  target      where a database is (MysqlTarget), from a URL or a database stack's outputs
  connection  connecting, waiting, the migration lock, pymysql errors classified
  history     the history table
  checks      DEFINERs, packet size and live columns, against the server
  plan        the pending plan, the read-only report, pinned approvals
  apply       applying pending files with progress per statement
  admin       status, repair, baseline
  errors      the runner's exceptions
"""
