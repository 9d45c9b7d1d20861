"""What a command is: a name, its help, the options it takes and the function that runs it; one
entry of the table in cli/commands/__init__.py. The parser and the dispatcher read that table, so
a command is named once (docs/development/commands.md says how to add one).

Nothing heavy is imported here, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackflow.settings import Settings

Options = Callable[[argparse.ArgumentParser], None]  # adds some of a command's options


@dataclass(frozen=True)
class Command:
    """A command that acts on an environment: it runs with the parsed arguments and the settings
    its --env (and --cloud) name.

    Attributes:
        name: what users type after `python flows/run.py`.
        help: one line for `--help` (also the command's own description).
        run: runs the command; returns its exit code (stackflow.exits).
        options: add the command's options, in the order `--help` lists them.
        default_cloud: the cloud when --cloud is not given, instead of the environment's file's.
    """

    name: str
    help: str
    run: Callable[[argparse.Namespace, Settings], int]
    options: Sequence[Options] = ()
    default_cloud: str | None = None

    def settings(self, args: argparse.Namespace) -> Settings:
        """The command's settings: the file of the environment --env names (default dev), --cloud
        when given, and this machine's STACKFLOW_* variables and .env. The one place the command
        line reads settings; a flow run gets the same environment and cloud as its parameters.

        Raises:
            SettingsError: a setting, variable or name that is not accepted (a variable that
                names an environment's setting too: what an environment deploys lives in its
                file), or a state folder that is a file, unwritable or read-only.
        """
        from stackflow.settings import get_settings

        cloud = getattr(args, "cloud", None) or self.default_cloud
        settings = get_settings(getattr(args, "environment", None) or "dev", cloud)
        settings.state.check()
        return settings


@dataclass(frozen=True)
class CodeCommand:
    """A command that reads the code only (`graph`): no settings, no state folder, so it answers
    whatever this machine's settings say.

    Attributes:
        name, help, options: as a Command's.
        run: runs the command with the parsed arguments; returns its exit code.
    """

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    options: Sequence[Options] = ()
