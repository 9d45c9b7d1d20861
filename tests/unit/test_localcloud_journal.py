"""The local cloud's journal file (checksummed JSON lines): a torn last line is cut off and loses
nothing else, a garbled line is refused naming the file and the line, older unframed lines read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from stackflow.localcloud.errors import JournalError
from stackflow.localcloud.server import framed

pytestmark = pytest.mark.unit


def records(n: int) -> list[dict[str, object]]:
    return [
        {"seq": i, "action": f"CreateVpc{i}", "body": {"form": {"CidrBlock": "10.0.0.0/16"}}}
        for i in range(n)
    ]


def test_appended_records_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    for record in records(3):
        framed.append(path, record)
    assert framed.read(path) == records(3)
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_torn_last_line_is_cut_off_and_the_next_append_is_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    for record in records(2):
        framed.append(path, record)
    torn = framed.frame({"seq": 2, "action": "CreateSubnet"})[:25]  # a crash mid-write
    with path.open("ab") as handle:
        handle.write(torn)

    assert framed.read(path) == records(2)  # reading leaves it out, changes nothing
    assert framed.repair(path)
    assert not framed.repair(path)
    framed.append(path, {"seq": 2, "action": "CreateSubnet"})

    assert framed.read(path) == [*records(2), {"seq": 2, "action": "CreateSubnet"}]


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda line: line.replace(b"10.0.0.0", b"10.9.0.0"), "checksum does not match"),
        (lambda line: line[:9] + b"{not json" + line[18:], "checksum does not match"),
        (lambda line: b"{not json at all\n", "not JSON"),
        (lambda line: b"[1, 2]\n", "not a JSON object"),
    ],
)
def test_a_garbled_line_is_refused_naming_the_file_and_the_line(
    tmp_path: Path, damage: Callable[[bytes], bytes], problem: str
) -> None:
    path = tmp_path / "journal.jsonl"
    for record in records(3):
        framed.append(path, record)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = damage(lines[1])
    path.write_bytes(b"".join(lines))

    with pytest.raises(JournalError, match=problem) as refused:
        framed.read(path)
    assert f"{path} line 2 is damaged" in str(refused.value)


def test_lines_written_before_the_checksums_still_read(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records(2)))
    framed.append(path, records(3)[2])
    assert framed.read(path) == records(3)
