"""FileBasedExampleGen's driver (span / version / {SPAN} patterns), with a fingerprint over every
data file below the matched partition folders and, for a Delta Lake or Iceberg table, its log,
so TFX's cache notices a changed file or a new table version."""

from __future__ import annotations

import hashlib
from typing import Iterable, Optional

from tfx.components.example_gen import driver, input_processor
from tfx.proto import example_gen_pb2, range_config_pb2

from tfx_tabular.source import tables
from tfx_tabular.source.filesystems import resolve_filesystem
from tfx_tabular.source.listing import list_files


class _InputProcessor(input_processor.FileBasedInputProcessor):
    def get_input_fingerprint(self, span: int, version: Optional[int]) -> str:
        digest = hashlib.sha256()
        filesystem, base = resolve_filesystem(self._input_base_uri)
        for split in self._splits:
            pattern = self.get_pattern_for_span_version(split.pattern, span, version)
            for info in list_files(filesystem, base, [pattern]):
                digest.update(f"{split.name}\0{info.path}\0{info.size}\0{info.mtime_ns}\n".encode())
        # A table version that only removes files leaves every data file as it was.
        for info in tables.log_files(filesystem, base):
            digest.update(f"log\0{info.path}\0{info.size}\0{info.mtime_ns}\n".encode())
        return f"sha256:{digest.hexdigest()}"


class Driver(driver.FileBasedDriver):
    def get_input_processor(
        self,
        splits: Iterable[example_gen_pb2.Input.Split],
        range_config: Optional[range_config_pb2.RangeConfig] = None,
        input_base_uri: Optional[str] = None,
    ):
        return _InputProcessor(input_base_uri, splits, range_config)
