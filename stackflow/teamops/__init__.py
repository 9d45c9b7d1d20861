"""What a team needs around team mode: moving a one-machine state folder into the team's backend
(`moving`), rotating the team's passphrase (`rotation`). Backups of the project's PostgreSQL are
`stackflow.postgres.backup`. The command line's door is `cli/commands/team.py`."""

from __future__ import annotations

from stackflow.errors import StackflowError


class TeamOpsError(StackflowError):
    """A team operation could not complete (the message says which stack or record, and why)."""


class TeamOpsRefused(TeamOpsError, ValueError):
    """A team operation refused before it changed anything (bad input, or a target it must not
    touch); the message names the setting, folder or stack and what to do."""


__all__ = ["TeamOpsError", "TeamOpsRefused"]
