"""The input-pipeline section's report, from its results record (`input_pipeline.run`)."""

from __future__ import annotations

from benchmarks import harness
from benchmarks.harness import Section, Summary, Target

COLORS = {
    "task_ours": "tab:green",
    "task_ours_per_row": "tab:olive",
    "task_ours_cold": "tab:cyan",
    "task_ours_per_row_cold": "tab:brown",
    "task_ours_cached": "tab:green",
    "task_ours_gpu_batch": "tab:green",
    "task_ours_per_row_gpu_batch": "tab:olive",
    "task_raw": "tab:blue",
}
SHORT = {
    "task_ours": "ours, columnar batches",
    "task_ours_per_row": "ours, per-row tf.Example",
    "task_ours_cold": "ours, columnar batches, cache cold",
    "task_ours_per_row_cold": "ours, per-row tf.Example, cache cold",
    "task_ours_cached": "ours, cached",
}


def _comparison_notes(eps: dict) -> list[str]:
    """The comparisons older results files lack, when present: the page cache cold, TFXIO with
    its shuffle off (its default shuffles records through a 10,000-record buffer, input_fn
    shuffles blocks), and a stock-Trainer run_fn's input under the stock Trainer and under
    TabularTrainer."""
    notes = []
    if "task_ours_cold" in eps:
        notes.append(
            "Page cache cold: the examples' files flushed and evicted from the page cache "
            "(`posix_fadvise` DONTNEED) before the run, which reads one epoch at most; this "
            "machine's disk is virtual, so its host may still cache it."
        )
    if "task_tfxio_unshuffled" in eps:
        notes.append(
            "TFXIO's default shuffles records through a 10,000-record buffer; input_fn shuffles "
            "blocks of records. With TFXIO's shuffle off, input_fn's first epoch is "
            f"{harness.ratio(eps['task_ours'] / eps['task_tfxio_unshuffled'])} TFXIO."
        )
    if "task_accessor_ours" in eps:
        notes.append(
            "A stock-Trainer run_fn calling fn_args.data_accessor.tf_dataset_factory (batch, "
            "label, TFXIO's default options) reads "
            f"{harness.ratio(eps['task_accessor_ours'] / eps['task_accessor_stock'])} as fast "
            "under TabularTrainer as under the stock Trainer, the module unchanged."
        )
    return [line for note in notes for line in ("", note)]


def _issue_targets(rate_label: str, ratio_label: str, columnar: float, per_row: float) -> list:
    """Issue 27's two targets for one measurement of the columnar and per-row paths."""
    return [
        Target(rate_label, "≥ 1.5M ex/s", harness.rate(columnar), columnar >= 1.5e6),
        Target(ratio_label, "≥ 6x", harness.ratio(columnar / per_row), columnar >= 6 * per_row),
    ]


def _columnar_targets(ours: float, eps: dict) -> list[Target]:
    """Issue 27's targets for the columnar batches, where the results have the per-row path
    (and, where measured, with the page cache cold)."""
    if "task_ours_per_row" not in eps:
        return []
    pairs = [("", ours, eps["task_ours_per_row"])]
    if "task_ours_cold" in eps and "task_ours_per_row_cold" in eps:
        pairs.append((", page cache cold", eps["task_ours_cold"], eps["task_ours_per_row_cold"]))
    return [
        target
        for cache, columnar, per_row in pairs
        for target in _issue_targets(
            f"input_fn first epoch, columnar batches{cache}",
            f"columnar vs per-row, first epoch{cache}",
            columnar,
            per_row,
        )
    ]


def _median_peak(samples) -> float:
    """The median peak RSS of a size's runs (older results: one run, not a list)."""
    samples = samples if isinstance(samples, list) else [samples]
    return harness.median([s["peak_rss"] for s in samples])


def _gpu_batch_medians(record: dict) -> dict:
    """Task → median examples/s of the GPU-sized batches, if measured."""
    methods = record.get("gpu_batch", {}).get("methods", {})
    return {
        task: harness.median([s["examples_per_second"] for s in m["samples"]])
        for task, m in methods.items()
    }


# Each GPU-sized batch method, and the same method at the section's batch.
AT_SECTION_BATCH = {
    "task_ours_gpu_batch": "task_ours",
    "task_ours_per_row_gpu_batch": "task_ours_per_row",
}


def _gpu_batch_text(record: dict, gpu_eps: dict, eps: dict) -> list[str]:
    if not gpu_eps:
        return []
    gpu = record["gpu_batch"]
    rows = [
        [
            gpu["methods"][task]["label"],
            harness.rate(rate),
            harness.ratio(rate / eps[AT_SECTION_BATCH[task]]),
            harness.mib(_median_peak(gpu["methods"][task]["samples"])),
        ]
        for task, rate in gpu_eps.items()
    ]
    columnar, per_row = gpu_eps["task_ours_gpu_batch"], gpu_eps["task_ours_per_row_gpu_batch"]
    return [
        "",
        f"In batches of {gpu['batch']:,} rows (a GPU's: NVIDIA's DLRM trains on one A100 with "
        f"65,536, its Wide & Deep with 131,072), on the {gpu['rows']:,}-row dataset's train "
        f"split so that an epoch holds many batches; {gpu['batches']} batches after the first, "
        f"same method: columnar {harness.ratio(columnar / per_row)} per row. Peak RSS is the "
        "process's, with tf.data's buffers of batches this size.",
        "",
        harness.table(["method", "examples/s", f"vs batch {record['batch']:,}", "peak RSS"], rows),
    ]


def _gpu_batch_targets(record: dict, eps: dict) -> list[Target]:
    """Issue 27's two targets again, for batches of a GPU's size."""
    if not eps:
        return []
    batch = f"batch {record['gpu_batch']['batch']:,}"
    return _issue_targets(
        f"input_fn, columnar batches, {batch}",
        f"columnar vs per-row, {batch}",
        eps["task_ours_gpu_batch"],
        eps["task_ours_per_row_gpu_batch"],
    )


def _training_medians(record: dict) -> dict:
    """The median steps/s and input wait of each training task (task → those two), if any."""
    return {
        task: {
            key: harness.median([s[key] for s in m["samples"]])
            for key in ("steps_per_second", "input_wait_fraction")
        }
        for task, m in record.get("training", {}).items()
    }


def _training_text(record: dict, medians: dict) -> list[str]:
    """A table of the reference model's training rate from each path, when measured."""
    if not medians:
        return []
    rows = [
        [
            record["training"][task]["label"],
            f"{m['steps_per_second']:.2f}",
            harness.rate(m["steps_per_second"] * record["batch"]),
            f"{m['input_wait_fraction']:.0%}",
        ]
        for task, m in medians.items()
    ]
    return [
        "",
        f"Training the reference model (all features, TabularTrainer's loop, default strategy, "
        f"batch {record['batch']}) on this machine's CPUs: the second epoch of "
        f"{record['train_steps']} steps; input wait is the input-bound meter's share of the "
        "epoch spent waiting for the next batch (the CPUs also run the model here).",
        "",
        harness.table(["input", "steps/s", "examples/s", "input wait"], rows),
    ]


def _summary(eps: dict) -> list[Summary]:
    ours, cached, tfxio, raw = (
        eps[t] for t in ("task_ours", "task_ours_cached", "task_tfxio", "task_raw")
    )
    baseline = [f"TFXIO {harness.rate(tfxio)}"]
    if "task_tfxio_unshuffled" in eps:
        baseline[0] += f" (shuffle off: {harness.rate(eps['task_tfxio_unshuffled'])})"
    if "task_batched_features" in eps:
        baseline.append(
            f"make_batched_features_dataset {harness.rate(eps['task_batched_features'])}"
        )
    baseline.append(f"raw bound {harness.rate(raw)}")
    if "task_ours_per_row" in eps:
        baseline.insert(0, f"ours per row {harness.rate(eps['task_ours_per_row'])}")
    rows = [
        Summary(
            "trainer input, first epoch",
            f"{harness.rate(ours)} ex/s",
            "; ".join(baseline),
            f"{harness.ratio(ours / tfxio)} TFXIO, {ours / raw:.0%} of raw",
        ),
        Summary(
            "trainer input, cached epochs",
            f"{harness.rate(cached)} ex/s",
            f"TFXIO {harness.rate(tfxio)}",
            harness.ratio(cached / tfxio),
        ),
    ]
    if "task_accessor_ours" in eps:
        rows.append(
            Summary(
                "a stock `run_fn` module's input (its `data_accessor` call)",
                f"under TabularTrainer: {harness.rate(eps['task_accessor_ours'])} ex/s",
                f"under the stock Trainer: {harness.rate(eps['task_accessor_stock'])}",
                f"{harness.ratio(eps['task_accessor_ours'] / eps['task_accessor_stock'])}, "
                "the module unchanged",
            )
        )
    return rows


def render(record: dict) -> Section:
    """The section from its results record."""
    methods = record["methods"]  # task → {"label", "samples"}, in the measured order
    rates = {task: [s["examples_per_second"] for s in m["samples"]] for task, m in methods.items()}
    eps = {task: harness.median(values) for task, values in rates.items()}
    ours, cached, tfxio_eps, raw = (
        eps[t] for t in ("task_ours", "task_ours_cached", "task_tfxio", "task_raw")
    )
    per_row = eps.get("task_ours_per_row", ours)  # older results: ours was per row
    gpu_eps = _gpu_batch_medians(record)
    memory = record["memory"]
    main_rows, large_rows = memory["rows"]
    main_rss, large_rss = (_median_peak(memory["samples"][str(rows)]) for rows in memory["rows"])
    rss_growth = large_rss / main_rss - 1
    rows = [
        [
            m["label"],
            harness.rate(eps[task]),
            harness.ratio(eps[task] / tfxio_eps),
            f"{eps[task] / raw:.0%}",
            f"{harness.spread(rates[task]):.0%}",
        ]
        for task, m in methods.items()
    ]
    markdown = "\n".join(
        [
            f"Criteo-shaped train split of the {record['rows']:,}-row dataset, uncompressed shards, "
            f"batch {record['batch']}, features parsed with the inferred schema's spec; each method in "
            f"its own process, median of {record['repeats']} interleaved runs of {record['batches']} "
            f"batches after the first (slow methods: {record['slow_batches']}), taken inside a "
            "`tf.function` as a training step takes them (Keras `fit`'s and TabularTrainer's "
            "steps), so no batch is rebuilt as Python objects.",
            "",
            harness.table(["method", "examples/s", "vs TFXIO", "of raw bound", "spread"], rows),
            "",
            f"Peak RSS of ours (columnar batches, whole process, {memory['batches']} batches "
            f"read in each run, median of the runs): {harness.mib(main_rss)} on {main_rows:,} rows, "
            f"{harness.mib(large_rss)} on {large_rows:,} rows ({harness.percent(rss_growth)}).",
            *_comparison_notes(eps),
            *_gpu_batch_text(record, gpu_eps, eps),
            *_training_text(record, _training_medians(record)),
        ]
    )
    targets = [
        Target(
            "input_fn first epoch vs TFXIO",
            "≥ 2x",
            harness.ratio(ours / tfxio_eps),
            ours >= 2 * tfxio_eps,
        ),
        Target(
            "input_fn first epoch per row vs raw bound",
            "≥ 95%",
            f"{per_row / raw:.0%}",
            per_row >= 0.95 * raw,
        ),
        *_columnar_targets(ours, eps),
        *_gpu_batch_targets(record, gpu_eps),
        Target(
            "input_fn cached epochs vs TFXIO",
            "≥ 10x",
            harness.ratio(cached / tfxio_eps),
            cached >= 10 * tfxio_eps,
        ),
        Target(
            "input_fn peak RSS, 10x more data",
            "flat (< +10%)",
            harness.percent(rss_growth),
            rss_growth < 0.10,
        ),
    ]

    def panel(ax):
        labels = [SHORT.get(task, m["label"].split(" (")[0]) for task, m in methods.items()]
        shown = {**eps, **gpu_eps}
        if gpu_eps:
            batch = f", batch {record['gpu_batch']['batch']:,}"
            labels += [SHORT[AT_SECTION_BATCH[task]] + batch for task in gpu_eps]
        ax.barh(labels, list(shown.values()), color=[COLORS.get(t, "tab:gray") for t in shown])
        ax.set_xscale("log")
        ax.set_xlabel("examples/s (log scale)")
        ax.set_title(f"Trainer input pipelines, batch {record['batch']} unless named")
        ax.invert_yaxis()

    summary = _summary(eps)
    training = _training_medians(record)
    if training:
        columnar, per_row = training["task_train_columnar"], training["task_train_per_row"]
        summary.append(
            Summary(
                "reference model training steps/s (CPU), columnar batches",
                f"{columnar['steps_per_second']:.2f} steps/s, input wait "
                f"{columnar['input_wait_fraction']:.0%}",
                f"per row: {per_row['steps_per_second']:.2f} steps/s, input wait "
                f"{per_row['input_wait_fraction']:.0%}",
                harness.ratio(columnar["steps_per_second"] / per_row["steps_per_second"]),
            )
        )
    return Section("Trainer input pipeline (input_fn)", markdown, targets, [panel], summary)
