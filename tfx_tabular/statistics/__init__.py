"""Example statistics computed in the conversion pass: each split's DatasetFeatureStatisticsList,
as stock StatisticsGen writes it into an ExampleStatistics artifact (`engine`), from the encoder's
buffers. Its parts: the string sketches (`sketches`: Misra-Gries top-k, K-minimum values), the
blocks that update every scalar numeric (`numeric`, with the `quantiles` sketch) or string
(`strings`) feature in one compiled call per batch, and TFDV's histogram helpers ported to numba
(`histograms`).

The package's API is re-exported here; the constants and internals live in `engine`.
"""

from tfx_tabular.statistics.engine import (
    FILE_NAME,
    LARGE_BYTES_PLACEHOLDER,
    NON_UTF8_PLACEHOLDER,
    SplitStatistics,
    add_batch,
    serialized_statistics_list,
    statistics_list,
)

__all__ = [
    "FILE_NAME",
    "LARGE_BYTES_PLACEHOLDER",
    "NON_UTF8_PLACEHOLDER",
    "SplitStatistics",
    "add_batch",
    "serialized_statistics_list",
    "statistics_list",
]
