"""From settings to Pulumi workspaces: the backend, the secrets provider, what every `pulumi`
command gets in its environment, one LocalWorkspace folder per stack, the stacks themselves
(created or selected once per engine), the provider plugins, and the secrets learnt on the way
(every one of them masked in whatever the engine reports)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Mapping
from importlib.metadata import version as package_version
from pathlib import Path
from urllib.parse import urlsplit

import pulumi.automation as auto

from stackflow.engine.automation.changes import secret_strings
from stackflow.engine.automation.command import PulumiCLI, RunningCommands, find_pulumi_cli
from stackflow.engine.automation.program import pulumi_program
from stackflow.engine.base import INTERNAL_OUTPUT, Listener, OutputValue, StackSpec
from stackflow.engine.checkpoints import CheckpointReader
from stackflow.redact import Redactor
from stackflow.secretbox import state_passphrase
from stackflow.settings import Settings

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
        self._stacks: dict[str, auto.Stack] = {}
        self._reader: CheckpointReader | None = None
        self._stack_locks: dict[str, threading.Lock] = {}
        self._known_secrets: set[str] = set(settings.secret_values())
        self.redactor = Redactor(self._known_secrets)
        self.passphrase = state_passphrase(settings)
        if self.passphrase:
            self.learn(self.passphrase)

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

    @property
    def backend_url(self) -> str:
        return self.settings.resolved_backend_url

    @property
    def secrets_provider(self) -> str:
        return self.settings.secrets_provider or "passphrase"

    @property
    def pulumi_cloud(self) -> bool:
        """Whether the backend is Pulumi Cloud (it cancels updates itself)."""
        return urlsplit(self.backend_url).scheme == "https"

    @property
    def backend_folder(self) -> Path | None:
        """The folder of a file backend (file://~/x and file:///abs both occur); None otherwise."""
        if urlsplit(self.backend_url).scheme != "file":
            return None
        return Path(self.backend_url.removeprefix("file://").split("?", 1)[0]).expanduser()

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
        env = {
            "PULUMI_BACKEND_URL": self.backend_url,
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
        work_dir.mkdir(parents=True, exist_ok=True)
        if self.backend_folder is not None:  # Pulumi refuses a folder that does not exist
            self.backend_folder.mkdir(parents=True, exist_ok=True)
        return auto.LocalWorkspaceOptions(
            work_dir=str(work_dir),
            env_vars=self.env_vars(),
            secrets_provider=self.secrets_provider,
            project_settings=auto.ProjectSettings(
                name=spec.pulumi_project,
                runtime="python",
                backend=auto.ProjectBackend(url=self.backend_url),
            ),
            pulumi_command=self.cli(),
        )

    def stack(self, spec: StackSpec, *, create: bool) -> auto.Stack | None:
        """The cached stack, else create-or-select it (create) or select it (None if missing)."""
        with self._guard:
            lock = self._stack_locks.setdefault(spec.label, threading.Lock())
        with lock:
            with self._guard:
                cached = self._stacks.get(spec.label)
            if cached is not None:
                return cached
            name = self.stack_name(spec)
            if self.secrets_provider == "passphrase":
                forget_cached_salt(self.work_dir(spec), name)
            options = self._options(spec)
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

    @staticmethod
    def config(spec: StackSpec) -> dict[str, auto.ConfigValue]:
        """The stack's config as the Automation API takes it (what a cloud may see is decided
        once, in `stackflow.graph.stack_config`)."""
        return {
            key: auto.ConfigValue(item.value, secret=item.secret)
            for key, item in spec.config.items()
        }

    # -- secrets --

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
            key: OutputValue(item.value, secret=item.secret)
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


def forget_cached_salt(work_dir: Path, stack_name: str) -> bool:
    """Drop the passphrase salt a workspace's `Pulumi.<stack>.yaml` keeps for a stack, so the CLI
    takes the one in the stack's checkpoint (PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER) and saves
    it there again.

    The salt in that file is a copy: after the team's passphrase was rotated or the stack moved to
    another backend, a worker's old copy would fail every operation with "incorrect passphrase"
    although its passphrase is right. Nothing else of the file is lost: stackflow's config holds no
    `secure:` value and is written whole before every operation. Replaced atomically, so a
    `pulumi` reading the file meanwhile sees the old file or the new one.

    Returns:
        True if a salt was dropped.
    """
    path = work_dir / f"Pulumi.{stack_name.rsplit('/', 1)[-1]}.yaml"
    try:
        lines = path.read_text().splitlines(keepends=True)
    except FileNotFoundError:
        return False
    kept = [line for line in lines if not line.startswith("encryptionsalt:")]
    if len(kept) == len(lines):
        return False
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    staging.write_text("".join(kept))
    os.replace(staging, path)
    return True
