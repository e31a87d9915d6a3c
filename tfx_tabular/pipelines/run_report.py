"""The run summary printed after a local pipeline run, read back from ML Metadata."""

from __future__ import annotations

import os

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


def print_run_report(metadata_path: str, pipeline_name: str) -> None:
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
        print(f"== {pipeline_name}: summary from ML Metadata ==")
        if examples:
            props = examples.custom_properties
            rows = props["row_counts"].struct_value if "row_counts" in props else {}
            seconds = (
                props["conversion_seconds"].double_value if "conversion_seconds" in props else 0
            )
            total = sum(rows.values())
            print(f"Examples  {examples.uri}")
            for name, count in sorted(rows.items()):
                print(f"  Split-{name}: {int(count):,} rows")
            if seconds:
                print(f"  converted at {total / seconds:,.0f} rows/s ({seconds:.1f} s)")
        if schema:
            num = schema.custom_properties.get("num_features")
            print(
                f"Schema    {os.path.join(schema.uri, 'schema.pbtxt')}"
                f"  ({num.int_value if num else '?'} features)"
            )
        if run:
            p = run.custom_properties
            if "examples_per_second" in p:
                print(
                    f"Training  {p['examples_per_second'].double_value:,.0f} examples/s, waiting "
                    f"on input: {p['input_wait_fraction'].double_value:.0%}, "
                    f"{p['total_steps'].int_value} steps on {p['replicas'].int_value} replica(s)"
                )
            metrics = {k[5:]: v.double_value for k, v in p.items() if k.startswith("eval_")}
            if metrics:
                print("Eval      " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())))
        if model:
            print(f"Model     {os.path.join(model.uri, 'Format-Serving')}")
            chain = [model]
            for _ in range(4):
                parents = _inputs_of_producer(store, chain[-1])
                if not parents:
                    break
                chain.append(next((a for a in parents if types[a.type_id] == "Schema"), parents[0]))
            print("Lineage   " + " → ".join(f"{types[a.type_id]}#{a.id}" for a in reversed(chain)))
