"""The local cloud's passphrase file: generated once, and a damaged one is named by its path with
what to do (never a traceback, never an empty passphrase that would seal nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackflow.localcloud.errors import PassphraseFileError
from stackflow.localcloud.paths import passphrase, passphrase_file

pytestmark = pytest.mark.unit


def test_it_is_generated_once_and_read_back(tmp_path: Path) -> None:
    first = passphrase(tmp_path / "cloud")
    assert len(first) >= 32
    assert passphrase(tmp_path / "cloud") == first
    assert (passphrase_file(tmp_path / "cloud").stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xff\xfe\x00garbage", "it holds bytes that are not text"),
        (b"   \n", "it is empty"),
        (b"short!", "it is not a passphrase this project wrote"),
    ],
)
def test_a_damaged_file_is_named_with_what_to_do(tmp_path: Path, content: bytes, why: str) -> None:
    root = tmp_path / "cloud"
    root.mkdir()
    passphrase_file(root).write_bytes(content)
    with pytest.raises(PassphraseFileError) as caught:
        passphrase(root)
    message = str(caught.value)
    assert str(passphrase_file(root)) in message and why in message
    assert "what to do:" in message
    assert passphrase_file(root).read_bytes() == content, "nothing was changed"
