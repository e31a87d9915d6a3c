"""tensorflow_data_validation's StatsOptions defaults and constants, as stock StatisticsGen runs
them: the statistics computed here take the same sketch sizes, buckets and placeholders (a test
checks they still agree with TFDV's)."""

NUM_TOP_VALUES = 20
NUM_RANK_HISTOGRAM_BUCKETS = 1000
NUM_VALUES_HISTOGRAM_BUCKETS = 10
NUM_HISTOGRAM_BUCKETS = 10
NUM_QUANTILES_HISTOGRAM_BUCKETS = 10
QUANTILES_EPSILON = 0.01
FREQUENCY_THRESHOLD = 1  # top-k lists values counted at least this often
NUM_KMV_BUCKETS = 1024
# As TFDV's BasicStatsGenerator: the equi-width histogram is read off 100x finer quantiles.
STD_HISTOGRAM_QUANTILES_FACTOR = 100
# tensorflow_data_validation.constants; strings longer than LARGE_STRING_THRESHOLD count as one
# placeholder value in top-k, as in TFDV.
NON_UTF8_PLACEHOLDER = "__BYTES_VALUE__"
LARGE_BYTES_PLACEHOLDER = "__LARGE_BYTES__"
LARGE_STRING_THRESHOLD = 1024
