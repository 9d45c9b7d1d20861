"""Whether a recorded run still goes: its flow run's state, asked of the Prefect API (one GET,
no Prefect import). A run whose process died ends Crashed there (the zombie automation), so a
run record it left behind stops counting as "reconciling"."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable

from stackflow.localprefect import _auth_header, healthy

FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "CRASHED"})


def prefect_liveness(api_url: str, auth: str | None = None) -> Callable[[str], bool] | None:
    """A `live(flow_run_id)` asking the Prefect API at `api_url` (…/api); None when it does not
    answer (a recorded run then counts as going)."""
    base = api_url.rstrip("/").removesuffix("/api")
    if not healthy(base, timeout=3.0, auth_string=auth):
        return None

    def live(flow_run_id: str) -> bool:
        request = urllib.request.Request(
            f"{base}/api/flow_runs/{flow_run_id}", headers=_auth_header(auth)
        )
        try:
            with urllib.request.urlopen(request, timeout=5.0) as answer:
                state = (json.loads(answer.read()).get("state") or {}).get("type")
        except urllib.error.HTTPError as exc:
            return exc.code != 404  # gone from the server: not going; another error: unknown
        except (OSError, ValueError):
            return True  # cannot tell: err on "going"
        return state not in FINAL

    return live
