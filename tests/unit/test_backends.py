"""Backend URLs: which kind, how the Pulumi CLI's options read, and masking before display."""

from __future__ import annotations

from pathlib import Path

import pytest

import stackflow.backends
from stackflow.backends import (
    KINDS,
    SCHEMES,
    BackendURLError,
    backend_for,
    mask_url,
    open_records,
    records_beside,
    url_secrets,
)
from stackflow.backends.file import FileRecords, folder_of
from stackflow.backends.postgres import postgres_location, socket_url
from stackflow.backends.s3 import s3_location
from stackflow.errors import SettingsError
from stackflow.settings import get_settings

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


def test_backend_for_picks_the_kind_and_the_refusal_masks_the_password() -> None:
    assert backend_for("file:///x").name == "file"
    assert backend_for("s3://b").name == "S3"
    assert backend_for("postgresql://h/d") is backend_for("postgres://h/d")
    assert backend_for("https://api.pulumi.com").name == "Pulumi Cloud"
    with pytest.raises(BackendURLError) as caught:
        backend_for("gs://ana:s3cr3t@bucket")
    assert "s3cr3t" not in str(caught.value)
    assert "file://<folder>" in str(caught.value)


def a_project(folder: Path, project_file: str = "") -> Path:
    """A project folder with one environment, dev, and `project_file` as its stackflow.toml."""
    (folder / "environments").mkdir(parents=True, exist_ok=True)
    (folder / "environments" / "dev.toml").write_text('kind = "dev"\ncloud = "local"\n')
    (folder / "stackflow.toml").write_text(project_file)
    return folder


def test_the_settings_accept_exactly_the_schemes_a_run_can_use(tmp_path: Path) -> None:
    """One list: every scheme the settings take has a kind the run opens, and no other."""
    a_project(tmp_path)
    assert SCHEMES == ("file", "s3", "postgres", "postgresql", "https")
    examples = {
        "file": f"file://{tmp_path}/b",
        "s3": "s3://bucket/team",
        "postgres": "postgres://ana@db/pulumi",
        "postgresql": "postgresql://ana@db/pulumi",
        "https": "https://api.pulumi.com",
    }
    for scheme in SCHEMES:
        settings = get_settings(
            project_dir=tmp_path,
            environ={},
            backend_url=examples[scheme],
            pulumi_access_token="t",
        )
        assert backend_for(settings.resolved_backend_url).schemes.count(scheme) == 1
    for refused in ("gs://bucket/x", "azblob://container", "http://api.example", "ftp://x"):
        with pytest.raises(SettingsError) as caught:
            get_settings(project_dir=tmp_path, environ={}, backend_url=refused)
        assert "accepted: file://<folder>" in str(caught.value), refused


def test_every_kind_module_is_listed_once() -> None:
    """A new kind is a module under stackflow/backends with a BACKEND, and one line in KINDS."""
    folder = Path(stackflow.backends.__file__).parent
    # besides the kinds: their interface, and the PostgreSQL kind's shared connection
    not_kinds = ("__init__", "base", "pgconnection")
    modules = sorted(p.stem for p in folder.glob("*.py") if p.stem not in not_kinds)
    listed = sorted(type(kind).__module__.rsplit(".", 1)[-1] for kind in KINDS)
    assert modules == listed
    assert len(SCHEMES) == len(set(SCHEMES))


def test_url_secrets_finds_passwords_in_userinfo_and_options() -> None:
    assert url_secrets("postgres://ana:p%40ss@db/x") == ["p@ss"]
    assert url_secrets("postgres://ana@/x?host=/s&password=hunter2&sslmode=x") == ["hunter2"]
    assert url_secrets("s3://bucket/p?region=eu-west-1") == []


def test_records_live_beside_each_self_managed_kind_only() -> None:
    assert records_beside("file:///state/pulumi") == "/state/pulumi/.stackflow"
    assert records_beside("s3://b/team?region=r") == "s3://b/team/.stackflow?region=r"
    assert (
        records_beside("postgres://ana@/pulumi?host=/s&table=t")
        == "postgresql://ana@/stackflow?host=/s"
    )
    assert records_beside("https://api.pulumi.com") is None


def test_a_port_that_does_not_parse_hints_at_percent_encoding() -> None:
    with pytest.raises(BackendURLError) as caught:
        backend_for("postgres://ana:pa/ss@db/x").check("postgres://ana:pa/ss@db/x")
    assert "percent-encode" in str(caught.value) and "pa/ss" not in str(caught.value)


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
    assert folder_of("file://~/x") == Path("~/x").expanduser()
    with pytest.raises(BackendURLError):
        open_records("https://api.pulumi.com")


@pytest.mark.parametrize(
    ("key", "url", "variable"),
    [
        ("backend_url", "postgres://ana:s3cr3t@db/pulumi", "STACKFLOW_BACKEND_URL"),
        ("records_url", "postgresql://ana@db/x?password=s3cr3t", "STACKFLOW_RECORDS_URL"),
    ],
)
def test_a_password_in_the_committed_project_file_is_refused_naming_the_variable(
    tmp_path: Path, key: str, url: str, variable: str
) -> None:
    root = a_project(tmp_path, f'project = "demo"\n{key} = "{url}"\n')
    with pytest.raises(SettingsError) as caught:
        get_settings(project_dir=root, environ={})
    message = str(caught.value)
    assert f"stackflow.toml: {key}" in message and variable in message
    assert "s3cr3t" not in message
    # the same URL from this machine's variable is taken (it never reaches a file)
    a_project(tmp_path, 'project = "demo"\n')
    taken = get_settings(project_dir=root, environ={variable: url})
    assert getattr(taken, key) == url


def test_a_raw_database_url_password_that_cuts_the_url_short_hints_at_percent_encoding() -> None:
    from stackflow.migrator.target import parse_mysql_url

    with pytest.raises(ValueError) as caught:
        parse_mysql_url("mysql://app:pa/ss@db:3306/app")
    assert "percent-encode" in str(caught.value) and "pa/ss" not in str(caught.value)
    encoded = parse_mysql_url("mysql://app:p%40ss%3Aw%2Fd@db:3306/app")
    assert encoded.password.get_secret_value() == "p@ss:w/d"
