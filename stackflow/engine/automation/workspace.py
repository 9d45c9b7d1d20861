"""From settings to Pulumi workspaces: the backend, the secrets provider, what every `pulumi`
command gets in its environment, one LocalWorkspace folder per stack, the stacks themselves
(created or selected once per engine), the provider plugins, and the secrets learnt on the way
(every one of them masked in whatever the engine reports)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from importlib.metadata import version as package_version
from pathlib import Path

import pulumi.automation as auto

from stackflow.backends import Backend, backend_for
from stackflow.engine.automation.changes import secret_strings
from stackflow.engine.automation.command import PulumiCLI, RunningCommands, find_pulumi_cli
from stackflow.engine.automation.known import KnownStack
from stackflow.engine.automation.program import in_process, pulumi_program
from stackflow.engine.automation.stackfile import (
    apply_config,
    forget_cached_salt,
    private_file,
    scrub_once,
)
from stackflow.engine.base import INTERNAL_OUTPUT, Listener, OutputValue, StackSpec
from stackflow.engine.checkpoints import Checkpoint, CheckpointReader
from stackflow.engine.pulumisecrets import passphrase_salt
from stackflow.engine.sealed import open_outputs
from stackflow.errors import StackflowError
from stackflow.redact import Redactor
from stackflow.secretbox import state_passphrase
from stackflow.settings import Settings
from stackflow.state import private_folder

# Provider plugins follow the installed Python packages, so the CLI runs the code we type-check.
PLUGINS = (("aws", "pulumi-aws"), ("random", "pulumi-random"))


class Workspaces:
    """One engine's workspaces and stacks. Safe to use from several threads on different stacks."""

    def __init__(self, settings: Settings, commands: RunningCommands) -> None:
        self.settings = settings
        self.cloud = settings.cloud
        self.commands = commands
        self._guard = threading.Lock()
        self._plugin_lock = threading.Lock()
        self._cloud_url: str | None = None
        self._command: PulumiCLI | None = None
        self._plugins_ready = False
        self._stacks: dict[str, KnownStack] = {}
        self._reader: CheckpointReader | None = None
        self._stack_locks: dict[str, threading.Lock] = {}
        self._surveys: dict[str, Path] = {}  # stack label -> its survey file, while surveying
        self._known_secrets: set[str] = set(settings.secret_values())
        self.redactor = Redactor(self._known_secrets)
        self.passphrase = state_passphrase(settings)
        if self.passphrase:
            self.learn(self.passphrase)
        scrub_once(settings.state.workspaces, self.pulumi_home)  # what older versions wrote

    # -- where --

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

    def local_cloud(self) -> str:
        """Start the local cloud server if needed and install the plugins (once per engine)."""
        with self._plugin_lock:
            if self._cloud_url is None:
                from stackflow.localcloud.install import install_plugins
                from stackflow.localcloud.server import ensure_cloud_for

                home = self.pulumi_home
                assert home is not None
                install_plugins(home)
                self._cloud_url = ensure_cloud_for(self.settings).url
            return self._cloud_url

    @property
    def backend_url(self) -> str:
        return self.settings.resolved_backend_url

    @property
    def secrets_provider(self) -> str:
        return self.settings.secrets_provider or "passphrase"

    @property
    def backend(self) -> Backend:
        """The kind of backend the state lives in."""
        return backend_for(self.backend_url)

    @property
    def pulumi_cloud(self) -> bool:
        """Whether the backend keeps state behind its API and ends stale updates itself (Pulumi
        Cloud), rather than being the CLI's self-managed one."""
        return not self.backend.self_managed

    @property
    def backend_folder(self) -> Path | None:
        """The local folder that holds the backend, if it is one; None otherwise."""
        return self.backend.folder(self.backend_url)

    def stack_name(self, spec: StackSpec) -> str:
        """The Pulumi stack name: org/project/environment with a Pulumi org, else the environment."""
        org = self.settings.pulumi_org
        if org:
            return auto.fully_qualified_stack_name(org, spec.pulumi_project, spec.environment)
        return spec.environment

    def work_dir(self, spec: StackSpec) -> Path:
        """The workspace folder of one stack; per environment, so parallel runs never share one."""
        # per cloud: the config salts are per backend
        return self.settings.state.workspace(self.cloud, spec.pulumi_project, spec.environment)

    def env_vars(self) -> dict[str, str]:
        """What every Pulumi command of this engine gets in its environment (and nothing of
        stackflow's own: see `command.child_environment`)."""
        s = self.settings
        cli_url, cli_variables = self.backend.for_cli(self.backend_url)
        env = {
            **cli_variables,
            "PULUMI_BACKEND_URL": cli_url,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            # A workspace without a salt of its own takes the checkpoint's (see forget_cached_salt)
            "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
            "AWS_REGION": s.aws.region,
        }
        if self.secrets_provider == "passphrase" and self.passphrase:
            env["PULUMI_CONFIG_PASSPHRASE"] = self.passphrase
        if s.pulumi_access_token is not None:
            env["PULUMI_ACCESS_TOKEN"] = s.pulumi_access_token.get_secret_value()
        if self.local:
            from stackflow.localcloud.plugin import ENDPOINT_ENV

            # The project's plugins from its own Pulumi home; nothing is downloaded, ever.
            env["PULUMI_HOME"] = str(self.pulumi_home)
            env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"
            env[ENDPOINT_ENV] = self.local_cloud()
        elif s.aws.profile:
            env["AWS_PROFILE"] = s.aws.profile
        return env

    def checkpoints(self) -> CheckpointReader:
        """The reader of this backend's checkpoints (one connection per engine).

        Raises:
            BackendURLError: a backend it cannot read (Pulumi Cloud: the CLI answers there).
        """
        with self._guard:
            if self._reader is None:
                self._reader = CheckpointReader(self.backend_url)
            return self._reader

    # -- the CLI and the stacks --

    def cli(self) -> PulumiCLI:
        with self._guard:
            if self._command is None:
                self._command = find_pulumi_cli(self.commands)
            return self._command

    def _options(self, spec: StackSpec) -> auto.LocalWorkspaceOptions:
        work_dir = self.work_dir(spec)
        private_folder(work_dir)
        private_file(work_dir / "Pulumi.yaml")  # the SDK rewrites it in place: the mode stays
        if self.backend_folder is not None:  # Pulumi refuses a folder that does not exist
            private_folder(self.backend_folder)
        return auto.LocalWorkspaceOptions(
            work_dir=str(work_dir),
            env_vars=self.env_vars(),
            secrets_provider=self.secrets_provider,
            # no backend here: the CLI reads PULUMI_BACKEND_URL, so no credential is written
            project_settings=auto.ProjectSettings(name=spec.pulumi_project, runtime="python"),
            pulumi_command=self.cli(),
        )

    def stack(self, spec: StackSpec, *, create: bool) -> KnownStack | None:
        """The cached stack, else create-or-select it (create) or select it (None if missing);
        its commands take part in a survey while `surveying` says so."""
        found = self._stack(spec, create=create)
        if found is not None:
            with self._guard:
                survey = self._surveys.get(spec.label)
            from stackflow.localcloud.plugin.survey import SURVEY_ENV

            env = {k: v for k, v in found.workspace.env_vars.items() if k != SURVEY_ENV}
            if survey is not None:
                env[SURVEY_ENV] = str(survey)
            found.workspace.env_vars = env
        return found

    def survey_into(self, spec: StackSpec, path: Path | None) -> None:
        """While `path` is set, the stack's `pulumi` commands run with the local cloud's plugins
        in survey mode, writing to it (see `survey.surveying`); None ends it."""
        with self._guard:
            if path is None:
                self._surveys.pop(spec.label, None)
            else:
                self._surveys[spec.label] = path

    def _stack(self, spec: StackSpec, *, create: bool) -> KnownStack | None:
        """The cached stack, else open it: create it if missing (create), or None if missing.

        The backend's checkpoint says whether the stack exists, so opening one starts no `pulumi`
        process and creating one starts `stack init` alone; where the checkpoint cannot be read
        (Pulumi Cloud), `stack select` asks the CLI, as the SDK does.
        """
        with self._guard:
            lock = self._stack_locks.setdefault(spec.label, threading.Lock())
        with lock:
            with self._guard:
                cached = self._stacks.get(spec.label)
            if cached is not None:
                return cached
            name = self.stack_name(spec)
            readable, found = self._stored_checkpoint(spec)  # one read for both questions
            if self.secrets_provider == "passphrase":
                salt = passphrase_salt(found.secrets_provider) if found is not None else None
                forget_cached_salt(self.work_dir(spec), name, salt)
            exists = (found is not None) if readable else None  # None: the CLI tells
            opened: auto.Stack
            if exists:
                opened = KnownStack(name, self._workspace(spec))  # no `pulumi stack select`
            elif exists is False and create:
                opened = auto.create_stack(
                    stack_name=name,
                    project_name=spec.pulumi_project,
                    program=pulumi_program(in_process(spec.program)),
                    opts=self._options(spec),
                )  # `stack init` alone: no `stack select` that is known to fail first
            elif exists is False:
                return None
            else:  # the CLI's answer, as the SDK asks it
                opened_or_none = self._sdk_open(spec, name, create)
                if opened_or_none is None:
                    return None
                opened = opened_or_none
            stack = (
                opened
                if isinstance(opened, KnownStack)
                else KnownStack(opened.name, opened.workspace)
            )
            stack.read_outputs = lambda: self.stored_outputs(spec)
            with self._guard:
                return self._stacks.setdefault(spec.label, stack)

    def _sdk_open(self, spec: StackSpec, name: str, create: bool) -> auto.Stack | None:
        """The SDK's create-or-select (or select: None if missing), where the CLI must answer."""
        program, options = pulumi_program(in_process(spec.program)), self._options(spec)
        if create:
            return auto.create_or_select_stack(
                stack_name=name, project_name=spec.pulumi_project, program=program, opts=options
            )
        try:
            return auto.select_stack(
                stack_name=name, project_name=spec.pulumi_project, program=program, opts=options
            )
        except auto.StackNotFoundError:
            return None

    def _workspace(self, spec: StackSpec) -> auto.LocalWorkspace:
        """The stack's LocalWorkspace (writes its Pulumi.yaml; no process), as the SDK makes one
        for an inline program."""
        options = self._options(spec)
        options.program = pulumi_program(in_process(spec.program))
        assert options.project_settings is not None
        if options.project_settings.main is None:
            options.project_settings.main = os.getcwd()
        return auto.LocalWorkspace(**options.__dict__)

    @property
    def reads_checkpoints(self) -> bool:
        """Whether this engine reads the backend's checkpoints itself (a file, S3 or PostgreSQL
        backend); on Pulumi Cloud the CLI is asked."""
        return not self.pulumi_cloud

    def _stored_checkpoint(self, spec: StackSpec) -> tuple[bool, Checkpoint | None]:
        """(readable, the stack's checkpoint or None if the backend holds no such stack), read
        with no process. Not readable here: Pulumi Cloud, or a backend that does not answer."""
        if not self.reads_checkpoints:
            return False, None
        try:
            return True, self.checkpoints().checkpoint(spec.pulumi_project, self.short_name(spec))
        except StackflowError:
            return False, None

    def short_name(self, spec: StackSpec) -> str:
        """The stack's name within its project (what the backend files it under)."""
        return self.stack_name(spec).rsplit("/", 1)[-1]

    def stored_outputs(self, spec: StackSpec) -> auto.OutputMap | None:
        """The stack's outputs as the backend holds them, read with no process: plain ones from
        the checkpoint, secret ones from the seal of stackflow's stamp (`stackflow.engine.sealed`).
        None when they cannot be read so (Pulumi Cloud, no checkpoint, no passphrase to open a
        secret one, an update that was not stackflow's): the CLI answers then."""
        _, found = self._stored_checkpoint(spec)
        if found is None or found.manifest_time is None:
            return None
        opened = open_outputs(found.outputs, self.passphrase)
        if opened is None:
            return None
        return {k: auto.OutputValue(v.value, secret=v.secret) for k, v in opened.items()}

    def forget(self, spec: StackSpec) -> None:
        """Drop the cached stack (it was removed from the backend)."""
        with self._guard:
            self._stacks.pop(spec.label, None)

    def ensure_plugins(self, workspace: auto.Workspace, listener: Listener) -> None:
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

    def set_config(self, stack: auto.Stack, spec: StackSpec) -> None:
        """Make the stack's config the spec's (see `stackfile.apply_config`)."""
        apply_config(stack, spec, self.config(spec), self.work_dir(spec))

    @staticmethod
    def config(spec: StackSpec) -> dict[str, auto.ConfigValue]:
        """The stack's config as the Automation API takes it (what a cloud may see is decided
        once, in `stackflow.dag.stack_config`)."""
        return {
            key: auto.ConfigValue(item.value, secret=item.secret)
            for key, item in spec.config.items()
        }

    # -- secrets --

    def _holds_secret(self, value: object) -> bool:
        """Whether an output holds a secret this engine knows (a program that exported the
        passphrase it read from a file): such an output is kept secret, never shown."""
        text = value if isinstance(value, str) else repr(value)
        return self.redactor(text) != text

    def learn(self, *values: str) -> None:
        fresh = [v for v in values if v]
        with self._guard:
            self._known_secrets.update(fresh)
        self.redactor.add(*fresh)

    def teach(self, spec: StackSpec, listener: Listener) -> None:
        """Before an operation: the listener's redactor learns every secret this engine knows."""
        self.learn(*(item.value for item in spec.config.values() if item.secret))
        with self._guard:
            known = list(self._known_secrets)
        listener.redactor.add(*known)

    def outputs(
        self, raw: Mapping[str, auto.OutputValue], listener: Listener | None = None
    ) -> dict[str, OutputValue]:
        """Typed outputs; every secret in them is learnt (and taught to the listener)."""
        outputs = {
            key: OutputValue(item.value, secret=item.secret or self._holds_secret(item.value))
            for key, item in raw.items()
            if key != INTERNAL_OUTPUT  # stackflow's own record, read by the skip path only
        }
        secrets = [
            s for item in outputs.values() if item.secret for s in secret_strings(item.value)
        ]
        self.learn(*secrets)
        if listener is not None:
            listener.redactor.add(*secrets)
        return outputs
