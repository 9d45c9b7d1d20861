"""moto made deterministic: the same requests in the same order give the same ids and timestamps.

Before a mutating request (and each journal entry replayed) the app seeds moto's randomness from
the entry's sequence number and freezes moto's clock at the entry's time (`seed_for`, `Clock`);
`install_determinism` patches what in moto would otherwise draw or read the time on its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import importlib
import random
import string
import sys
import time
from collections.abc import Iterator
from typing import Any

_SEED_BASE = 20_240_601  # any constant: replay only needs the same one every time


class Clock:
    """moto's "now": frozen at a mutating request's recorded time, real otherwise."""

    frozen: dt.datetime | None = None  # aware, UTC

    @classmethod
    def utcnow(cls) -> dt.datetime:
        frozen = cls.frozen
        return (frozen or dt.datetime.now(dt.UTC)).replace(tzinfo=None)

    @classmethod
    def time(cls) -> float:
        frozen = cls.frozen
        return frozen.timestamp() if frozen is not None else time.time()


class _TimeModule:
    """Stands in for the `time` module inside moto modules that call `time.time()` directly."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def time() -> float:
        return Clock.time()


class _UuidModule:
    """Stands in for `uuid` inside moto modules that call `uuid.uuid4()` directly."""

    def __getattr__(self, name: str) -> Any:
        import uuid

        return getattr(uuid, name)

    @staticmethod
    def uuid4() -> Any:
        from moto.moto_api._internal import mock_random

        return mock_random.uuid4()


@contextlib.contextmanager
def _isolated_randomness(label: str) -> Iterator[None]:
    """Run the block with moto's and Python's randomness seeded from `label`, then put both
    generators back where they were: what the block draws does not shift the request's draws."""
    from moto.moto_api._internal import mock_random

    saved = (mock_random.getstate(), random.getstate())
    seed = int.from_bytes(hashlib.sha256(label.encode()).digest()[:8], "big")
    mock_random.seed(seed)
    random.seed(seed)
    try:
        yield
    finally:
        mock_random.setstate(saved[0])
        random.setstate(saved[1])


def seed_for(seq: int) -> None:
    """Seed moto's randomness (and Python's, which some moto code uses) for journal entry `seq`."""
    from moto.moto_api._internal import mock_random

    mock_random.seed(_SEED_BASE + seq)
    random.seed(_SEED_BASE + seq)


_installed = False


def install_determinism() -> None:
    """Patch moto, in this process only, so that its state depends on the requests alone:

    - a backend (account, region) created lazily, maybe during a read, draws its ids (default
      VPC, subnets...) from a seed of its own, so it comes out the same whenever it is created;
    - moto's `utcnow` and the `time.time()` / `uuid.uuid4()` some services call directly go
      through `Clock` and moto's seeded random.
    """
    global _installed
    if _installed:
        return
    _installed = True
    import moto.core.utils as core_utils
    from moto.core.base_backend import AccountSpecificBackend

    original_getitem = AccountSpecificBackend.__getitem__

    def getitem(self: Any, region_name: str) -> Any:
        key = "aws" if region_name == "global" else region_name
        if dict.__contains__(self, key):
            return original_getitem(self, region_name)
        with _isolated_randomness(f"{self.service_name}|{self.account_id}|{key}"):
            return original_getitem(self, region_name)

    AccountSpecificBackend.__getitem__ = getitem  # type: ignore[method-assign]

    original_utcnow = core_utils.utcnow
    core_utils.utcnow = Clock.utcnow
    # Modules imported before this point bound the original by name.
    for name, module in list(sys.modules.items()):
        if name.startswith("moto.") and getattr(module, "utcnow", None) is original_utcnow:
            module.utcnow = Clock.utcnow  # type: ignore[attr-defined]
    # Services that read the clock or uuid4 directly (imported now, to patch them before use).
    secretsmanager = importlib.import_module("moto.secretsmanager.models")
    setattr(secretsmanager, "time", _TimeModule())  # noqa: B010 (mypy: not a declared attribute)
    rds = importlib.import_module("moto.rds.models")
    setattr(rds, "uuid", _UuidModule())  # noqa: B010
    _unique_dbi_resource_ids(rds)
    _skip_unused_iam_partitions()


def _unique_dbi_resource_ids(rds: Any) -> None:
    """moto gives every RDS instance the same DbiResourceId, which pulumi-aws uses as the id: draw
    one per instance from moto's seeded random instead (AWS's shape: db- and 26 of A-Z0-9)."""
    from moto.moto_api._internal import mock_random

    original_init = rds.DBInstance.__init__
    alphabet = string.ascii_uppercase + string.digits

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.dbi_resource_id = "db-" + "".join(mock_random.choice(alphabet) for _ in range(26))

    rds.DBInstance.__init__ = init


def _skip_unused_iam_partitions() -> None:
    """moto finds a request's account by looking for its access key in IAM, creating IAM's backend
    in all five partitions on the way (with the managed policies loaded, ~2 s). A partition whose
    backend does not exist yet holds no access keys: look in the existing ones only."""
    iam = importlib.import_module("moto.iam.models")

    def get_account_id_from(access_key: str) -> str:
        for account_id, account in list(iam.iam_backends.items()):
            for partition in iam.PARTITION_NAMES:
                if dict.__contains__(account, partition) and (
                    access_key in account[partition].access_keys
                ):
                    return str(account_id)
        return str(iam.DEFAULT_ACCOUNT_ID)

    setattr(iam, "get_account_id_from", get_account_id_from)  # noqa: B010
