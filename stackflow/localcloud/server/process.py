"""The cloud server's own process: `python -m stackflow.localcloud.server --root DIR --port N`.

At start it replays the journal into a fresh moto, starts serving, starts the data plane (which
may call the API), writes `server.json` and says it is ready; it runs until SIGTERM/SIGINT or
`POST /_stackflow/shutdown`. Everything here says "local cloud": it stands in for AWS, it is not AWS.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

from stackflow.localcloud.errors import JournalError, PassphraseFileError
from stackflow.localcloud.paths import knobs_path, passphrase
from stackflow.localcloud.server.app import CloudApp
from stackflow.localcloud.server.determinism import install_determinism
from stackflow.localcloud.server.hooks import NoDataplane, load_dataplane
from stackflow.localcloud.server.motoapp import (
    moto_environment,
    moto_wsgi_app,
    quiet_request_handler,
)
from stackflow.localcloud.server.record import (
    DEFAULT_PORT,
    DEFAULT_REGION,
    CloudServer,
    forget_record,
    write_record,
)

log = logging.getLogger("stackflow.localcloud")


def serve(root: Path, port: int, region: str, *, dataplane: bool = True) -> int:
    """Run the cloud server in this process until SIGTERM/SIGINT or `POST /_stackflow/shutdown`.

    Returns:
        The exit code.

    Raises:
        JournalError: the journal has a damaged line (names the file and the line).
    """
    from werkzeug.serving import make_server

    from stackflow.localcloud.knobs import KnobStore

    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    passphrase(root)
    moto_environment(region, port)
    install_determinism()
    url = f"http://127.0.0.1:{port}"
    app = CloudApp(
        root,
        region,
        url,
        moto_wsgi_app(),
        load_dataplane(root, url, region) if dataplane else NoDataplane(),
        KnobStore(knobs_path(root)),
    )
    app.replay()
    log.info(
        "replayed %d journal entries in %.2fs (%d failed)",
        app.replayed,
        app.replay_s,
        app.replay_failures,
    )
    httpd = make_server(
        "127.0.0.1", port, app, threaded=True, request_handler=quiet_request_handler()
    )
    serving = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="cloud-http", daemon=True
    )
    serving.start()
    threading.Thread(target=app.warm, name="cloud-warm", daemon=True).start()
    signalled = threading.Event()  # SIGTERM/SIGINT: the databases end with the server

    def on_signal(*_: object) -> None:
        signalled.set()
        app.stop_requested.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        app.dataplane.start_all()  # after serving starts: the data plane may call the API
        app.dataplane.keep_alive()
        write_record(CloudServer(url, os.getpid(), root, port, region, dataplane))
        app.ready = True
        log.info("local cloud serving on %s (ready in %.2fs)", url, time.monotonic() - started)
        while not app.stop_requested.wait(1.0):
            pass
    finally:
        app.stopping = True
        if signalled.is_set():  # the keeper stops first: it starts none of them again
            with contextlib.suppress(Exception):
                app.dataplane.stop_all()
        httpd.shutdown()
        forget_record(root, os.getpid())
        log.info("local cloud on %s stopped", url)
    return 0


def main(argv: list[str] | None = None) -> int:
    """The server process's command line; exits the process when the server stops."""
    parser = argparse.ArgumentParser(
        prog="python -m stackflow.localcloud.server",
        description="The local cloud's server (moto on loopback, persistent); not AWS.",
    )
    parser.add_argument("--root", type=Path, required=True, help="the cloud root folder")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port on 127.0.0.1")
    parser.add_argument("--region", default=DEFAULT_REGION, help="default AWS region")
    parser.add_argument(
        "--no-dataplane",
        dest="dataplane",
        action="store_false",
        help="serve the AWS APIs only: no databases, no app stand-ins",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    try:
        code = serve(args.root.resolve(), args.port, args.region, dataplane=args.dataplane)
    except (JournalError, PassphraseFileError) as exc:  # the caller shows this log's tail
        log.error("%s", exc)
        code = 1
    logging.shutdown()
    # Nothing is left to flush (the journal and knobs are written per change); skipping the
    # interpreter's teardown of moto's thousands of objects makes `cloud stop` a second faster.
    os._exit(code)
