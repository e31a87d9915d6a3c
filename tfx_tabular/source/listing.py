"""Listing a Parquet source's data files: a folder's files (hidden ones left out, patterns
matched, symbolic-link loops refused) or a Delta Lake / Iceberg snapshot's, and the hive
`key=value` partitions along their paths."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import urllib.parse
from typing import Optional, Sequence

import pyarrow.fs as pafs

from tfx_tabular.source import tables
from tfx_tabular.source.errors import InputError, InputNotFoundError


def _is_hidden(name: str) -> bool:
    # Spark and Hive leave _SUCCESS, _metadata, _committed_*, .crc files beside the data.
    return name.startswith(("_", "."))


# The folder name Hive, Spark, pyarrow, pandas, DuckDB and Polars all write for a null partition value.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def partitions_of(relative: str) -> tuple[tuple[str, Optional[str]], ...]:
    """The hive `key=value` folders along a relative path, unescaped; None for a null value."""
    pairs = []
    for part in relative.split("/")[:-1]:
        if "=" in part:
            key, value = part.split("=", 1)
            try:  # strict: the default replaces invalid UTF-8 with U+FFFD, silently changing values
                key = urllib.parse.unquote(key, errors="strict")
                value = urllib.parse.unquote(value, errors="strict")
            except UnicodeDecodeError:
                raise InputError(
                    f"{relative}: partition folder {part!r} is not percent-encoded UTF-8"
                ) from None
            pairs.append((key, None if value == NULL_PARTITION else value))
    return tuple(pairs)


def matches_pattern(relative: str, pattern: str) -> bool:
    """A relative file path matches a glob if it, or one of its folders, does."""
    parts = relative.split("/")
    return any(fnmatch.fnmatchcase("/".join(parts[: i + 1]), pattern) for i in range(len(parts)))


def list_files(
    filesystem: pafs.FileSystem, base: str, patterns: Sequence[str] = ("*",)
) -> list[pafs.FileInfo]:
    """Data files under `base` whose relative path, or one of its folders, matches a pattern."""
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    except FileNotFoundError:
        raise InputNotFoundError(f"input folder {base} does not exist") from None
    except NotADirectoryError:
        raise InputError(
            f"input {base} is a file; give the folder that holds the Parquet files"
        ) from None
    chosen = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        relative = posixpath.relpath(info.path, base)
        parts = relative.split("/")
        if any(_is_hidden(p) for p in parts):
            continue
        if any(matches_pattern(relative, pattern) for pattern in patterns):
            chosen.append(info)
    if isinstance(filesystem, pafs.LocalFileSystem):
        # Listing follows symbolic links: a link back up the tree would read the same rows again
        # (many times over, until the OS stops resolving the loop).
        seen: dict[str, str] = {}
        for info in chosen:
            real = os.path.realpath(info.path)
            if real in seen:
                raise InputError(
                    f"{info.path} and {seen[real]} are the same file (through a "
                    "symbolic link); its rows would be read twice"
                )
            seen[real] = info.path
    return sorted(chosen, key=lambda i: i.path)


def table_files(
    filesystem: pafs.FileSystem, base: str, snapshot: tables.Snapshot, patterns: Sequence[str]
) -> list[pafs.FileInfo]:
    """The snapshot's data files that match a pattern; each must exist."""
    chosen = [
        f.relative for f in snapshot.files if any(matches_pattern(f.relative, p) for p in patterns)
    ]
    infos = filesystem.get_file_info([posixpath.join(base, r) for r in chosen])
    missing = next((i.path for i in infos if i.type != pafs.FileType.File), None)
    if missing is not None:
        raise InputError(
            f"{missing}: listed by the {snapshot.format} table (version {snapshot.version}) "
            "but missing"
        )
    return sorted(infos, key=lambda i: i.path)
