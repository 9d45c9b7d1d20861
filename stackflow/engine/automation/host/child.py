"""The program's own process: hosts the Pulumi SDK's language server for one project's program,
which the CLI connects to (`--client`), and runs the program when the CLI asks it to.

Started by `host.ProgramHost` with a clean environment, in a process group of its own, from the
program's folder. It reads its job (one JSON line) on stdin, says where it serves on the control
pipe, and serves until stdin closes (its operation ended, or stackflow died: either way it ends).
What the parent must know goes over the control pipe as JSON lines: the resource types declared,
the stacks read through a StackReference, a reference refused, how many resources were declared.
The program's own prints go to stdout and stderr, which the parent reads, masks and logs.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
from collections.abc import Mapping
from concurrent import futures
from pathlib import Path
from typing import IO, Any

from stackflow.engine.base import INTERNAL_OUTPUT
from stackflow.engine.hosted import STACK_REFERENCE, HostedProgram


class Control:
    """The control pipe to the parent: one JSON object a line, from any thread."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, **message: Any) -> None:
        with self._lock:
            self._stream.write(json.dumps(message) + "\n")
            self._stream.flush()


class Program:
    """The project's entry file as Pulumi's Python host runs it (as `__main__`, from its folder),
    with stackflow's stamp exported after it when the job carries one."""

    def __init__(self, job: Mapping[str, Any], control: Control) -> None:
        self.entry = Path(job["entry"])
        self.folder = Path(job["folder"])
        self.stamp: Mapping[str, Any] | None = job.get("stamp")
        self.seal: Mapping[str, str] | None = job.get("seal")
        self.hosted = HostedProgram(
            self.folder,
            self.entry,
            str(job.get("owner", "")),
            readable=job.get("readable"),
            known=job.get("known") or {},
        )
        self.control = control
        self._types: set[str] = set()
        self._count = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        import pulumi

        pulumi.runtime.register_stack_transformation(self._declared)
        argv = sys.argv
        sys.argv = [str(self.entry)]
        try:
            runpy.run_path(str(self.entry), run_name="__main__")
        finally:
            sys.argv = argv
            with self._lock:
                self.control.send(count=self._count)
        if self.stamp is not None:
            from stackflow.engine.automation.program import stamp_output

            root = pulumi.runtime.get_root_resource()
            exports = dict(getattr(root, "outputs", {}) or {})
            pulumi.export(INTERNAL_OUTPUT, stamp_output(self.stamp, exports, self._sealer()))

    def _sealer(self) -> Any:
        if not self.seal:
            return None
        from stackflow.secretbox import StampSeal

        seal = StampSeal.keyed(self.seal["salt"], self.seal["key"])
        return lambda _fingerprint: seal  # derived for this stamp's fingerprint by the parent

    def _declared(self, args: Any) -> None:
        import pulumi

        with self._lock:
            self._count += 1
        if isinstance(args.resource, pulumi.CustomResource):
            token = str(args.type_)
            with self._lock:
                fresh = token not in self._types
                self._types.add(token)
            if fresh:
                self.control.send(declared=token)
            if token == STACK_REFERENCE:
                self._reference(args.props.get("name"))
        absolute_paths(args.props, self.folder)
        return None  # the resource as declared: its assets' paths were fixed in place

    def _reference(self, name: Any) -> None:
        """Note a stack the program reads, and refuse one its node may not read."""
        import pulumi

        if isinstance(name, pulumi.Output):
            name.apply(self._reference)
            return
        if not isinstance(name, str):
            return
        self.control.send(read=name)
        why = self.hosted.refusal(name, pulumi.get_project(), pulumi.get_stack())
        if why:
            self.control.send(refused=why)
            raise pulumi.RunError(why)


def absolute_paths(value: Any, folder: Path) -> None:
    """Make the path of every file asset and archive inside `value` absolute, in place (the
    engine and the provider plugins read them from other folders)."""
    import pulumi

    if isinstance(value, pulumi.FileAsset | pulumi.FileArchive):
        if not os.path.isabs(value.path):
            value.path = str(folder / value.path)
    elif isinstance(value, pulumi.AssetArchive):
        absolute_paths(value.assets, folder)
    elif isinstance(value, Mapping):
        for item in value.values():
            absolute_paths(item, folder)
    elif isinstance(value, list | tuple):
        for item in value:
            absolute_paths(item, folder)


def main() -> None:
    """Serve the job read from stdin until stdin closes; never returns."""
    job = json.loads(sys.stdin.readline())
    control = Control(os.fdopen(int(job["control_fd"]), "w", encoding="utf-8"))
    sys.dont_write_bytecode = True  # the project's folder is only read
    sys.path.insert(0, str(job["folder"]))
    import grpc
    from pulumi.automation._server import LanguageServer
    from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
    from pulumi.runtime.proto import language_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_GRPC_CHANNEL_OPTIONS)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(
        LanguageServer(Program(job, control)), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    control.send(ready=f"127.0.0.1:{port}")
    for _ in sys.stdin:  # closed by the parent when its operation ended, or when it died
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a program's thread still running must not hold the process
