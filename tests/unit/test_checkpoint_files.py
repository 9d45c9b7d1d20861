"""The checkpoint reader on hand-made backend folders: the layouts, compressions and damage the
real CLI's files can show (the real CLI's own are read in tests/integration/test_checkpoints.py)."""

from __future__ import annotations

import gzip
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stackflow.engine.checkpoints import CheckpointError, CheckpointReader

pytestmark = pytest.mark.unit

SECRET = {
    "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
    "ciphertext": "v1:x",
}


def checkpoint(time: str = "2026-11-25T12:24:12.661637736Z") -> dict[str, object]:
    return {
        "version": 3,
        "checkpoint": {
            "stack": "organization/p/dev",
            "latest": {
                "manifest": {"time": time, "magic": "m", "version": "v3.259.0"},
                "resources": [
                    {
                        "urn": "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev",
                        "type": "pulumi:pulumi:Stack",
                        "outputs": {"a": 1, "token": SECRET},
                    },
                    {
                        "urn": "urn:pulumi:dev::p::random:index/randomPassword:RandomPassword::w",
                        "type": "random:index/randomPassword:RandomPassword",
                        "parent": "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev",
                        "outputs": {"a": 2},
                    },
                ],
                "pending_operations": [
                    {
                        "resource": {
                            "urn": "urn:pulumi:dev::p::aws:ec2/vpc:Vpc::v",
                            "type": "aws:ec2/vpc:Vpc",
                        },
                        "type": "creating",
                    }
                ],
            },
        },
    }


@pytest.fixture
def backend(tmp_path: Path) -> Path:
    (tmp_path / ".pulumi" / "stacks" / "p").mkdir(parents=True)
    return tmp_path


def write(backend: Path, name: str, data: bytes) -> None:
    (backend / ".pulumi" / "stacks" / "p" / name).write_bytes(data)


def test_the_root_stack_outputs_pending_operations_and_nanosecond_time(backend: Path) -> None:
    write(backend, "dev.json", json.dumps(checkpoint()).encode())
    found = CheckpointReader(f"file://{backend}").checkpoint("p", "dev")
    assert found is not None
    assert found.outputs == {"a": 1, "token": SECRET} and found.secret_outputs == {"token"}
    assert found.manifest_time == "2026-11-25T12:24:12.661637736Z"
    assert found.updated_at == datetime(2026, 11, 25, 12, 24, 12, 661637, tzinfo=UTC)
    assert found.resource_count == 2
    [op] = found.pending_operations
    assert (op.type, op.resource_type) == ("creating", "aws:ec2/vpc:Vpc")


def test_a_stack_created_and_never_updated_has_no_manifest(backend: Path) -> None:
    write(backend, "dev.json", b'{"version":0,"checkpoint":{"stack":"organization/p/dev"}}')
    found = CheckpointReader(str(f"file://{backend}")).checkpoint("p", "dev")
    assert found is not None
    assert (found.manifest_time, found.outputs, found.resource_count) == (None, {}, 0)


def test_the_newest_variant_wins_and_gzip_is_read(backend: Path) -> None:
    write(backend, "dev.json", json.dumps(checkpoint("2026-01-01T00:00:00Z")).encode())
    write(backend, "dev.json.gz", gzip.compress(json.dumps(checkpoint()).encode()))
    os.utime(backend / ".pulumi" / "stacks" / "p" / "dev.json", (1, 1))  # written long ago
    reader = CheckpointReader(f"file://{backend}")
    found = reader.checkpoint("p", "dev")
    assert found is not None and found.key.endswith("dev.json.gz")
    assert found.manifest_time == "2026-11-25T12:24:12.661637736Z"
    write(backend, "prod.json.bak", b"{}")
    write(backend, "qa.json.zst", b"\x28\xb5\x2f\xfd....")
    assert reader.stacks("p") == ["dev", "qa"]
    with pytest.raises(CheckpointError, match="zstd"):
        reader.checkpoint("p", "qa")


@pytest.mark.parametrize("data", [b"{not json", b'{"version": 99}', b"[]", b"\x1f\x8bbroken"])
def test_a_damaged_checkpoint_is_refused_naming_it(backend: Path, data: bytes) -> None:
    write(backend, "dev.json", data)
    with pytest.raises(CheckpointError, match=r"\.pulumi/stacks/p/dev\.json"):
        CheckpointReader(f"file://{backend}").checkpoint("p", "dev")


def test_locks_are_read_from_the_project_scoped_folder(backend: Path) -> None:
    folder = backend / ".pulumi" / "locks" / "organization" / "p" / "dev"
    folder.mkdir(parents=True)
    (folder / "1b2c.json").write_text(
        '{"pid":4242,"username":"ana","hostname":"w1","timestamp":"2026-11-25T12:00:00.123456789+01:00"}'
    )
    (folder / "broken.json").write_text("{")
    reader = CheckpointReader(f"file://{backend}")
    good, broken = sorted(reader.locks("p", "dev"), key=lambda h: h.key)
    assert (good.pid, good.user, good.host) == (4242, "ana", "w1")
    assert good.time is not None and good.time.utcoffset() is not None
    assert broken.pid is None  # unreadable, and still a lock
    assert reader.locks("p", "prod") == []
