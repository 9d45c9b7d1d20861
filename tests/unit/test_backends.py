"""Backend URLs: which kind, how the Pulumi CLI's options read, and masking before display."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackflow.backends import (
    BackendURLError,
    backend_kind,
    file_folder,
    mask_url,
    postgres_location,
    s3_location,
    socket_url,
)
from stackflow.records import open_records
from stackflow.records.files import FileRecords

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgres://ana:s3cr3t@db:5432/pulumi", "postgres://ana:***@db:5432/pulumi"),
        (
            "postgresql://ana:p%40ss@db/x?sslmode=require",
            "postgresql://ana:***@db/x?sslmode=require",
        ),
        (
            "postgres://ana@/x?host=/run/pg&password=hunter2",
            "postgres://ana@/x?host=/run/pg&password=***",
        ),
        (
            "s3://b/p?endpoint=127.0.0.1:9&region=eu-west-1",
            "s3://b/p?endpoint=127.0.0.1:9&region=eu-west-1",
        ),
        ("file:///state/pulumi-local", "file:///state/pulumi-local"),
    ],
)
def test_mask_url_hides_passwords_only(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_mask_url_of_something_unparseable_hides_it_whole() -> None:
    assert "s3cr3t" not in mask_url("postgres://ana:s3cr3t@[::1")


def test_backend_kind_and_the_refusal_masks_the_password() -> None:
    assert backend_kind("file:///x") == "file"
    assert backend_kind("s3://b") == "s3"
    assert backend_kind("postgresql://h/d") == "postgres"
    with pytest.raises(BackendURLError) as caught:
        backend_kind("https://ana:s3cr3t@api.pulumi.com")
    assert "s3cr3t" not in str(caught.value)


def test_s3_options_read_as_the_pulumi_cli_reads_them() -> None:
    v1 = s3_location(
        "s3://state/team/x?endpoint=127.0.0.1:4566&disableSSL=true&s3ForcePathStyle=true&region=eu-west-1"
    )
    assert (v1.bucket, v1.prefix, v1.endpoint_url) == ("state", "team/x/", "http://127.0.0.1:4566")
    assert (v1.region, v1.path_style, v1.profile) == ("eu-west-1", True, None)
    v2 = s3_location("s3://state?endpoint=https://minio:9000&use_path_style=true&profile=ci")
    assert (v2.prefix, v2.endpoint_url, v2.path_style, v2.profile) == (
        "",
        "https://minio:9000",
        True,
        "ci",
    )
    assert s3_location("s3://state?endpoint=minio:9000").endpoint_url == "https://minio:9000"


def test_postgres_location_drops_the_cli_table_option_and_prefixes_keys_with_the_database() -> None:
    found = postgres_location(
        "postgres://ana@/pulumi?host=/run/pg&table=team_state&sslmode=disable"
    )
    assert found.table == "team_state"
    assert found.prefix == "pulumi/"
    assert found.conninfo == "postgres://ana@/pulumi?host=/run/pg&sslmode=disable"
    assert postgres_location("postgres://ana@db").prefix == ""
    with pytest.raises(BackendURLError):
        postgres_location("postgres://ana@db/x?table=a;drop")


def test_socket_url_has_no_password_and_names_a_port_only_when_not_the_default() -> None:
    assert socket_url("postgres", "stackflow", "pulumi", Path("/s/run"), 5432) == (
        "postgres://stackflow@/pulumi?host=/s/run"
    )
    assert socket_url("postgresql+asyncpg", "stackflow", "prefect", Path("/s/run"), 6543) == (
        "postgresql+asyncpg://stackflow@/prefect?host=/s/run&port=6543"
    )


def test_open_records_picks_the_store_by_scheme(tmp_path: Path) -> None:
    assert isinstance(open_records(str(tmp_path)), FileRecords)
    store = open_records(f"file://{tmp_path}/r")
    assert isinstance(store, FileRecords) and store.folder == tmp_path / "r"
    assert file_folder("file://~/x") == Path("~/x").expanduser()
    with pytest.raises(BackendURLError):
        open_records("https://api.pulumi.com")
