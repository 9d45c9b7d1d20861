#!/usr/bin/env python3
"""Tell Prefect that branches moved, so the environments following them sync at once.

As a bare repository's `post-receive` hook (git gives it one `<old> <new> <ref>` line per
updated ref on its standard input):

    cp scripts/git_hooks/post_receive.py /srv/git/platform.git/hooks/post-receive
    chmod +x /srv/git/platform.git/hooks/post-receive
    git -C /srv/git/platform.git config stackflow.prefectApiUrl http://prefect.internal:4200/api
    git -C /srv/git/platform.git config stackflow.prefectAuthFile /etc/stackflow/prefect-auth

Or once per push from a forge's webhook relay or a CI job (the same event):

    python3 post_receive.py --branch main --commit "$SHA"        # --deleted when it is gone

Each moved branch becomes one Prefect event, sent in one `POST <api>/events`: `stackflow.git.pushed`
(or `stackflow.git.deleted`) about resource `stackflow.branch.<branch>` labelled
`stackflow.branch`. The automations `deployments/serve.py` attaches to `sync/<env>` (and to
`review/branches`) start the environments following that branch. The event is a nudge: the sync
asks the repository for the branch's commit itself, so a forged event deploys nothing new.

Settings, from the environment first, else the repository's git config:
  PREFECT_API_URL          stackflow.prefectApiUrl    the Prefect server's API (ends in /api)
  PREFECT_API_AUTH_STRING  stackflow.prefectAuthFile  basic auth user:password (team mode); the
                                                      file holds it, readable by git's user only
                           stackflow.repository       the name events give the repository
                                                      (default: its folder's name)
Only Python's standard library is used: a git server needs nothing else. It never fails a push:
an unreachable server is one line for the pusher, and the poll finds the commit later.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

PUSHED = "stackflow.git.pushed"
DELETED = "stackflow.git.deleted"
ZERO = "0" * 40
TIMEOUT_S = 5.0  # the pusher waits for this hook: never long


def git_config(key: str) -> str | None:
    """A value of this repository's git config (None outside a repository or when unset)."""
    try:
        done = subprocess.run(
            ["git", "config", "--get", key], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    value = done.stdout.strip() if done.returncode == 0 else ""
    return value or None


def repository_name() -> str:
    """What events call this repository: `stackflow.repository`, else its folder's name."""
    named = git_config("stackflow.repository")
    if named:
        return named
    here = Path(os.environ.get("GIT_DIR") or ".").resolve()
    return here.name.removesuffix(".git") or "repository"


def events_for(moves: list[tuple[str, str, str]], repository: str) -> list[dict[str, object]]:
    """One event per branch in `moves` ((old, new, ref) as git gives them); tags are skipped."""
    now = datetime.now(UTC).isoformat()
    found: list[dict[str, object]] = []
    for old, new, ref in moves:
        if not ref.startswith("refs/heads/"):
            continue
        branch = ref.removeprefix("refs/heads/")
        deleted = new == ZERO
        found.append(
            {
                "id": str(uuid.uuid4()),
                "occurred": now,
                "event": DELETED if deleted else PUSHED,
                "resource": {
                    "prefect.resource.id": f"stackflow.branch.{repository}.{branch}",
                    "prefect.resource.name": branch,
                    "stackflow.branch": branch,
                    "stackflow.repository": repository,
                },
                "payload": {
                    "branch": branch,
                    "repository": repository,
                    "commit": None if deleted else new,
                    "before": None if old == ZERO else old,
                },
            }
        )
    return found


def _auth_string() -> str | None:
    given = os.environ.get("PREFECT_API_AUTH_STRING")
    if given:
        return given
    path = git_config("stackflow.prefectAuthFile")
    if not path:
        return None
    try:
        return Path(path).expanduser().read_text().strip() or None
    except OSError as exc:
        raise OSError(f"cannot read stackflow.prefectAuthFile {path}: {exc.strerror}") from None


def shown(url: str) -> str:
    """A URL as the pusher sees it: never a user or password."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.hostname or "")) if parts.netloc else url


def send(api_url: str, events: list[dict[str, object]], auth: str | None) -> None:
    """POST the events to Prefect's `<api>/events`.

    Raises:
        OSError: the server did not take them (urllib's errors are OSErrors).
    """
    request = urllib.request.Request(
        api_url.rstrip("/") + "/events",
        data=json.dumps(events).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    if auth:
        token = base64.b64encode(auth.encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
        if answer.status >= 300:
            raise OSError(f"HTTP {answer.status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--branch", help="a branch that moved (else: git's lines on stdin)")
    parser.add_argument("--commit", default=ZERO, help="the commit it points at now")
    parser.add_argument("--deleted", action="store_true", help="the branch is gone")
    args = parser.parse_args(argv)
    if args.branch:
        moves = [(ZERO, ZERO if args.deleted else args.commit, f"refs/heads/{args.branch}")]
    else:
        moves = [(w[0], w[1], w[2]) for w in (line.split() for line in sys.stdin) if len(w) >= 3]
    api_url = os.environ.get("PREFECT_API_URL") or git_config("stackflow.prefectApiUrl")
    events = events_for(moves, repository_name())
    if not events:
        return 0
    branches = ", ".join(
        r.removeprefix("refs/heads/") for _, _, r in moves if r.startswith("refs/")
    )
    if not api_url:
        print(
            "stackflow: no Prefect API to tell (set stackflow.prefectApiUrl in this repository's "
            f"git config); {branches} will be found by the poll"
        )
        return 0
    try:
        send(api_url, events, _auth_string())
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        print(
            f"stackflow: Prefect at {shown(api_url)} did not take the push of {branches} "
            f"({reason}); the environments following it find it at their next poll"
        )
        return 0
    print(f"stackflow: told Prefect that {branches} moved: their environments sync now")
    return 0


if __name__ == "__main__":
    sys.exit(main())
