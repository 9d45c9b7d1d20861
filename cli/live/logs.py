"""Where Prefect's and Pulumi's own log lines go while the CLI shows a run: a log file per command
in the state folder, and the screen with -v (they reach the Prefect server as always)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from stackflow.state import StateLayout

KEEP_LOGS = 30  # log files kept per state folder


def new_log_file(state_dir: Path, command: str, environment: str) -> Path:
    """A fresh log file for one command, in <state>/logs (the oldest beyond KEEP_LOGS go)."""
    folder = StateLayout(state_dir).logs
    folder.mkdir(parents=True, exist_ok=True)
    old = sorted(folder.glob("*.log"), key=lambda p: p.stat().st_mtime)
    for path in old[: max(0, len(old) - KEEP_LOGS + 1)]:
        path.unlink(missing_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = folder / f"{command}-{environment}-{stamp}.log"
    path.touch(mode=0o600)
    return path


class _LogFile(logging.FileHandler):
    """The command's log file. A write the machine refuses (a full disk, a read-only file system)
    is kept, once, for the end of the command to say: never Python's "--- Logging error ---"
    traceback between the view's lines."""

    failed: OSError | None = None

    def handleError(self, record: logging.LogRecord) -> None:
        import sys

        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
        elif self.failed is None:
            self.failed = error

    def close(self) -> None:
        try:
            super().close()
        except OSError as exc:  # the last flush, on a full disk
            self.failed = self.failed or exc


class _Echo(logging.Handler):
    def __init__(self, echo: Callable[[str], None]) -> None:
        super().__init__()
        self.echo = echo

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.echo(self.format(record))
        except Exception:  # a log line must never break the run
            self.handleError(record)


@contextlib.contextmanager
def routed_logs(log_file: Path, echo: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Inside, log lines that Prefect would print (its own, the flow's and tasks', Pulumi's output
    through them, warnings) go to `log_file`, and to `echo` when given (-v); Prefect's console
    handlers print nothing. Lines still reach the Prefect server as before."""
    import sys

    # Prefect's console handlers exist only once Prefect is imported (a rehearsal never does).
    prefect_handlers = sys.modules.get("prefect.logging.handlers")
    console = getattr(prefect_handlers, "PrefectConsoleHandler", None)
    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s", "%H:%M:%S"
    )
    to_file = _LogFile(log_file, encoding="utf-8")
    to_file.setFormatter(formatter)
    added: list[logging.Handler] = [to_file]
    if echo is not None:
        shown = _Echo(echo)
        shown.setFormatter(
            logging.Formatter("%(asctime)s | %(levelname)-7s | %(message)s", "%H:%M:%S")
        )
        added.append(shown)
    loggers = [logging.getLogger()] + [
        item
        for item in logging.Logger.manager.loggerDict.values()
        if isinstance(item, logging.Logger)
    ]
    removed: list[tuple[logging.Logger, logging.Handler]] = []
    for logger in loggers:
        for handler in list(logger.handlers):
            if console is not None and isinstance(handler, console):
                logger.removeHandler(handler)
                removed.append((logger, handler))
    root = logging.getLogger()
    for handler in added:
        root.addHandler(handler)
    logging.captureWarnings(True)  # library warnings go to the log, not between the view's lines
    # A line that cannot be written or sent (a full disk, a Prefect server whose database is
    # gone) prints no "--- Logging error ---" between the view's lines: the run's end says why.
    raising, logging.raiseExceptions = logging.raiseExceptions, False
    try:
        yield log_file
    finally:
        logging.raiseExceptions = raising
        logging.captureWarnings(False)
        for handler in added:
            root.removeHandler(handler)
            handler.close()
        for logger, handler in removed:
            logger.addHandler(handler)
        if to_file.failed is not None:
            why = to_file.failed.strerror or str(to_file.failed)
            print(
                f"warning: the log {log_file} is incomplete: a write to it failed ({why}); the "
                "Prefect server has every line",
                file=sys.stderr,
            )
