"""The portable-runner section's report, from its results record (`portable_runner.run`)."""

from __future__ import annotations

from benchmarks import harness
from benchmarks.harness import Section, Target

TITLE = "Conversion on Beam's portable runner with an external SDK worker pool"
BILLION = 1_000_000_000
LABELS = {
    "direct": ("DirectRunner, one thread per core (ours' default)", None),
    "portable-1": ("PortableRunner (embed job service) + worker pool, 1 SDK worker", 1),
    "portable-2": ("FnApiRunner + the same worker pool, 2 SDK workers", 2),
}


def _rates(samples: list) -> list:
    return [s["rows"] / s["seconds"] for s in samples]


def vcpu_hours(rows_per_second: float, vcpus: int, rows: int = BILLION) -> float:
    """vCPU-hours to convert `rows` at a rate measured on `vcpus` vCPUs."""
    return rows / rows_per_second * vcpus / 3600


def render(record: dict) -> Section:
    samples, cores = record["samples"], record["cores"]
    direct = harness.median(_rates(samples["direct"]))
    body = []
    for config, runs in samples.items():
        label, workers = LABELS[config]
        rates = _rates(runs)
        charged = workers or cores
        body.append(
            [
                label,
                harness.rate(harness.median(rates)),
                f"{harness.rate(min(rates))}–{harness.rate(max(rates))}",
                harness.ratio(harness.median(rates) / direct),
                f"{harness.median([s['seconds'] for s in runs]):.1f}",
                f"{harness.median([s['check_seconds'] for s in runs]):.1f}",
                f"{harness.median([s['wall'] for s in runs]):.1f}",
                f"{vcpu_hours(harness.median(rates), charged):.2f} ({charged} vCPU)",
            ]
        )
    complete = all(s["rows"] == s["expected"] for runs in samples.values() for s in runs)
    markdown = "\n".join(
        [
            f"Same {record['rows']:,} rows, {record['num_shards']} shards, local Parquet to a local "
            "folder, medians of the interleaved repeats. The worker pool is one "
            "`apache_beam.runners.worker.worker_pool_main` process started for the section; every "
            "job starts fresh SDK worker processes from it (interpreter, imports and the encoder's "
            "JIT load are inside the conversion's seconds). Beam 2.61's Python job service runs "
            "one SDK worker per job whatever the options say; two workers are its FnApiRunner "
            "given the pool as default environment and `--direct_num_workers=2`. *Worker check*: "
            "the pre-flight start of one pool worker (`tfx_tabular.runners.workers`). *vCPU-h per 1B "
            f"rows*: 10^9 / rows/s × the vCPUs charged / 3600 — the machine's {cores} for the "
            "DirectRunner, one per SDK worker for the pool (the job service's own CPU, small "
            "here, is not charged).",
            "",
            harness.table(
                [
                    "Configuration",
                    "Rows/s (median)",
                    "Min–max",
                    "vs DirectRunner",
                    "Conversion s",
                    "Worker check s",
                    "Process s",
                    "vCPU-h per 1B rows",
                ],
                body,
                "lrrrrrrr",
            ),
        ]
    )
    target = Target(
        "conversion on the portable runner, 1 and 2 SDK workers",
        "every row converted",
        "every row converted" if complete else "rows missing",
        complete,
    )
    return Section(TITLE, markdown, [target])
