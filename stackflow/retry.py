"""One retry policy type: how often and after how long a task is tried again.

Decorators carry no numbers: a task declares only *what* is worth retrying (its
`retry_condition_fn`); how many times and how long to wait come from a `RetryPolicy` built from
settings, applied with `task.with_options(**policy.task_options())`. The delays are drawn once
per run (with jitter), so a task can say exactly when its next attempt starts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` more attempts after the first; delay n is `first_delay_s * factor**n`, capped at
    `max_delay_s`, each drawn between (1 - jitter) and (1 + jitter) times that."""

    retries: int
    first_delay_s: float
    factor: float = 2.0
    jitter: float = 0.5
    max_delay_s: float = 600.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.first_delay_s < 0 or self.factor < 1:
            raise ValueError(f"not a retry policy: {self!r}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1): {self.jitter}")

    def base_delays(self) -> list[float]:
        """The delays before each retry, without jitter."""
        return [
            min(self.first_delay_s * self.factor**n, self.max_delay_s) for n in range(self.retries)
        ]

    def draw(self, rng: random.Random | None = None) -> list[float]:
        """The delays before each retry, jitter drawn now (two runs retrying one lock drift
        apart); an empty list when there are no retries."""
        pick = rng or random
        return [
            round(d * pick.uniform(1 - self.jitter, 1 + self.jitter), 2) for d in self.base_delays()
        ]

    def task_options(self, delays: list[float] | None = None) -> dict[str, Any]:
        """Keyword arguments for Prefect's `Task.with_options`: these retries with these delays
        (drawn now when not given). Prefect's own jitter stays off: the delays are already drawn."""
        drawn = self.draw() if delays is None else delays
        return {
            "retries": self.retries,
            "retry_delay_seconds": drawn or 0,
            "retry_jitter_factor": None,
        }


def stack_policy(retries: int, first_delay_s: float) -> RetryPolicy:
    """Stack operations: transient engine errors (a lock held, throttling, the network)."""
    return RetryPolicy(retries, first_delay_s)


def migration_policy(retries: int) -> RetryPolicy:
    """The migrate step: a database not reachable yet, a dropped connection."""
    return RetryPolicy(retries, 2.0)


def health_policy() -> RetryPolicy:
    """The verify step: an app that is still starting answers after a while (~2.5 min)."""
    return RetryPolicy(10, 15.0, factor=1.0, jitter=0.3)
