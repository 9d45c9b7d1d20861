"""The automation engine: real stacks through the Pulumi Automation API and the Pulumi CLI.

With `stackflow.engine.errors`, the only module in the project that imports `pulumi.automation`.
Each stack gets a LocalWorkspace with an inline program, in its own folder under the state folder
(Pulumi.yaml and the stack's config file, with the passphrase's salt, survive between runs there).
Raw CLI text becomes typed, redacted errors in one place (`stackflow.engine.errors.classify`); log
lines and engine events reach the caller through the listener, never through prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import version as package_version
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pulumi
import pulumi.automation as auto
from pulumi.automation.events import EngineEvent, OpMap, StepEventMetadata
from semver import VersionInfo

from stackflow.engine.base import (
    ChangeCounts,
    Listener,
    Operation,
    OperationResult,
    OutputValue,
    ProgramFn,
    PropertyChange,
    ResourceChange,
    ResourceEvent,
    StackSpec,
    Stopwatch,
)
from stackflow.engine.errors import classify as classify
from stackflow.engine.errors import error_detail as _detail
from stackflow.engine.errors import is_lock_conflict as _is_lock_conflict
from stackflow.engine.errors import is_transient_error as is_transient_error
from stackflow.engine.errors import scrub_plan_violation
from stackflow.errors import (
    EngineUnavailable,
    OperationCancelled,
    PermanentStackError,
    StackError,
    StackflowError,
)
from stackflow.processes import pid_alive
from stackflow.redact import MASK, Redactor
from stackflow.secretbox import state_passphrase
from stackflow.settings import Settings

T = TypeVar("T")

# Provider plugins follow the installed Python packages, so the CLI runs the code we type-check.
PLUGINS = (("aws", "pulumi-aws"), ("random", "pulumi-random"))
# Cloud and self-managed backends answer `pulumi cancel` with nothing running in these words.
_NOTHING_TO_CANCEL = ("no update in progress", "has never been updated", "already completed")
_CHANGE = {
    "create": "create",
    "import": "create",
    "import-replacement": "replace",
    "update": "update",
    "delete": "delete",
    "discard": "delete",
    "discard-replaced": "delete",
    "remove-pending-replace": "delete",
    "replace": "replace",
    "create-replacement": "replace",
    "delete-replaced": "replace",
    "same": "same",
    "read": "same",
    "read-replacement": "same",
    "refresh": "refresh",
}


# --- small helpers -----------------------------------------------------------------------------


# pulumi_aws loads its submodules (ec2, rds, ...) on first attribute access, and that first load
# is not thread-safe: two programs touching `aws.ec2` at once in one process (several environments
# deployed by one parent flow) can see a half-loaded module ("has no attribute 'Vpc'"). Programs
# declare their resources under this lock; declaring takes milliseconds, the deploy runs after.
_DECLARE_LOCK = threading.Lock()


def declared_exports(program: ProgramFn) -> Mapping[str, Any]:
    """Run `program`'s declarations, one program at a time in this process; its exports."""
    with _DECLARE_LOCK:
        return program()


def pulumi_program(
    program: ProgramFn, on_declared: Callable[[int], None] | None = None
) -> auto.PulumiFn:
    """The inline Pulumi program for `program`: declares its resources and exports what it returns.

    Args:
        program: a plain program function returning its exports (name -> Output or value).
        on_declared: called with the number of resources the program declared (the live view's
            "done/total"); resources declared later, inside an `apply`, are not counted.
    """

    def declare() -> None:
        declared = 0

        def count(_: pulumi.ResourceTransformationArgs) -> None:
            nonlocal declared
            declared += 1  # called once per resource as it is constructed; changes nothing

        if on_declared is not None:
            pulumi.runtime.register_stack_transformation(count)
        for key, value in declared_exports(program).items():
            pulumi.export(key, value)
        if on_declared is not None:
            on_declared(declared)

    return declare


def _secret_strings(value: Any) -> list[str]:
    """Every string inside a secret output (a secret may be a dict or a list of strings)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _secret_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _secret_strings(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def _counts(changes: OpMap | Mapping[str, int] | None) -> ChangeCounts:
    # OpType is a str enum, so the CLI's plain string keys and OpType keys look up alike.
    raw: Mapping[Any, int] = changes or {}
    return ChangeCounts(
        create=int(raw.get("create", 0)) + int(raw.get("import", 0)),
        update=int(raw.get("update", 0)),
        delete=int(raw.get("delete", 0)),
        replace=int(raw.get("replace", 0)),
        same=int(raw.get("same", 0)),
    )


def _resource_event(
    event: EngineEvent, spec: StackSpec, operation: Operation
) -> ResourceEvent | None:
    metadata: StepEventMetadata
    if event.resource_pre_event is not None:
        metadata, status = event.resource_pre_event.metadata, "started"
    elif event.res_outputs_event is not None:
        metadata, status = event.res_outputs_event.metadata, "done"
    elif event.res_op_failed_event is not None:
        metadata, status = event.res_op_failed_event.metadata, "failed"
    else:
        return None
    op = str(getattr(metadata.op, "value", metadata.op))
    return ResourceEvent(
        stack=spec.node,
        operation=operation,
        urn=metadata.urn,
        type=metadata.type,
        name=metadata.urn.rsplit("::", 1)[-1],
        change=_CHANGE.get(op, op),
        status=status,
    )


_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # Pulumi's wire value for "known after apply"
_SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's signature key of a secret value
_PATH_PART = re.compile(r'([^.\[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


def _at(values: Mapping[str, Any] | None, path: str) -> Any:
    """The value at a Pulumi property path ("tags.Name", "ingress[0].cidrBlocks") or None."""
    current: Any = values or {}
    for name, index, quoted in _PATH_PART.findall(path):
        if index:
            if not isinstance(current, list) or int(index) >= len(current):
                return None
            current = current[int(index)]
        else:
            if not isinstance(current, Mapping):
                return None
            current = current.get(quoted or name)
    return current


def _shown(value: Any, redactor: Redactor, limit: int = 120) -> Any:
    """A property value as a preview may show it: secrets masked, unknowns named, long cut."""
    if isinstance(value, Mapping) and _SECRET_SIG in value:
        return MASK
    if value == _UNKNOWN:
        return "(known after apply)"
    if isinstance(value, Mapping):
        return {k: _shown(v, redactor, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v, redactor, limit) for v in value]
    if isinstance(value, str):
        text = redactor(value)
        return text if len(text) <= limit else text[: limit - 1] + "…"
    return value


def resource_change(metadata: StepEventMetadata, redactor: Redactor) -> ResourceChange | None:
    """What one engine step changes, property by property (None for a step that changes nothing).

    Property names come from the provider's detailed diff (Pulumi's `diffs` when it has none);
    old and new values are the step's inputs, with secrets masked.
    """
    op = str(getattr(metadata.op, "value", metadata.op))
    change = _CHANGE.get(op, op)
    if change not in ("create", "update", "replace", "delete"):
        return None
    old = metadata.old.inputs if metadata.old is not None else None
    new = metadata.new.inputs if metadata.new is not None else None
    forcing = set(metadata.keys or [])
    properties: list[PropertyChange] = []
    if change in ("update", "replace"):
        detailed = metadata.detailed_diff or {}
        names = list(detailed) or list(metadata.diffs or [])
        for name in names:
            diff = detailed.get(name)
            kind = str(getattr(diff.diff_kind, "value", "update")) if diff else "update"
            properties.append(
                PropertyChange(
                    name=name,
                    kind=kind.removesuffix("-replace"),
                    forces_replacement=kind.endswith("-replace") or name in forcing,
                    old=_shown(_at(old, name), redactor),
                    new=_shown(_at(new, name), redactor),
                )
            )
    return ResourceChange(
        urn=metadata.urn,
        type=metadata.type,
        name=metadata.urn.rsplit("::", 1)[-1],
        change=change,
        properties=tuple(properties),
    )


def _local_cli_processes(stack_name: str) -> list[int]:
    """Our own child `pulumi` processes working on `stack_name` (read from /proc: Linux only)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    me, found = os.getpid(), []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            argv = [
                a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0")
            ]
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if os.path.basename(argv[0]) == "pulumi" and ("--stack", stack_name) in pairwise(argv):
            found.append(int(entry.name))
    return found


def find_pulumi_cli() -> auto.PulumiCommand:
    """The Pulumi CLI at exactly the pinned SDK's version, by its path (never any `pulumi` on PATH
    that happens to be there): the one `scripts/setup.sh` built or reused into the cache.

    Raises:
        EngineUnavailable: no such CLI; says how to get one.
    """
    from stackflow.pulumi_cli import CLI_VERSION, find_cli

    path = find_cli()
    if path is None:
        raise EngineUnavailable(
            f"the Pulumi CLI v{CLI_VERSION} (the pinned SDK's version) is not installed: run "
            "`bash scripts/setup.sh`, which builds it from Go modules once (4-7 minutes on 2 "
            f"cores) and reuses it after, or put a pulumi v{CLI_VERSION} on PATH and run it again"
        )
    return _VerifiedCommand(path, VersionInfo.parse(CLI_VERSION))


class _VerifiedCommand(auto.PulumiCommand):
    """The CLI at `path`, whose exact version `stackflow.pulumi_cli` has already checked. The SDK's
    own constructor would run `pulumi version` again, and that writes a log into ~/.pulumi."""

    def __init__(self, path: Path, version: VersionInfo) -> None:  # no second version check
        self.command = str(path)
        self.version = version


# --- the engine --------------------------------------------------------------------------------


class AutomationEngine:
    """Engine on the Pulumi Automation API. Safe for concurrent operations on different stacks."""

    name = "automation"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cloud = settings.cloud
        self._cloud_url: str | None = None
        self._guard = threading.Lock()
        self._plugin_lock = threading.Lock()
        self._command: auto.PulumiCommand | None = None
        self._plugins_ready = False
        self._stacks: dict[str, auto.Stack] = {}
        self._stack_locks: dict[str, threading.Lock] = {}
        self._running: dict[str, auto.Stack] = {}
        self._cancelled: set[str] = set()
        self._lock_conflicts: dict[str, int] = {}
        self._known_secrets: set[str] = set(settings.secret_values())
        self._redactor = Redactor(self._known_secrets)
        self._passphrase = state_passphrase(settings)
        if self._passphrase:
            self._learn(self._passphrase)

    @property
    def local(self) -> bool:
        """Whether this engine deploys to the local cloud (moto on loopback), not AWS."""
        return self.cloud == "local"

    @property
    def pulumi_home(self) -> Path | None:
        """The local cloud's own Pulumi home (its plugins); None on AWS: the user's ~/.pulumi."""
        if not self.local:
            return None
        from stackflow.localcloud.paths import pulumi_home

        return pulumi_home(self.settings.localcloud_root)

    def _local_cloud(self) -> str:
        """Start the local cloud server if needed and install the plugins (once per engine)."""
        with self._plugin_lock:
            if self._cloud_url is None:
                from stackflow.localcloud.install import install_plugins
                from stackflow.localcloud.server import ensure_cloud

                home = self.pulumi_home
                assert home is not None
                install_plugins(home)
                server = ensure_cloud(
                    self.settings.localcloud_root,
                    self.settings.localcloud.port,
                    region=self.settings.aws.region,
                    say=lambda _line: None,
                )
                self._cloud_url = server.url
            return self._cloud_url

    # -- settings to workspace --

    @property
    def backend_url(self) -> str:
        return self.settings.resolved_backend_url

    @property
    def secrets_provider(self) -> str:
        return self.settings.secrets_provider or "passphrase"

    @property
    def _cloud(self) -> bool:
        return urlsplit(self.backend_url).scheme == "https"

    def stack_name(self, spec: StackSpec) -> str:
        """The Pulumi stack name: org/project/environment with a Pulumi org, else the environment."""
        org = self.settings.pulumi_org
        if org:
            return auto.fully_qualified_stack_name(org, spec.pulumi_project, spec.environment)
        return spec.environment

    def work_dir(self, spec: StackSpec) -> Path:
        """The workspace folder of one stack; per environment, so parallel runs never share one."""
        root = self.settings.state_dir / "workspaces" / self.cloud  # config salts are per backend
        return root / spec.pulumi_project / spec.environment

    def env_vars(self) -> dict[str, str]:
        """What every Pulumi command of this engine gets in its environment."""
        s = self.settings
        env = {
            "PULUMI_BACKEND_URL": self.backend_url,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "AWS_REGION": s.aws.region,
        }
        if self.secrets_provider == "passphrase" and self._passphrase:
            env["PULUMI_CONFIG_PASSPHRASE"] = self._passphrase
        if s.pulumi_access_token is not None:
            env["PULUMI_ACCESS_TOKEN"] = s.pulumi_access_token.get_secret_value()
        if self.local:
            from stackflow.localcloud.plugin import ENDPOINT_ENV

            # The project's plugins from its own Pulumi home; nothing is downloaded, ever.
            env["PULUMI_HOME"] = str(self.pulumi_home)
            env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"
            env[ENDPOINT_ENV] = self._local_cloud()
        elif s.aws.profile:
            env["AWS_PROFILE"] = s.aws.profile
        return env

    @property
    def backend_folder(self) -> Path | None:
        """The folder of a file backend (file://~/x and file:///abs both occur); None otherwise."""
        if urlsplit(self.backend_url).scheme != "file":
            return None
        return Path(self.backend_url.removeprefix("file://").split("?", 1)[0]).expanduser()

    def _ensure_backend_folder(self) -> None:
        if self.backend_folder is not None:  # Pulumi refuses a folder that does not exist
            self.backend_folder.mkdir(parents=True, exist_ok=True)

    def _cli(self) -> auto.PulumiCommand:
        with self._guard:
            if self._command is None:
                self._command = find_pulumi_cli()
            return self._command

    def _workspace_options(self, spec: StackSpec) -> auto.LocalWorkspaceOptions:
        work_dir = self.work_dir(spec)
        work_dir.mkdir(parents=True, exist_ok=True)
        self._ensure_backend_folder()
        return auto.LocalWorkspaceOptions(
            work_dir=str(work_dir),
            env_vars=self.env_vars(),
            secrets_provider=self.secrets_provider,
            project_settings=auto.ProjectSettings(
                name=spec.pulumi_project,
                runtime="python",
                backend=auto.ProjectBackend(url=self.backend_url),
            ),
            pulumi_command=self._cli(),
        )

    def _stack(self, spec: StackSpec, *, create: bool) -> auto.Stack | None:
        """The cached stack, else create-or-select it (create) or select it (None if missing)."""
        with self._guard:
            lock = self._stack_locks.setdefault(spec.label, threading.Lock())
        with lock:
            with self._guard:
                cached = self._stacks.get(spec.label)
            if cached is not None:
                return cached
            name, options = self.stack_name(spec), self._workspace_options(spec)
            program = pulumi_program(spec.program)
            if create:
                stack = auto.create_or_select_stack(
                    stack_name=name, project_name=spec.pulumi_project, program=program, opts=options
                )
            else:
                try:
                    stack = auto.select_stack(
                        stack_name=name,
                        project_name=spec.pulumi_project,
                        program=program,
                        opts=options,
                    )
                except auto.StackNotFoundError:
                    return None
            with self._guard:
                return self._stacks.setdefault(spec.label, stack)

    def _ensure_plugins(self, workspace: auto.Workspace, listener: Listener) -> None:
        if self.local:
            return  # the project's own plugins, installed with the local cloud
        with self._plugin_lock:
            if self._plugins_ready:
                return
            for plugin, package in PLUGINS:
                wanted = "v" + package_version(package)
                listener.line(f"installing the {plugin} provider plugin {wanted} (once per engine)")
                workspace.install_plugin(plugin, wanted)
            self._plugins_ready = True

    def _config(self, spec: StackSpec) -> dict[str, auto.ConfigValue]:
        aws = self.settings.aws
        config = {"aws:region": auto.ConfigValue(aws.region)}
        if aws.profile and not self.local:
            config["aws:profile"] = auto.ConfigValue(aws.profile)
        for key, item in spec.config.items():
            config[key] = auto.ConfigValue(item.value, secret=item.secret)
        return config

    # -- secrets --

    def _learn(self, *values: str) -> None:
        fresh = [v for v in values if v]
        with self._guard:
            self._known_secrets.update(fresh)
        self._redactor.add(*fresh)

    def _teach(self, spec: StackSpec, listener: Listener) -> None:
        """Before an operation: the listener's redactor learns every secret this engine knows."""
        self._learn(*(item.value for item in spec.config.values() if item.secret))
        with self._guard:
            known = list(self._known_secrets)
        listener.redactor.add(*known)

    def _outputs(
        self, raw: Mapping[str, auto.OutputValue], listener: Listener | None = None
    ) -> dict[str, OutputValue]:
        outputs = {key: OutputValue(item.value, secret=item.secret) for key, item in raw.items()}
        secrets = [
            s for item in outputs.values() if item.secret for s in _secret_strings(item.value)
        ]
        self._learn(*secrets)
        if listener is not None:
            listener.redactor.add(*secrets)
        return outputs

    # -- errors --

    def _call(
        self, spec: StackSpec, redactor: Redactor, action: Callable[[], T], *, run: bool = False
    ) -> T:
        """Run `action`; any Automation API error leaves as a classified, redacted StackError.

        Args:
            run: `action` is a stack operation, whose lock conflicts count towards "stale lock".
        """
        try:
            return action()
        except StackflowError:
            raise
        except Exception as exc:
            failure = self._failure(exc, spec, redactor, run)
        # Raised outside the handler: the raw CLI text is neither its cause nor its context.
        raise failure

    def _failure(
        self, exc: BaseException, spec: StackSpec, redactor: Redactor, run: bool
    ) -> StackError:
        locked = _is_lock_conflict(exc)
        with self._guard:
            cancelled = spec.label in self._cancelled
            self._cancelled.discard(spec.label)
            conflicts = 0
            if run:  # consecutive lock conflicts of operations; anything else starts again
                conflicts = self._lock_conflicts.pop(spec.label, 0) + 1
                if locked:
                    self._lock_conflicts[spec.label] = conflicts
        if cancelled:
            return OperationCancelled(
                spec.label,
                redactor(f"operation cancelled on request; the CLI said: {_detail(exc)}"),
            )
        error = classify(exc, spec.label, redactor)
        if locked and run and conflicts > self.settings.stack_retries:
            return PermanentStackError(
                spec.label, redactor(self._stale_lock_advice(spec, conflicts, error))
            )
        return error

    def _stale_lock_advice(self, spec: StackSpec, attempts: int, error: StackError) -> str:
        # A killed `pulumi` leaves its lock behind and no backend expires it, and nothing here can
        # tell a stale lock from a live update elsewhere: after the retries, a person decides.
        # On a self-managed backend `pulumi cancel` only deletes the stack's lock files (it stops
        # no process), which is what clearing a stale lock needs.
        name = self.stack_name(spec)
        if self._cloud:
            how = f"`pulumi cancel --yes --stack {name}` (Pulumi Cloud then ends the stale update)"
        else:
            how = (
                f"delete the stack's lock file under {self.backend_url}/.pulumi/locks/, or run "
                f"`pulumi cancel --yes --stack {name}` in {self.work_dir(spec)} with "
                f"PULUMI_BACKEND_URL={self.backend_url} (on this backend it deletes the lock files)"
            )
        return (
            f"{error.reason} (still locked after {attempts} attempts). If no other update of this "
            f"stack is running, a killed process left the lock behind: clear it with {how}, then "
            "run again; the next run clears what the interrupted update left pending."
        )

    # -- operations --

    @contextlib.contextmanager
    def _running_on(self, spec: StackSpec, stack: auto.Stack) -> Iterator[None]:
        with self._guard:
            self._running[spec.label] = stack
            self._cancelled.discard(spec.label)
        try:
            yield
        finally:
            with self._guard:
                self._running.pop(spec.label, None)

    def run(
        self,
        operation: Operation,
        spec: StackSpec,
        listener: Listener,
        plan: Path | None = None,
        refresh: bool = False,
    ) -> OperationResult:
        """Preview, update, refresh, check drift of, or destroy one stack through the Pulumi CLI.

        `plan`: a preview saves Pulumi's update plan to this file; an up applies under it, and
        Pulumi stops the update if the stack would do anything the plan does not allow
        (PlanChanged). `refresh`: a preview reads the cloud first, as the up of a drifted stack
        will.

        Raises:
            EngineUnavailable: the Pulumi CLI is missing or too old.
            TransientStackError: worth retrying (lock held, throttled, network).
            PermanentStackError: a retry will not help; the message names the stack.
            OperationCancelled: `cancel` was called while it ran.
        """
        self._teach(spec, listener)
        return self._call(
            spec,
            listener.redactor,
            lambda: self._run(operation, spec, listener, plan, refresh),
            run=True,
        )

    def _run(
        self,
        operation: Operation,
        spec: StackSpec,
        listener: Listener,
        plan: Path | None,
        refresh: bool,
    ) -> OperationResult:
        watch = Stopwatch()
        stack = self._stack(spec, create=True)
        assert stack is not None  # create_or_select returns one or raises
        self._ensure_plugins(stack.workspace, listener)
        listener.line(
            f"{operation.value} {spec.pulumi_project}/{stack.name} on the {self.settings.target_label} "
            f"(backend {self.backend_url})"
        )
        stack.set_all_config(self._config(spec))
        program = pulumi_program(spec.program, listener.declared)

        planned: dict[str, ResourceChange] = {}  # by URN: a replace is several steps, one change

        def on_event(event: EngineEvent) -> None:
            converted = _resource_event(event, spec, operation)
            if converted is not None:
                listener.event(converted)
            if event.resource_pre_event is not None and operation in (
                Operation.PREVIEW,
                Operation.UP,
            ):
                change = resource_change(event.resource_pre_event.metadata, listener.redactor)
                if change is not None and (
                    change.urn not in planned or change.properties
                ):  # the create-replacement step carries the diff; delete-replaced does not
                    planned[change.urn] = change

        def on_output(line: str) -> None:
            listener.line(scrub_plan_violation(line))  # a plan violation prints secret values

        common: dict[str, Any] = {
            "on_output": on_output,
            "on_event": on_event,
            "program": program,
        }
        outputs: dict[str, OutputValue] = {}
        with self._running_on(spec, stack):
            if plan is not None:
                plan.parent.mkdir(parents=True, exist_ok=True)
            if operation is Operation.UP:
                up = stack.up(**common, plan=str(plan) if plan else None)
                changes = _counts(up.summary.resource_changes)
                outputs = self._outputs(up.outputs, listener)
            elif operation is Operation.PREVIEW:
                preview = stack.preview(
                    **common, plan=str(plan) if plan else None, refresh=refresh or None
                )
                changes = _counts(preview.change_summary)
            elif operation is Operation.REFRESH:
                changes = _counts(stack.refresh(**common).summary.resource_changes)
            elif operation is Operation.DRIFT:
                # A refresh preview: what refresh would adopt is the drift; nothing is written.
                changes = _counts(stack.preview_refresh(**common).change_summary)
            else:
                changes = _counts(stack.destroy(**common).summary.resource_changes)
        if operation in (Operation.REFRESH, Operation.DRIFT):
            outputs = self._outputs(stack.outputs(), listener)
        with self._guard:
            self._lock_conflicts.pop(spec.label, None)
            self._cancelled.discard(spec.label)
        listener.line(
            f"{operation.value} {spec.label}: {changes.create} to create, {changes.update} to "
            f"update, {changes.replace} to replace, {changes.delete} to delete, {changes.same} "
            f"unchanged ({watch.elapsed:.2f}s)"
        )
        return OperationResult(
            stack=spec.node,
            operation=operation,
            changes=changes,
            outputs=outputs,
            duration_s=watch.elapsed,
            engine=self.name,
            resource_changes=tuple(planned.values()),
        )

    def outputs(self, spec: StackSpec) -> dict[str, OutputValue]:
        """The stack's outputs from its last update ({} if the stack does not exist).

        Raises:
            EngineUnavailable, TransientStackError, PermanentStackError: as `run`.
        """

        def read() -> dict[str, OutputValue]:
            stack = self._stack(spec, create=False)
            return {} if stack is None else self._outputs(stack.outputs())

        return self._call(spec, self._redactor, read)

    def exists(self, spec: StackSpec) -> bool:
        """Whether the stack exists in the backend and holds resources.

        Raises:
            EngineUnavailable, TransientStackError, PermanentStackError: as `run`.
        """

        def check() -> bool:
            stack = self._stack(spec, create=False)
            if stack is None:
                return False
            for summary in stack.workspace.list_stacks():
                # Backends list a project's stacks by short or by fully qualified name.
                if summary.name.rsplit("/", 1)[-1] == spec.environment:
                    return bool(summary.resource_count)
            return False

        return self._call(spec, self._redactor, check)

    def recover(self, spec: StackSpec, listener: Listener) -> bool:
        """Clear what an interrupted update left behind: its lock file on a file backend, when its
        `pulumi` process is gone, and the pending operations in the stack's state.

        Returns True if there were any (pending operations are cleared with
        `refresh --clear-pending-creates`).

        Raises:
            EngineUnavailable, TransientStackError, PermanentStackError: as `run`.
        """
        self._teach(spec, listener)

        def clear() -> bool:
            unlocked = self._clear_stale_locks(spec, listener)
            stack = self._stack(spec, create=False)
            if stack is None:
                return unlocked
            # The export holds plaintext secrets: only its pending operations are looked at.
            deployment = stack.export_stack().deployment or {}
            pending = deployment.get("pending_operations") or []
            if not pending:
                return unlocked
            listener.line(
                f"stack {spec.label} has {len(pending)} pending operations left by an interrupted "
                "update; clearing them with a refresh --clear-pending-creates"
            )
            stack.set_all_config(self._config(spec))
            with self._running_on(spec, stack):
                stack.refresh(
                    clear_pending_creates=True,
                    on_output=listener.line,
                    program=pulumi_program(spec.program),
                )
            return True

        return self._call(spec, listener.redactor, clear)

    def _clear_stale_locks(self, spec: StackSpec, listener: Listener) -> bool:
        """Delete the lock files a killed `pulumi` left on a file backend: those whose process is
        gone from this machine. Nothing else removes them, and every later operation on the stack
        fails on them. Runs while this run holds the stack's concurrency slot, so no other run of
        ours is updating the stack; a live process's lock, or another machine's, is left alone.

        Returns True if any was deleted.
        """
        if self.backend_folder is None:
            return False  # other backends: the stale-lock advice after the retries says what to do
        locks = self.backend_folder / ".pulumi" / "locks"
        folders = (
            locks / "organization" / spec.pulumi_project / spec.environment,
            locks / spec.environment,
        )
        removed = False
        for path in sorted(p for folder in folders for p in folder.glob("*.json")):
            try:
                holder = json.loads(path.read_text())
                pid, host = int(holder["pid"]), str(holder["hostname"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # gone meanwhile, or not a lock we can read: left to the advice
            if host != socket.gethostname() or pid_alive(pid):
                continue
            path.unlink(missing_ok=True)
            path.with_name(path.name + ".attrs").unlink(missing_ok=True)
            listener.line(
                f"stack {spec.label}: removed the lock of an interrupted update (pulumi pid {pid} "
                f"on {host}, which is gone)"
            )
            removed = True
        return removed

    def cancel(self, spec: StackSpec, interrupt: bool = True) -> None:
        """Stop the operation running on this stack, if any; `run` then raises OperationCancelled.

        Pulumi Cloud: `pulumi cancel`. Self-managed backends: there `pulumi cancel` would only delete
        the lock of our own live update (stopping nothing), so our `pulumi` child is interrupted
        instead (SIGINT: the CLI's graceful cancel; Linux). `interrupt=False`: a terminal's Ctrl-C
        already reached our `pulumi` children (a second SIGINT would make Pulumi stop at once,
        without finishing the operations in flight), so it is only recorded.

        Raises:
            TransientStackError, PermanentStackError: the cancel itself failed.
        """
        with self._guard:
            stack = self._running.get(spec.label)
            if stack is None:
                return
            self._cancelled.add(spec.label)
        if not interrupt:
            return
        if not self._cloud:
            for pid in _local_cli_processes(stack.name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)
            return
        try:
            stack.cancel()
            return
        except auto.CommandError as exc:
            with self._guard:
                finished = spec.label not in self._running
            if finished or any(t in str(exc).lower() for t in _NOTHING_TO_CANCEL):
                return  # it ended on its own meanwhile
            failure = classify(exc, spec.label, self._redactor)
        raise failure

    def remove(self, spec: StackSpec) -> None:
        """Remove the stack (empty, after destroy) and its config from the backend.

        Raises:
            PermanentStackError: the stack still has resources (Pulumi refuses), or another error.
        """

        def drop() -> None:
            stack = self._stack(spec, create=False)
            if stack is None:
                return
            stack.workspace.remove_stack(stack.name)
            with self._guard:
                self._stacks.pop(spec.label, None)

        self._call(spec, self._redactor, drop)

    def versions(self) -> dict[str, str]:
        """SDK, plugin and (when the CLI is found) CLI versions; part of every fingerprint."""
        found = {
            "engine": self.name,
            "cloud": self.cloud,
            "pulumi-sdk": package_version("pulumi"),
            "pulumi-aws": package_version("pulumi-aws"),
            "pulumi-random": package_version("pulumi-random"),
        }
        with contextlib.suppress(EngineUnavailable):
            cli = self._cli().version
            if cli is not None:
                found["pulumi-cli"] = str(cli)
        return found
