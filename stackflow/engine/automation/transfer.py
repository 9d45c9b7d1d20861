"""Whole stacks moved between backends and re-keyed, through the Automation API: `stack export`,
`stack init`, `stack import` and `stack change-secrets-provider`, each stack in a throwaway
workspace of its own under a private folder (0700), so nothing of this machine's workspaces (their
cached salts) takes part.

What the Pulumi CLI v3.259.0 does with these (read from its source, `pkg/cmd/pulumi/stack`):

- `stack export --show-secrets` (the Automation API's `export_stack`) writes every secret as
  `{"4dabf18193072939515e22adb298388d": ..., "plaintext": "<json>"}`, but keeps the source's
  `secrets_providers` (its passphrase salt).
- `stack import` builds the secrets manager from the deployment's own `secrets_providers` and
  encrypts every plaintext secret with it. A deployment keeping the source's salt is therefore
  encrypted under the source's passphrase, or refused ("failed to encrypt: incorrect passphrase")
  when the target's passphrase is another. So the deployment is given the target stack's own
  provider state first (for the passphrase provider `{"salt": <its encryptionsalt>}`, as the CLI
  maps its `Pulumi.<stack>.yaml`), and the import encrypts every secret for the target.
- `stack change-secrets-provider passphrase` on a stack that already uses a passphrase is a
  rotation: the old passphrase from PULUMI_CONFIG_PASSPHRASE, the new one read as one line from
  standard input (trimmed) when it runs non-interactively; it re-encrypts the checkpoint and
  imports it under the stack's lock.

The Automation API's own `import_stack` writes the deployment (plaintext secrets) to a temporary
file in the shared temporary folder and leaves it there when the import fails; here that file is
in the private folder, removed in every case.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi.automation as auto

from stackflow.backends import backend_for
from stackflow.engine.automation.command import PulumiCLI, find_pulumi_cli
from stackflow.engine.envelope import SECRET_SIG
from stackflow.errors import StackflowError
from stackflow.redact import Redactor


class StateTransferError(StackflowError):
    """A `pulumi stack` command on a backend failed; the message is the CLI's, redacted."""


@dataclass(frozen=True)
class StackRef:
    """A stack in a self-managed backend: its Pulumi project and its name."""

    project: str
    stack: str

    def __str__(self) -> str:
        return f"{self.project}/{self.stack}"


@dataclass(frozen=True)
class Exported:
    """A stack's deployment as `stack export --show-secrets` gave it: secrets in plaintext. Its
    repr shows nothing of it."""

    version: int
    deployment: dict[str, Any] = field(repr=False)


def _noop() -> None:
    return None


class BackendSession:
    """The stacks of one backend, opened with one passphrase (or secrets provider).

    Args:
        backend_url: the backend (file://, s3://, postgres://).
        passphrase: the passphrase its stacks are encrypted with (None: a KMS provider).
        secrets_provider: "passphrase", or a KMS URL for stacks this session creates.
        pulumi_home: the CLI's home (the local cloud's own; None: the user's).
        redactor: masks the passphrases and the values seen in any error it raises.
    """

    def __init__(
        self,
        backend_url: str,
        passphrase: str | None,
        *,
        secrets_provider: str = "passphrase",
        pulumi_home: Path | None = None,
        redactor: Redactor,
        cli: PulumiCLI | None = None,
    ) -> None:
        self.backend_url = backend_url
        self.secrets_provider = secrets_provider
        self._passphrase = passphrase
        self._home = pulumi_home
        self._redactor = redactor
        self._cli = cli or find_pulumi_cli()
        self._folder = Path(tempfile.mkdtemp(prefix="stackflow-transfer-"))  # 0700

    def env(self) -> dict[str, str]:
        """What each `pulumi` of this session gets (beside the withheld environment)."""
        cli_url, cli_variables = backend_for(self.backend_url).for_cli(self.backend_url)
        env = {
            **cli_variables,
            "PULUMI_BACKEND_URL": cli_url,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
        }
        if self._passphrase is not None:
            env["PULUMI_CONFIG_PASSPHRASE"] = self._passphrase
        if self._home is not None:
            env["PULUMI_HOME"] = str(self._home)
        return env

    def _workspace(self, ref: StackRef) -> auto.LocalWorkspaceOptions:
        folder = Path(tempfile.mkdtemp(prefix="ws-", dir=self._folder))
        return auto.LocalWorkspaceOptions(
            work_dir=str(folder),
            env_vars=self.env(),
            secrets_provider=self.secrets_provider,
            # no backend here: the CLI reads PULUMI_BACKEND_URL, so no credential is written
            project_settings=auto.ProjectSettings(name=ref.project, runtime="python"),
            pulumi_command=self._cli,
        )

    @contextmanager
    def _cli_errors(self, what: str, ref: StackRef) -> Iterator[None]:
        try:
            yield
        except auto.CommandError as exc:
            # stderr only: an export's stdout is the deployment, its secrets in plaintext
            stderr = str(exc).partition("\n stderr: ")[2]
            lines = [line for line in stderr.splitlines() if line.strip()][-3:]
            detail = self._redactor(" ".join(" ".join(lines).split()) or type(exc).__name__)
            raise StateTransferError(f"{what} of stack {ref} failed: {detail}") from None

    def select(self, ref: StackRef) -> auto.Stack:
        """The existing stack `ref`.

        Raises:
            StateTransferError: it does not exist, or the CLI failed.
        """
        with self._cli_errors("selecting", ref):
            return auto.select_stack(
                stack_name=ref.stack,
                project_name=ref.project,
                program=_noop,
                opts=self._workspace(ref),
            )

    def export(self, ref: StackRef) -> Exported:
        """The stack's deployment with its secrets in plaintext (held in memory only).

        Raises:
            StateTransferError: the CLI failed (a wrong passphrase among the reasons).
        """
        stack = self.select(ref)
        with self._cli_errors("exporting", ref):
            found = stack.export_stack()
        deployment = dict(found.deployment or {})
        self._redactor.add(*_plaintexts(deployment))
        return Exported(int(found.version or 3), deployment)

    def create(self, ref: StackRef) -> dict[str, Any]:
        """Create the stack (empty); its secrets provider's state, as a checkpoint records it.

        Raises:
            StateTransferError: it exists already, or the CLI failed.
        """
        with self._cli_errors("creating", ref):
            stack = auto.create_stack(
                stack_name=ref.stack,
                project_name=ref.project,
                program=_noop,
                opts=self._workspace(ref),
            )
            settings = stack.workspace.stack_settings(ref.stack)
        if self.secrets_provider == "passphrase":
            return {"type": "passphrase", "state": {"salt": settings.encryption_salt}}
        # a cloud KMS key: the CLI's `cloud` provider state is its URL and the encrypted data key
        return {
            "type": "cloud",
            "state": {"url": settings.secrets_provider, "encryptedkey": settings.encrypted_key},
        }

    def remove_empty(self, ref: StackRef) -> None:
        """Remove the stack, which holds no resources (Pulumi refuses one that does).

        Raises:
            StateTransferError: it holds resources, or the CLI failed.
        """
        stack = self.select(ref)
        with self._cli_errors("removing", ref):
            stack.workspace.remove_stack(ref.stack)

    def import_(self, ref: StackRef, exported: Exported) -> None:
        """Write `exported` as the stack's state (`stack import`); the CLI encrypts its plaintext
        secrets with the provider its `secrets_providers` names.

        Raises:
            StateTransferError: the CLI refused it.
        """
        stack = self.select(ref)
        workspace = stack.workspace
        assert isinstance(workspace, auto.LocalWorkspace)
        folder = Path(tempfile.mkdtemp(prefix="import-", dir=self._folder))
        path = folder / "deployment.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump({"version": exported.version, "deployment": exported.deployment}, out)
            with self._cli_errors("importing", ref):
                self._cli.run(
                    ["stack", "import", "--file", str(path), "--stack", ref.stack],
                    workspace.work_dir,
                    self._child_env(workspace),
                )
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def change_passphrase(self, ref: StackRef, new: str) -> None:
        """Re-encrypt the stack under `new` (`stack change-secrets-provider passphrase`, the new
        passphrase on its standard input).

        Raises:
            StateTransferError: the CLI failed (the session's passphrase does not open it, or
                another update holds its lock).
        """
        stack = self.select(ref)
        workspace = stack.workspace
        assert isinstance(workspace, auto.LocalWorkspace)
        self._redactor.add(new)
        with self._cli_errors("changing the passphrase", ref):
            self._cli.run_with_input(
                ["stack", "change-secrets-provider", "passphrase", "--stack", ref.stack],
                workspace.work_dir,
                self._child_env(workspace),
                f"{new}\n",
            )

    def _child_env(self, workspace: auto.LocalWorkspace) -> dict[str, str]:
        env = dict(workspace.env_vars)
        if workspace.pulumi_home:
            env["PULUMI_HOME"] = workspace.pulumi_home
        return env

    def close(self) -> None:
        """Remove the session's private folder (its workspaces and any file it wrote)."""
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> BackendSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plaintexts(value: Any) -> Iterator[str]:
    """Every plaintext secret in an exported deployment, and the strings inside it (for the
    redactor: an error of the CLI must not repeat one)."""
    if isinstance(value, Mapping):
        if value.get(SECRET_SIG) and isinstance(value.get("plaintext"), str):
            yield value["plaintext"]
            try:
                inner = json.loads(value["plaintext"])
            except ValueError:
                return
            yield from _strings(inner)
            return
        for item in value.values():
            yield from _plaintexts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _plaintexts(item)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str) and value:
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
