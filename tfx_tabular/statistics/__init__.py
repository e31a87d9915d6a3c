"""Example statistics computed in the conversion pass (no TFX): each split's
DatasetFeatureStatisticsList, as stock StatisticsGen writes it into an ExampleStatistics
artifact, from the encoder's buffers. `accumulators` holds a split's mergeable state, fed a
batch at a time (`add_batch`, through `batch_values`' per-batch views); `parts` writes and reads it as
a shard's part file; `render` makes the message; `options` holds TFDV's defaults they follow.
Their parts: the string sketches (`sketches`: Misra-Gries top-k, K-minimum values), the blocks
that update every scalar numeric (`numeric`, with the `quantiles` sketch) or string (`strings`)
feature in one compiled call per batch, TFDV's histogram helpers ported to numba
(`histograms`), and `precompile`, which compiles the conversion's kernels ahead of time.

The conversion's API is re-exported here.
"""

from tfx_tabular.statistics.accumulators import SplitStatistics, add_batch
from tfx_tabular.statistics.options import LARGE_BYTES_PLACEHOLDER, NON_UTF8_PLACEHOLDER
from tfx_tabular.statistics.parts import decode_part, encode_part
from tfx_tabular.statistics.render import FILE_NAME, serialized_statistics_list, statistics_list

__all__ = [
    "FILE_NAME",
    "LARGE_BYTES_PLACEHOLDER",
    "NON_UTF8_PLACEHOLDER",
    "SplitStatistics",
    "add_batch",
    "decode_part",
    "encode_part",
    "serialized_statistics_list",
    "statistics_list",
]
