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
    to_file = logging.FileHandler(log_file, encoding="utf-8")
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
    try:
        yield log_file
    finally:
        logging.captureWarnings(False)
        for handler in added:
            root.removeHandler(handler)
            handler.close()
        for logger, handler in removed:
            logger.addHandler(handler)
