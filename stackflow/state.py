"""The state folder's layout: the one place that joins a path under it.

The state folder belongs to one machine. In team mode it holds caches only (workspaces, logs,
plan files, the local servers' own folders); everything a second worker must see lives in the
team's backend (see `stackflow.records`). Every path under the folder is named here, so a reader
finds what lives where in one screen, and a damaged or unusable folder is refused in one place.

    workspaces/<cloud>/<pulumi project>/<environment>/   Pulumi.yaml + the stack's config file
    pulumi-<cloud>/                                      the file backend (one-person default)
    records/                                             stackflow's records (file backend only)
    logs/<command>-<environment>-<time>.log              what a CLI run's Prefect and Pulumi said
    plans/<environment>/<run>/                           update plans of a gated run (0700)
    policy/packs/<pack>-<digest>-<venv>/                 a policy pack as the CLI runs it
    holders/                                             who holds a stack's concurrency slot
    gitops/mirrors/<hash>.git                            a bare mirror of each followed repository
    gitops/checkouts/<commit>/                           a commit's files, as a sync runs them
    prefect/                                             the local Prefect server (SQLite, log)
    postgres/                                            the local PostgreSQL (team mode on one machine)
    localcloud/                                          the local cloud (moto, data plane, plugins)
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stackflow.errors import SettingsError


class StateFolderError(SettingsError):
    """The state folder cannot be used: not a folder, not writable, or unreadable."""


def private_folder(path: Path) -> Path:
    """Create `path` and each missing parent 0700 (mkdir's mode covers the last one only)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    return path


@dataclass(frozen=True)
class StateLayout:
    """Every path under one state folder."""

    root: Path

    # -- Pulumi's own files --

    @property
    def workspaces(self) -> Path:
        return self.root / "workspaces"

    def workspace(self, cloud: str, pulumi_project: str, environment: str) -> Path:
        """A stack's LocalWorkspace folder (per cloud: the config salts are per backend).

        Raises:
            NameRefused: a project or stack name that is not one plain path part ('..').
        """
        from stackflow.names import validate_project_name, validate_stack_name

        validate_project_name(pulumi_project, "Pulumi project name")
        validate_stack_name(environment, "stack name")
        return self.workspaces / cloud / pulumi_project / environment

    def file_backend(self, cloud: str) -> Path:
        """The one-person default backend: a Pulumi file backend per cloud."""
        return self.root / f"pulumi-{cloud}"

    # -- stackflow's own files --

    @property
    def records(self) -> Path:
        """stackflow's records when the backend is the default file backend."""
        return self.root / "records"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def plans(self, environment: str) -> Path:
        """Where a gated run of `environment` keeps its update plans (one folder per run)."""
        return self.root / "plans" / environment

    @property
    def policy(self) -> Path:
        """Policy packs as the CLI runs them (staged copies), their rules and configs."""
        return self.root / "policy"

    @property
    def holders(self) -> Path:
        return self.root / "holders"

    # -- GitOps: what a sync fetched --

    @property
    def git_mirrors(self) -> Path:
        """One bare mirror per followed repository (fetches only what is missing)."""
        return self.root / "gitops" / "mirrors"

    def checkout(self, commit: str) -> Path:
        """The files of one commit, exported for a sync's run (kept as a cache)."""
        return self.root / "gitops" / "checkouts" / commit

    # -- the local servers the project starts --

    @property
    def prefect(self) -> Path:
        return self.root / "prefect"

    @property
    def postgres(self) -> Path:
        return self.root / "postgres"

    @property
    def localcloud(self) -> Path:
        return self.root / "localcloud"

    def check(self) -> None:
        """Refuse a state folder that cannot hold state, before anything runs.

        Raises:
            StateFolderError: naming the folder, what is wrong and what to do.
        """
        root = self.root
        what = "STACKFLOW_STATE_DIR"
        if root.exists() and not root.is_dir():
            raise StateFolderError(
                f"{what}: {root} is a file, not a folder; point {what} at a folder (it is created "
                "if missing). Nothing was changed."
            )
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._private()
            # A real write, not os.access: a read-only mount answers access() with yes as root.
            fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=root)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise StateFolderError(
                f"{what}: cannot write in {root} ({exc.strerror or exc}); give this user write "
                f"access to it or point {what} at another folder. Nothing was changed."
            ) from None

    def give_passage(self) -> None:
        """Let other OS users pass through the folder (o+x), never list or read it: the local
        PostgreSQL started as root runs as the `postgres` OS user under it."""
        if os.geteuid() == 0 and self.root.is_dir():
            self.root.chmod(stat.S_IMODE(self.root.stat().st_mode) | 0o001)

    def _private(self) -> None:
        """The folder is its owner's alone (0700): no other user lists or reads it. Passage (x)
        already given is kept where the local PostgreSQL lives in it: its server runs as its
        own OS user and must pass through (see `stackflow.postgres.host.check_reachable`)."""
        mode = stat.S_IMODE(self.root.stat().st_mode)
        passage = mode & 0o011 if self.postgres.exists() else 0
        if mode != 0o700 | passage and self.root.stat().st_uid == os.geteuid():
            self.root.chmod(0o700 | passage)
