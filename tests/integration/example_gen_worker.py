"""A pipeline process for the fault tests (run as a subprocess): ParquetExampleGen alone, run with
TFX's BeamDagRunner on a SQLite ML Metadata store.

usage: python tests/example_gen_worker.py DATA PIPELINE_ROOT METADATA_PATH BATCH_SIZE
"""

import sys

from tfx import v1 as tfx
from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

from tfx_tabular.components import ParquetExampleGen

data, root, metadata_path, read_batch_rows = sys.argv[1:5]
BeamDagRunner().run(
    tfx.dsl.Pipeline(
        pipeline_name="fault-test",
        pipeline_root=root,
        components=[
            ParquetExampleGen(input_base=data, read_batch_rows=int(read_batch_rows), num_shards=4)
        ],
        enable_cache=True,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            metadata_path
        ),
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    )
)
print("pipeline finished", flush=True)
