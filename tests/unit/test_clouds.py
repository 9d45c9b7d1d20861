"""One engine, two clouds: what a run targets, where its state lives, and that an environment
deployed on one cloud is refused on the other (settings and records only: no cloud is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackflow.backends import open_records
from stackflow.drift import DriftMark, DriftMarks
from stackflow.engine.base import StackSpec
from stackflow.environment_records import CloudMismatch, check_cloud, record_outcome, records_of
from stackflow.settings import get_settings

pytestmark = pytest.mark.unit


def test_an_environment_deployed_on_the_local_cloud_is_refused_on_aws(tmp_path: Path) -> None:
    local = get_settings(state_dir=tmp_path, environment="dev", cloud="local")
    record_outcome(records_of(local), local, succeeded=True)
    check_cloud(local)  # the same cloud: fine

    aws = get_settings(
        state_dir=tmp_path,
        environment="dev",
        cloud="aws",
        state_passphrase="correct horse",
    )
    before = sorted(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    with pytest.raises(CloudMismatch) as info:
        check_cloud(aws)
    message = str(info.value)
    assert "'dev'" in message and "local cloud" in message and "AWS" in message
    # where this run's cloud came from, and how to act where it is deployed: an argument or the
    # environment's file, never a variable (the CLI refuses STACKFLOW_CLOUD)
    assert "--cloud aws" in message and "Nothing was changed" in message
    assert "--cloud local" in message and 'cloud = "local" in environments/dev.toml' in message
    assert "STACKFLOW_CLOUD" not in message
    assert sorted(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()) == before
    check_cloud(
        get_settings(state_dir=tmp_path, environment="staging", cloud="aws", state_passphrase="x")
    )  # another environment: fine
    # a cloud from the file is named as the file says
    prod_aws = get_settings(
        state_dir=tmp_path, environment="prod", cloud="aws", state_passphrase="x"
    )
    record_outcome(records_of(prod_aws), prod_aws, succeeded=True)
    with pytest.raises(CloudMismatch, match=r'\(cloud = "local" in environments/prod\.toml\)'):
        check_cloud(get_settings(state_dir=tmp_path, environment="prod"))


def test_backends_drift_marks_and_labels_are_per_cloud_and_marks_are_records(
    tmp_path: Path,
) -> None:
    local = get_settings(state_dir=tmp_path, cloud="local")
    aws = get_settings(state_dir=tmp_path, cloud="aws", state_passphrase="x")
    assert local.resolved_backend_url == f"file://{tmp_path / 'pulumi-local'}"
    assert aws.resolved_backend_url == f"file://{tmp_path / 'pulumi-aws'}"
    assert (local.target_label, aws.target_label) == ("local cloud", "AWS")
    assert local.localcloud_root == tmp_path / "localcloud"
    records = open_records(str(tmp_path / "records"))
    spec = StackSpec("stackflow", "dev", "networking", lambda: None)
    DriftMarks(records, "local").mark(spec)
    assert DriftMarks(records, "local").marked(spec) is DriftMark.DRIFTED
    assert DriftMarks(records, "aws").marked(spec) is None  # the other cloud's stack is another


def test_a_deletion_protected_database_is_refused_before_a_destroy(tmp_path: Path) -> None:
    from stackflow.errors import DeletionProtected

    prod = get_settings(state_dir=tmp_path, environment="prod")
    with pytest.raises(DeletionProtected, match="deletion protection"):
        prod.confirm_database_deletable()
    lifted = get_settings(
        state_dir=tmp_path,
        environment="prod",
        database={"deletion_protection": False},
    )
    lifted.confirm_database_deletable()
    get_settings(state_dir=tmp_path, environment="dev").confirm_database_deletable()
