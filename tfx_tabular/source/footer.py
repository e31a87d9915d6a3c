"""Which columns of a Parquet footer use a logical type newer than our pinned pyarrow 10 reads.

pyarrow 10 refuses such a footer whole ("Thrift LogicalType that is not recognized"), without
naming the column. This walks the footer's Thrift (compact protocol) just far enough to name it:
the schema elements' names and logical types, nothing else.
"""

from __future__ import annotations

from typing import Iterator

# The LogicalType union members newer than pyarrow 10's (parquet.thrift field ids), and the
# writer setting that avoids each.
NEWER_LOGICAL_TYPES = {
    15: ("FLOAT16", "cast float16 columns to float32 before writing"),
    16: ("VARIANT", "write the column as a JSON string instead"),
    17: ("GEOMETRY", "write the geometry as WKB binary without the logical type"),
    18: ("GEOGRAPHY", "write the geography as WKB binary without the logical type"),
}
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = (
    1, 2, 3, 7, 8, 9, 10, 11, 12,
)  # fmt: skip


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def byte(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def binary(self) -> bytes:
        n = self.varint()
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def fields(self) -> Iterator[tuple[int, int]]:
        """A struct's (field id, type) pairs; the caller reads or skips each value."""
        last = 0
        while (header := self.byte()) != 0:
            delta, kind = header >> 4, header & 0x0F
            if delta:
                last += delta
            else:
                zigzag = self.varint()
                last = (zigzag >> 1) ^ -(zigzag & 1)
            yield last, kind

    def list_header(self) -> tuple[int, int]:
        header = self.byte()
        size = header >> 4
        return (self.varint() if size == 15 else size), header & 0x0F

    def skip(self, kind: int) -> None:
        if kind in (_BOOL_TRUE, _BOOL_FALSE):
            return  # a struct field's bool lives in its header
        if kind == _BYTE:
            self.pos += 1
        elif kind == _DOUBLE:
            self.pos += 8
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            size, element = self.list_header()
            for _ in range(size):
                if element in (_BOOL_TRUE, _BOOL_FALSE):
                    self.pos += 1  # a list's bools take a byte each
                else:
                    self.skip(element)
        elif kind == _MAP:
            size = self.varint()
            types = self.byte() if size else 0
            for _ in range(size):
                self.skip(types >> 4)
                self.skip(types & 0x0F)
        elif kind == _STRUCT:
            for _, inner in self.fields():
                self.skip(inner)
        else:  # i16, i32, i64
            self.varint()


def _schema_element(reader: _Reader) -> tuple[str, int]:
    """A SchemaElement's name and logical type (its union member's field id; 0 for none)."""
    name, logical = "", 0
    for field, kind in reader.fields():
        if field == 4:
            name = reader.binary().decode("utf-8", "replace")
        elif field == 10:
            for member, inner in reader.fields():
                logical = member
                reader.skip(inner)
        else:
            reader.skip(kind)
    return name, logical


def newer_logical_types(footer: bytes) -> list[tuple[str, int]]:
    """(column name, logical type field id) of the footer's columns of NEWER_LOGICAL_TYPES."""
    reader = _Reader(footer)
    for field, kind in reader.fields():
        if field != 2:  # FileMetaData.schema: the list of SchemaElements
            reader.skip(kind)
            continue
        size, _ = reader.list_header()
        elements = [_schema_element(reader) for _ in range(size)]
        return [(name, t) for name, t in elements if t in NEWER_LOGICAL_TYPES]
    return []
