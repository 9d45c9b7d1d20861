"""What a commit may hold before a worker exports it: a repository is untrusted input.

The commit's tree is listed first (`git ls-tree -r -l`: names, modes and sizes, no file read),
and refused, by name, when it holds a submodule link, a symbolic link that is absolute or leads
out of the export, or more files or bytes than the worker accepts. Only then is it archived; the
archive goes to a file (never memory) and, once unpacked, every link is resolved on disk once more
(a chain of links can leave a folder that no single link leaves).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stackflow.errors import SettingsError, echo

MAX_EXPORT_FILES = 20_000
MAX_EXPORT_BYTES = 200 * 1024 * 1024
_LINK, _GITLINK = "120000", "160000"
_SHOWN = 5  # offending paths an error names


class CommitRefused(SettingsError):
    """A commit the worker will not export or run: names the commit, what and where."""


@dataclass(frozen=True)
class Entry:
    """One file of a commit's tree, as `git ls-tree -r -l` lists it."""

    mode: str
    object_id: str
    size: int  # bytes (0 for a submodule link)
    path: str

    @property
    def is_link(self) -> bool:
        return self.mode == _LINK

    @property
    def is_submodule(self) -> bool:
        return self.mode == _GITLINK

    @property
    def is_file(self) -> bool:
        return self.mode in ("100644", "100755")


def parse_tree(listing: bytes) -> list[Entry]:
    """Entries of `git ls-tree -r -l -z` output."""
    entries = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, _kind, object_id, size = meta.decode().split()
        entries.append(Entry(mode, object_id, 0 if size == "-" else int(size), path.decode()))
    return entries


def _escapes(path: str, target: str) -> bool:
    """Whether link `path` -> `target` leads out of the tree (judged by its words alone)."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return joined == ".." or joined.startswith("../")


def _listed(paths: Iterable[str]) -> str:
    found = list(paths)
    shown = ", ".join(echo(p) for p in found[:_SHOWN])
    return shown + (f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else "")


def check_tree(
    commit: str,
    entries: list[Entry],
    link_targets: dict[str, str],
    max_files: int = MAX_EXPORT_FILES,
    max_bytes: int = MAX_EXPORT_BYTES,
) -> None:
    """Refuse a commit whose tree the worker must not export.

    Args:
        commit: the commit (named in the error).
        entries: its tree (see `parse_tree`).
        link_targets: each link's path -> the text it points to.
        max_files, max_bytes: the largest tree the worker exports.

    Raises:
        CommitRefused: naming the commit, what is wrong and the paths (a few) where.
    """
    head = f"commit {commit[:12]} is refused"
    modules = [e.path for e in entries if e.is_submodule]
    if modules:
        raise CommitRefused(
            f"{head}: it holds submodule links ({_listed(modules)}); an export holds the "
            "commit's own files only: vendor the files or drop the submodule. Nothing was run."
        )
    absolute = [p for p, t in link_targets.items() if t.startswith("/")]
    if absolute:
        raise CommitRefused(
            f"{head}: symbolic links to absolute paths ({_listed(absolute)}) would read the "
            "worker's own files: commit the files themselves. Nothing was run."
        )
    leaving = [p for p, t in link_targets.items() if _escapes(p, t)]
    if leaving:
        raise CommitRefused(
            f"{head}: symbolic links that lead out of the commit ({_listed(leaving)}) would "
            "read the worker's own files: commit the files themselves. Nothing was run."
        )
    total = sum(e.size for e in entries)
    if len(entries) > max_files or total > max_bytes:
        raise CommitRefused(
            f"{head}: its tree holds {len(entries)} files, {total / 2**20:.1f} MiB; a worker "
            f"exports at most {max_files} files and {max_bytes / 2**20:.0f} MiB "
            "(max_export_files, max_export_mb under [git] in stackflow.toml). Nothing was run."
        )


def check_exported(commit: str, folder: Path) -> None:
    """Every link of an unpacked export resolves inside it (checked on disk, links followed).

    Raises:
        CommitRefused: naming the links that leave it.
    """
    root = folder.resolve()
    leaving = []
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                leaving.append(str(path.relative_to(folder)))
    if leaving:
        raise CommitRefused(
            f"commit {commit[:12]} is refused: symbolic links that lead out of the commit "
            f"through other links ({_listed(sorted(leaving))}): commit the files themselves. "
            "Nothing was run."
        )


def check_required(commit: str, entries: list[Entry], required: Iterable[str]) -> None:
    """Each of `required` is a file of the commit (a regular file, or a link inside it).

    Raises:
        CommitRefused: naming each missing one, or one that is a folder or a submodule.
    """
    by_path = {e.path: e for e in entries}
    missing = [p for p in required if p not in by_path]
    if missing:
        raise CommitRefused(
            f"commit {commit[:12]} is refused: it has no {_listed(missing)}, which a worker "
            "needs to run it: commit them. Nothing was run."
        )
    odd = [p for p in required if not (by_path[p].is_file or by_path[p].is_link)]
    if odd:
        raise CommitRefused(
            f"commit {commit[:12]} is refused: {_listed(odd)} is not a plain file. Nothing was run."
        )
