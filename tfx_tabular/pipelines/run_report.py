"""The report of a local pipeline run, read back from ML Metadata: collected as a dict (the
`--json` document of `tfx-tabular run`) and formatted as lines for people.

Besides the artifacts and training figures: the Evaluator's overall metrics and blessing (TFMA's
`load_metrics` on its ModelEvaluation, the `blessed` property of its ModelBlessing), and, when
the model learned the demo's label (`tfx_tabular.demo.criteo`), its AUC beside the ceiling: the
AUC of the label's known probabilities on the same eval split.
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np
import pyarrow as pa
from ml_metadata.proto import metadata_store_pb2


def _latest(store, type_name):
    artifacts = store.get_artifacts_by_type(type_name)
    return max(artifacts, key=lambda a: a.id) if artifacts else None


def _inputs_of_producer(store, artifact) -> list:
    events = store.get_events_by_artifact_ids([artifact.id])
    producers = [e.execution_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
    if not producers:
        return []
    inputs = [
        e.artifact_id
        for e in store.get_events_by_execution_ids(producers)
        if e.type == metadata_store_pb2.Event.INPUT
    ]
    return store.get_artifacts_by_id(inputs) if inputs else []


def _examples_report(examples) -> dict:
    props = examples.custom_properties
    rows = props["row_counts"].struct_value if "row_counts" in props else {}
    seconds = props["conversion_seconds"].double_value if "conversion_seconds" in props else 0.0
    return {
        "uri": examples.uri,
        "rows": {k: int(v) for k, v in sorted(rows.items())},
        "conversion_seconds": seconds,
    }


def _training_report(run) -> dict:
    p = run.custom_properties
    report = {"uri": run.uri, "tensorboard": f"tensorboard --logdir {run.uri}"}
    if "examples_per_second" in p:
        report.update(
            examples_per_second=p["examples_per_second"].double_value,
            input_wait_fraction=p["input_wait_fraction"].double_value,
            total_steps=p["total_steps"].int_value,
            replicas=p["replicas"].int_value,
        )
    if "export_seconds" in p:
        report["export_seconds"] = p["export_seconds"].double_value
    report["eval"] = {k[5:]: _metric(v) for k, v in sorted(p.items()) if k.startswith("eval_")}
    return report


def _metric(value):
    """An eval metric as the trainer recorded it: a float, or the text of a non-finite one
    ("nan", "inf"), kept as text so that the report stays JSON."""
    return value.string_value if value.WhichOneof("value") == "string_value" else value.double_value


def _lineage(store, types: dict, model) -> list[str]:
    chain = [model]
    for _ in range(4):
        parents = _inputs_of_producer(store, chain[-1])
        if not parents:
            break
        # Through the Schema, then the Examples (ParquetSchemaGen may read statistics too).
        ranked = sorted(
            parents, key=lambda a: {"Schema": 0, "Examples": 1}.get(types[a.type_id], 2)
        )
        chain.append(ranked[0])
    return [f"{types[a.type_id]}#{a.id}" for a in reversed(chain)]


def _outputs_of_consumers(store, artifact, types: dict, type_name: str) -> list:
    """The `type_name` artifacts of the executions that read `artifact`, newest first."""
    events = store.get_events_by_artifact_ids([artifact.id])
    consumers = [e.execution_id for e in events if e.type == metadata_store_pb2.Event.INPUT]
    if not consumers:
        return []
    outputs = [
        e.artifact_id
        for e in store.get_events_by_execution_ids(consumers)
        if e.type == metadata_store_pb2.Event.OUTPUT
    ]
    found = store.get_artifacts_by_id(outputs) if outputs else []
    return sorted((a for a in found if types[a.type_id] == type_name), key=lambda a: -a.id)


def _overall_metrics(evaluation_uri: str) -> dict[str, float]:
    """The scalar metrics of the overall slice of a TFMA evaluation, by name."""
    import tensorflow_model_analysis as tfma

    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        return {
            kv.key.name: kv.value.double_value.value
            for kv in sorted(metrics.metric_keys_and_values, key=lambda kv: kv.key.name)
            if kv.value.HasField("double_value") and not kv.key.HasField("sub_key")
        }
    return {}


def _evaluator_report(store, types: dict, model) -> Optional[dict]:
    """The stock Evaluator's view of `model`: metrics and blessing (True / False; None when the
    Evaluator validated nothing, as it does without thresholds)."""
    evaluations = _outputs_of_consumers(store, model, types, "ModelEvaluation")
    if not evaluations:
        return None
    blessings = _outputs_of_consumers(store, model, types, "ModelBlessing")
    properties = blessings[0].custom_properties if blessings else {}
    return {
        "uri": evaluations[0].uri,
        "metrics": _overall_metrics(evaluations[0].uri),
        "blessed": properties["blessed"].int_value == 1 if "blessed" in properties else None,
        "blessing_uri": blessings[0].uri if blessings else None,
    }


def _split_columns(examples_uri: str, split: str, schema) -> pa.Table:
    """Every row of one split of an Examples artifact, the `schema`'s features only, each as an
    Arrow list column (TensorFlow's parser: it reads only these features)."""
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    files = sorted(tf.io.gfile.glob(f"{examples_uri.rstrip('/')}/Split-{split}/*"))
    dtypes = {schema_pb2.INT: tf.int64, schema_pb2.FLOAT: tf.float32, schema_pb2.BYTES: tf.string}
    spec = {
        f.name: tf.io.RaggedFeature(dtypes[f.type], row_splits_dtype=tf.int64)
        for f in schema.feature
    }
    records = tf.data.TFRecordDataset(
        files, compression_type="GZIP" if files and files[0].endswith(".gz") else None
    )
    tables = []
    for batch in records.batch(65_536).map(lambda b: tf.io.parse_example(b, spec)):
        columns = {
            name: pa.ListArray.from_arrays(
                pa.array(ragged.row_splits.numpy().astype(np.int32)),
                pa.array(ragged.flat_values.numpy()),
            )
            for name, ragged in batch.items()
        }
        tables.append(pa.table(columns))
    return pa.concat_tables(tables)


def _demo_report(examples: dict, schema_path: str, training: dict) -> Optional[dict]:
    """The learned AUC beside the ceiling, when the model learned the demo data's label; the
    ceiling is the AUC of `criteo.click_probability` on the rows of the eval split."""
    from tfx_tabular import schemas
    from tfx_tabular.conversion.source_metadata import read_source_metadata
    from tfx_tabular.demo import criteo
    from tfx_tabular.schemas.infer import label_of

    learned, eval_rows = training["eval"].get("auc"), examples["rows"].get("eval")
    if learned is None or not eval_rows:
        return None
    if not criteo.is_demo_schema(read_source_metadata(examples["uri"]).schema):
        return None
    schema = schemas.load_schema(schema_path)
    if label_of(schema) != "label":
        return None
    wanted = {"label", *criteo.SIGNAL_COLUMNS}
    kept = [f for f in schema.feature if f.name in wanted]
    del schema.feature[:]
    schema.feature.extend(kept)
    rows = _split_columns(examples["uri"], "eval", schema)
    labels = criteo.scalar_values(rows.column("label"))
    if labels.min() == labels.max():
        return None  # an AUC needs both classes in the split
    ceiling = criteo.roc_auc(labels, criteo.click_probability(rows))
    return {"learned_auc": learned, "ceiling_auc": ceiling, "chance_auc": 0.5, "rows": eval_rows}


def collect_run_report(metadata_path: str) -> dict:
    """What the latest run produced: examples, schema, training figures, model and lineage,
    the Evaluator's metrics and blessing, and the demo's learned AUC beside its ceiling."""
    from tfx.orchestration import metadata

    with metadata.Metadata(metadata.sqlite_metadata_connection_config(metadata_path)) as m:
        store = m.store
        types = {t.id: t.name for t in store.get_artifact_types()}
        model, run = _latest(store, "Model"), _latest(store, "ModelRun")
        # The Examples and Schema the trainer consumed (Transform also outputs both types).
        trained_on = _inputs_of_producer(store, model) if model else []
        examples = next(
            (a for a in trained_on if types[a.type_id] == "Examples"), _latest(store, "Examples")
        )
        schema = next(
            (a for a in trained_on if types[a.type_id] == "Schema"), _latest(store, "Schema")
        )
        report: dict[str, Optional[dict]] = {
            "examples": None,
            "schema": None,
            "example_statistics": None,
            "training": None,
            "model": None,
            "evaluator": None,
            "demo": None,
        }
        if examples:
            report["examples"] = _examples_report(examples)
        if schema:
            num = schema.custom_properties.get("num_features")
            report["schema"] = {
                "path": os.path.join(schema.uri, "schema.pbtxt"),
                "features": num.int_value if num else None,
            }
        statistics = _latest(store, "ExampleStatistics")
        if statistics:
            report["example_statistics"] = {"uri": statistics.uri}
        if run:
            report["training"] = _training_report(run)
        if model:
            report["model"] = {
                "path": os.path.join(model.uri, "Format-Serving"),
                "lineage": _lineage(store, types, model),
            }
            report["evaluator"] = _evaluator_report(store, types, model)
    if examples and schema and run:
        report["demo"] = _demo_report(
            report["examples"], report["schema"]["path"], report["training"]
        )
    return report


def _training_lines(training: dict, demo: Optional[dict]) -> list[str]:
    lines = []
    if "examples_per_second" in training:
        lines.append(
            f"Training  {training['examples_per_second']:,.0f} examples/s, waiting "
            f"on input: {training['input_wait_fraction']:.0%}, "
            f"{training['total_steps']} steps on {training['replicas']} replica(s)"
        )
    if training["eval"]:
        lines.append(
            "Eval      "
            + ", ".join(
                f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in training["eval"].items()
            )
        )
    if demo:
        lines.append(
            f"Demo      learned AUC {demo['learned_auc']:.4f} vs ceiling "
            f"{demo['ceiling_auc']:.4f} (chance {demo['chance_auc']}): the ceiling is the AUC "
            f"of the labels' known probabilities on the {demo['rows']:,} eval rows"
        )
    lines.append(f"TensorBoard  {training['tensorboard']}")
    return lines


def _evaluator_lines(evaluator: dict) -> list[str]:
    metrics = ", ".join(
        f"{name} {value:,.0f}" if name == "example_count" else f"{name} {value:.4f}"
        for name, value in evaluator["metrics"].items()
    )
    verdict = {
        True: f"blessed  {evaluator['blessing_uri']}",
        False: f"NOT blessed  {evaluator['blessing_uri']}",
        None: "not validated: the Evaluator has no thresholds for this task",
    }[evaluator["blessed"]]
    return [f"Evaluator {metrics}", f"  {verdict}", f"  metrics  {evaluator['uri']}"]


def format_run_report(report: dict, pipeline_name: str) -> list[str]:
    lines = [f"== {pipeline_name}: summary from ML Metadata =="]
    examples, statistics, schema, training, model = (
        report[k] for k in ("examples", "example_statistics", "schema", "training", "model")
    )
    if examples:
        lines.append(f"Examples  {examples['uri']}")
        lines += [f"  Split-{name}: {count:,} rows" for name, count in examples["rows"].items()]
        if examples["conversion_seconds"]:
            total, seconds = sum(examples["rows"].values()), examples["conversion_seconds"]
            lines.append(f"  converted at {total / seconds:,.0f} rows/s ({seconds:.1f} s)")
    if statistics:
        lines.append(f"Example statistics  {statistics['uri']}")
        if statistics.get("facets"):
            page = statistics["facets"]
            link = page if "://" in page else f"file://{os.path.abspath(page)}"
            lines.append(f"  Facets Overview: {link}")
    if schema:
        lines.append(f"Schema    {schema['path']}  ({schema['features'] or '?'} features)")
    if training:
        lines += _training_lines(training, report.get("demo"))
    if model:
        lines.append(f"Model     {model['path']}")
        lines.append("Lineage   " + " → ".join(model["lineage"]))
    if report.get("evaluator"):
        lines += _evaluator_lines(report["evaluator"])
    return lines
