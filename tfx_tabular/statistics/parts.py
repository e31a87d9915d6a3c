"""A split's statistics as a part file (each shard writes one per split; `publish` merges
them): JSON numbers and each sketch's own serialized form, so any worker's Python and tfx_bsl can
merge it; the scalar numeric blocks as their arrays (`ScalarNumerics.to_part`)."""

from __future__ import annotations

import json
import struct

from tfx_bsl.sketches import QuantilesSketch

from tfx_tabular.source.mapping import Kind
from tfx_tabular.statistics import quantiles as kll
from tfx_tabular.statistics.accumulators import FeatureStatistics, SplitStatistics
from tfx_tabular.statistics.numeric import ScalarNumerics
from tfx_tabular.statistics.sketches import DistinctCount, TopK


def _quantiles_to_part(sketch) -> dict:
    if isinstance(sketch, kll.Quantiles):  # a scalar numeric feature's, not tfx_bsl's sketch
        return {"kll": sketch.to_bytes()}
    # QuantilesSketch offers its state only through the pickling protocol's __getstate__.
    return {"tfx_bsl": sketch.__getstate__()}


def _quantiles_from_part(part: dict):
    if "kll" in part:
        return kll.Quantiles.from_bytes(part["kll"])
    sketch = QuantilesSketch.__new__(QuantilesSketch)
    sketch.__setstate__(part["tfx_bsl"])
    return sketch


# How each sketch attribute of FeatureStatistics (`accumulators.SKETCHES`) is written and read.
_SKETCHES = {
    "num_values": (_quantiles_to_part, _quantiles_from_part),
    "quantiles": (_quantiles_to_part, _quantiles_from_part),
    "top": (TopK.to_dict, TopK.from_dict),
    "distinct": (DistinctCount.to_dict, DistinctCount.from_dict),
}


_BLOB = "$bytes"  # a JSON object {_BLOB: [offset, size]}: bytes stored after the JSON


def _pack(document) -> bytes:
    """`document` as a part file: the JSON's size, the JSON, then its bytes values (the
    sketches') unencoded: as base64 inside the JSON, they made writing and merging the parts a
    large share of a wide table's statistics."""
    blobs, offset = [], 0

    def reference(value):
        nonlocal offset
        if not isinstance(value, bytes):
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        blobs.append(value)
        offset += len(value)
        return {_BLOB: [offset - len(value), len(value)]}

    text = json.dumps(document, default=reference).encode()
    return b"".join([struct.pack("<Q", len(text)), text, *blobs])


def _unpack(data: bytes):
    """A part file's document (see `_pack`)."""
    (size,) = struct.unpack_from("<Q", data)
    blobs = memoryview(data)[8 + size :]

    def resolve(item: dict):
        where = item.get(_BLOB)
        if len(item) != 1 or not isinstance(where, list):  # e.g. one feature named _BLOB
            return item
        return bytes(blobs[where[0] : where[0] + where[1]])

    return json.loads(data[8 : 8 + size], object_hook=resolve)


def encode_part(split: SplitStatistics) -> bytes:
    """A split's accumulator as a part file; the scalar numeric blocks stay blocks (merged as
    arrays), the string block is folded into its features first."""
    split.fold_strings()
    in_blocks = {name for block in split.scalar_blocks.values() for name in block.names}
    features = {}
    for name, stats in split.features.items():
        # A block's feature is in its block, unless rows were folded into it before.
        if name not in in_blocks or stats.num_non_missing:
            stats.compact()
            features[name] = _feature_document(stats)
    blocks = {int(kind): block.to_part() for kind, block in split.scalar_blocks.items()}
    return _pack({"num_examples": split.num_examples, "features": features, "blocks": blocks})


def decode_part(data: bytes) -> SplitStatistics:
    """The accumulator a part file holds (see `encode_part`)."""
    decoded = _unpack(data)
    result = SplitStatistics()
    result.num_examples = decoded["num_examples"]
    result.features = {
        name: _feature_statistics(stats) for name, stats in decoded["features"].items()
    }
    result.scalar_blocks = {
        Kind(int(kind)): ScalarNumerics.from_part(part) for kind, part in decoded["blocks"].items()
    }
    for kind, block in result.scalar_blocks.items():
        for name in block.names:
            result.features.setdefault(name, FeatureStatistics(kind, scalar=True))
    return result


def _feature_document(stats: FeatureStatistics) -> dict:
    """A feature's state as plain data: JSON-able but for the sketches' bytes."""
    out = {k: v for k, v in vars(stats).items() if k not in _SKETCHES}
    out["kind"] = int(stats.kind)
    out["sketches"] = {
        name: to_part(getattr(stats, name))
        for name, (to_part, _) in _SKETCHES.items()
        if getattr(stats, name) is not None
    }
    return out


def _feature_statistics(data: dict) -> FeatureStatistics:
    """A feature's state from its plain data (see `_feature_document`)."""
    stats = FeatureStatistics(Kind(data["kind"]), data["scalar"])
    for name, value in data.items():
        if name not in ("kind", "sketches"):
            setattr(stats, name, value)
    for name, encoded in data["sketches"].items():
        setattr(stats, name, _SKETCHES[name][1](encoded))
    return stats
