"""The report of a local pipeline run, read back from ML Metadata: collected as a dict (the
`--json` document of `tfx-tabular run`) and formatted as lines for people."""

from __future__ import annotations

import os
from typing import Optional

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
    report["eval"] = {k[5:]: v.double_value for k, v in sorted(p.items()) if k.startswith("eval_")}
    return report


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


def collect_run_report(metadata_path: str) -> dict:
    """What the latest run produced: examples, schema, training figures, model and lineage."""
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
            "statistics": None,
            "training": None,
            "model": None,
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
            report["statistics"] = {"uri": statistics.uri}
        if run:
            report["training"] = _training_report(run)
        if model:
            report["model"] = {
                "path": os.path.join(model.uri, "Format-Serving"),
                "lineage": _lineage(store, types, model),
            }
        return report


def format_run_report(report: dict, pipeline_name: str) -> list[str]:
    lines = [f"== {pipeline_name}: summary from ML Metadata =="]
    examples, statistics, schema, training, model = (
        report[k] for k in ("examples", "statistics", "schema", "training", "model")
    )
    if examples:
        lines.append(f"Examples  {examples['uri']}")
        lines += [f"  Split-{name}: {count:,} rows" for name, count in examples["rows"].items()]
        if examples["conversion_seconds"]:
            total, seconds = sum(examples["rows"].values()), examples["conversion_seconds"]
            lines.append(f"  converted at {total / seconds:,.0f} rows/s ({seconds:.1f} s)")
    if statistics:
        lines.append(f"Statistics  {statistics['uri']}")
        if statistics.get("facets"):
            page = statistics["facets"]
            link = page if "://" in page else f"file://{os.path.abspath(page)}"
            lines.append(f"  Facets Overview: {link}")
    if schema:
        lines.append(f"Schema    {schema['path']}  ({schema['features'] or '?'} features)")
    if training:
        if "examples_per_second" in training:
            lines.append(
                f"Training  {training['examples_per_second']:,.0f} examples/s, waiting "
                f"on input: {training['input_wait_fraction']:.0%}, "
                f"{training['total_steps']} steps on {training['replicas']} replica(s)"
            )
        if training["eval"]:
            lines.append(
                "Eval      " + ", ".join(f"{k} {v:.4f}" for k, v in training["eval"].items())
            )
        lines.append(f"TensorBoard  {training['tensorboard']}")
    if model:
        lines.append(f"Model     {model['path']}")
        lines.append("Lineage   " + " → ".join(model["lineage"]))
    return lines
