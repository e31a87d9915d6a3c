"""Run by test_kernels.py as a second process: conversions with statistics and columnar batches
of the datasets given, on the in-process DirectRunner, as a task would run them; prints one JSON
line: what numba compiled (not loaded from its cache), how many kernels it loaded from the
cache, whether the cache was warm at the start and how many times the precompile's sample was
converted."""

import json
import os
import sys
import tempfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from numba.core import event  # noqa: E402

recorder = event.RecordingListener()
event.register("numba:compile", recorder)

from tfx_tabular.conversion import convert, plan  # noqa: E402
from tfx_tabular.statistics import precompile  # noqa: E402

IN_MEMORY_BEAM = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]

samples = []
convert_sample = precompile._convert_sample
precompile._convert_sample = lambda folder: samples.append(convert_sample(folder))
warm = precompile.cache_is_warm()

for data in sys.argv[1:]:
    out = tempfile.mkdtemp()
    dataset, splits = plan.plan_conversion(data)
    convert.convert(
        dataset,
        os.path.join(out, "examples"),
        splits,
        plan.OutputOptions(num_shards=2, columnar_batch_rows=8192),  # as pipelines convert
        IN_MEMORY_BEAM,
        example_statistics_dir=os.path.join(out, "statistics"),
    )
compiled = sorted(
    {
        f"{e.data['dispatcher'].py_func.__module__}.{e.data['dispatcher'].py_func.__qualname__}"
        f"{e.data['args']}"
        for _, e in recorder.buffer
        if e.is_start
    }
)
loaded = sum(sum(k.stats.cache_hits.values()) for k in precompile.kernels())
print(json.dumps({"compiled": compiled, "loaded": loaded, "warm": warm, "samples": len(samples)}))
