"""What the report shows of each section, declared: its title (docs/benchmarks.md's `## `
heading, which other pages link to), the figures derived from its medians, its tables, its plot
panels and its rows of README.md's performance table. `report.py` renders them all alike; the
method text is static Markdown in `method/<section>.md`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Union

from benchmarks import data_service, formats, input_pipeline, peers, portable_runner, wide_table
from benchmarks import targets as t
from benchmarks.results import Configuration, Section

Select = Callable[[Section], list[Configuration]]


@dataclasses.dataclass(frozen=True)
class Column:
    header: str
    # A metric (the cell shows its median), or a function of the row and its section.
    value: Union[str, Callable[[Configuration, Section], object]]
    format: Callable = formats.text
    align: str = "r"  # or "l"


@dataclasses.dataclass(frozen=True)
class Table:
    title: str  # a `### ` heading, or "" for none
    rows: Select
    columns: list[Column]


@dataclasses.dataclass(frozen=True)
class Bars:
    """A horizontal bar per configuration: a metric's median, log scale."""

    title: str
    rows: Select
    metric: str
    label: str


@dataclasses.dataclass(frozen=True)
class Lines:
    """A metric's median against the rows, one line per group of configurations."""

    title: str
    groups: dict[str, Select]
    metric: str
    label: str


@dataclasses.dataclass(frozen=True)
class Summary:
    """A row of README.md's performance table: ours against a baseline (a name, or a tuple of
    names: the best of them) in one metric; the ratio is ours ÷ the baseline, or the baseline ÷
    ours where lower is better."""

    what: str
    metric: str
    format: Callable
    ours: str
    baseline: Union[str, tuple, None] = None
    lower_is_better: bool = False


@dataclasses.dataclass(frozen=True)
class Layout:
    section: str
    title: str
    tables: list[Table]
    panels: list = dataclasses.field(default_factory=list)
    summary: list[Summary] = dataclasses.field(default_factory=list)
    derive: Optional[Callable[[Section], None]] = None


# --- selecting, columns, derived figures -------------------------------------------------------


def named(*names: str) -> Select:
    """The configurations of these names that the results hold, in this order."""
    return lambda s: [s[n] for n in names if n in s]


def starting(*prefixes: str) -> Select:
    """The configurations whose names start with one of `prefixes`, in recorded order."""
    return lambda s: [c for n, c in s.configurations.items() if n.startswith(prefixes)]


def by_rows(select: Select) -> Select:
    return lambda s: sorted(select(s), key=lambda c: c.rows)


def span(name: str, header: str, fmt: Callable) -> Column:
    """Min–max over the repeats."""
    return Column(header, lambda c, _: c.range(name), lambda r: f"{fmt(r[0])}–{fmt(r[1])}")


def against(name: str, header: str, baseline: Callable, fmt: Callable) -> Column:
    """The row's median `name` over the baseline configuration's."""
    return Column(header, lambda c, s: getattr(c, name) / getattr(baseline(s), name), fmt)


def _fit(small: Configuration, big: Configuration, rows: float) -> Optional[dict]:
    """Start-up and per-row cost from runs at two sizes; None when too noisy to separate."""
    if big.seconds <= 1.2 * small.seconds:
        return None
    marginal = (big.rows - small.rows) / (big.seconds - small.seconds)
    fixed = max(0.0, small.seconds - small.rows / marginal)
    full = rows / (fixed + rows / marginal)
    return {"fixed_seconds": fixed, "marginal_rows_per_second": marginal, "rows_per_second": full}


EXTRAPOLATED = "extrapolated to all rows: "


def _derive_examplegen(s: Section) -> None:
    """Start-up against per-row cost, ours' and stock's (each mode), extrapolated to all rows."""
    main = s[t.OURS]
    smaller = [c for c in s.starting("ours, none, ") if c.rows < main.rows]
    pairs = [(t.OURS, min(smaller, key=lambda c: c.rows) if smaller else None, main)]
    pairs += [
        (m, s[m], s[f"{m}, 5x rows (1 run)"]) for m in t.STOCK_MODES if f"{m}, 5x rows (1 run)" in s
    ]
    for name, small, big in pairs:
        fit = small and _fit(small, big, main.rows)
        if fit:
            s.derive(f"{EXTRAPOLATED}{name}", rows=main.rows, **fit)


def _derive_statistics(s: Section) -> None:
    s.derive("of which statistics", seconds=s[t.STATS].seconds - s[t.PLAIN].seconds)


def _derive_portable(s: Section) -> None:
    """vCPU-hours per billion rows: the vCPUs charged (the machine's for the DirectRunner, one
    per SDK worker) at each configuration's median rate."""
    for c in list(s.configurations.values()):
        c.metrics["vcpu_hours"] = [1e9 / c.rows_per_second * c.vcpus / 3600]


def _write_and_read(c: Configuration, s: Section) -> float:
    """Rows ÷ (median write s + median read s) of one compression."""
    return c.rows / (s[c.name.replace("read", "ours")].seconds + c.seconds)


AT_BATCH_4096 = {  # each GPU-batch method → the same method at the section's batch
    f"ours: input_fn, columnar batches, {t.GPU}": t.COLUMNAR_FIRST,
    f"ours: input_fn, per-row tf.Example, {t.GPU}": t.PER_ROW_FIRST,
}


def _at_batch_4096(c: Configuration, s: Section) -> float:
    return c.examples_per_second / s[AT_BATCH_4096[c.name]].examples_per_second


NAME = Column("Configuration", lambda c, _: c.name, align="l")
ROWS = Column("Rows", "rows", formats.count)
SECONDS = Column("Median s", "seconds", formats.seconds)
PEAK_RSS = Column("Peak RSS", "peak_rss", formats.mib)
PEAK_PSS = Column("Peak PSS", "peak_pss", formats.mib)
RATE = Column("Rows/s (median)", "rows_per_second", formats.rate)
EPS = Column("Examples/s", "examples_per_second", formats.rate)
PROCESS_SECONDS = Column("Process s", "wall", formats.seconds)
STOCK = lambda s: s.best(t.STOCK_MODES)  # noqa: E731  (stock's faster mode)
OURS_SIZES = by_rows(starting("ours, none"))
CONVERSIONS = starting("stock TFX", "ours, ", "loop:")
INPUT_METHODS = named(*(label for label, _, _ in input_pipeline.METHODS))
DIRECT = portable_runner.CONFIGS["direct"][0]
WIDE = named(*wide_table.CONFIGS)
WIDE_RUNS = named(*wide_table.RUNS)


def _ours_over(c: Configuration, s: Section) -> float:
    """Ours' examples per CPU-second over this row's, at the row's batch size."""
    batch = c.name.rsplit(", batch ", 1)[1]
    return s[f"{t.PEERS_OURS}, batch {batch}"].examples_per_cpu_second / c.examples_per_cpu_second


def _equality(c: Configuration, _: Section) -> str:
    """What the row's check said (the same every repeat, as a rule), or why it could not run."""
    said = c.metrics.get("equality") or c.metrics.get("error") or []
    return " / ".join(dict.fromkeys(said)) or "—"


BEST_PEER = "the best peer loader at batch 4,096"

# What one A100 consumes, top of NVIDIA's published ranges for its TensorFlow 2 examples
# (DeepLearningExamples' READMEs): Wide & Deep 1.6–2.0M examples/s, DLRM 2.8–4.6M.
A100_RATES = {"Wide & Deep": 2.0e6, "DLRM": 4.6e6}


def _cores_for(model: str) -> Callable[[Configuration, Section], float]:
    """The trainer's input cores an A100 training `model` needs at this row's CPU per example."""
    return lambda c, _: c.trainer_cpu_per_million_examples / 1e6 * A100_RATES[model]


def _derive_peers(s: Section) -> None:
    """README's baseline: the best peer per CPU-second at batch 4,096."""
    s.derive(BEST_PEER, examples_per_cpu_second=t.best_peer(s, "4,096").examples_per_cpu_second)


PEER_ROWS = named(*(peers.label(p, b) for b in peers.BATCHES for p in peers.PEERS))
MEASURED_PEERS = lambda s: [c for c in PEER_ROWS(s) if "examples_per_cpu_second" in c.metrics]  # noqa: E731


def _times_faster(x: float) -> str:
    """A ratio of seconds (or of rates inverted) as how many times faster."""
    return formats.ratio(1 / x)


# Laid out as tables: the formatter would give every argument a line of its own.
# fmt: off
LAYOUTS = [
    Layout("examplegen", "ExampleGen: Parquet → TFRecord", [
        Table("Dataset", named("dataset"), [
            ROWS, Column("Files", "files"), Column("Bytes", "bytes", formats.size),
            Column("`day=` folders", "partitions"), Column("First", "first"),
            Column("Last", "last"), Column("Row groups", "row_groups"),
            Column("Features (ours)", "features")]),
        Table("Conversion throughput", CONVERSIONS, [
            NAME, ROWS, Column("Output", "bytes", formats.size), SECONDS, RATE,
            span("rows_per_second", "Min–max rows/s", formats.rate),
            against("rows_per_second", "vs stock", STOCK, formats.ratio),
            against("rows_per_second", "vs tfx_bsl loop", lambda s: s[t.LOOP], formats.share),
            PEAK_PSS, PROCESS_SECONDS, Column("Rows lost", "lost_rows", formats.count)]),
        Table("Start-up cost, and what stock would do on all the rows", starting(EXTRAPOLATED), [
            NAME, Column("Fixed s", "fixed_seconds", formats.seconds),
            Column("Marginal rows/s", "marginal_rows_per_second", formats.rate),
            Column("Rows/s end to end", "rows_per_second", formats.rate),
            against("rows_per_second", "ours ÷ it", lambda s: s[t.OURS], _times_faster)]),
        Table("Peak memory against data size (ours, compression none)", OURS_SIZES, [
            ROWS, Column("Peak PSS sum (median)", "peak_pss", formats.mib),
            span("peak_pss", "Min–max", formats.mib),
            Column("Peak RSS sum (median)", "peak_rss", formats.mib),
            span("peak_rss", "Min–max", formats.mib),
            Column("Largest process RSS", "peak_single_rss", formats.mib),
            Column("Processes", "processes", formats.count)]),
        Table("Reading the output back, and write + read end to end", starting("read, "), [
            NAME, Column("Read s", "seconds", formats.seconds),
            Column("Read ex/s", "rows_per_second", formats.rate),
            span("rows_per_second", "Min–max ex/s", formats.rate),
            Column("Write + read rows/s", _write_and_read, formats.rate)]),
    ], [
        Bars("Parquet → TFRecord tf.Example", CONVERSIONS, "rows_per_second", "rows/s"),
        Lines("Peak memory vs data size", {
            "ours: PSS sum": OURS_SIZES,
            "stock TFX (threads): PSS sum": by_rows(starting("stock TFX (threads), gzip"))},
            "peak_pss", "peak PSS of the process tree"),
        Bars("Reading the output back (input_fn)", starting("read, "), "rows_per_second",
             "examples/s"),
    ], [
        Summary("Parquet → TFRecord, end to end (Beam DirectRunner, one thread per core), rows/s",
                "rows_per_second", formats.rate, t.OURS, t.STOCK_MODES),
        Summary("the same against the raw loop (no Beam), rows/s", "rows_per_second",
                formats.rate, t.OURS, t.LOOP),
        Summary("the same extrapolated to all rows: stock's fixed + per-row cost",
                "rows_per_second", formats.rate, t.OURS,
                tuple(EXTRAPOLATED + m for m in t.STOCK_MODES)),
        Summary("peak memory of the conversion (PSS), 10x more rows", "peak_pss", formats.mib,
                "ours, none, 10,000,000 rows", t.OURS),
    ], _derive_examplegen),
    Layout("example_statistics",
           "One-pass statistics and columnar batches (ParquetExampleGen's `statistics` and "
           "`columnar/`)", [
        Table("", starting("conversion", "of which", "stock"), [
            NAME, ROWS, SECONDS, RATE, PEAK_RSS,
            Column("Per-row bytes", "per_row_bytes", formats.size),
            Column("Columnar bytes", "columnar_bytes", formats.size)]),
    ], [
        Bars("Statistics: in the conversion pass vs stock's extra pass",
             named(t.PLAIN, t.STATS, t.COLUMNAR_STATS, t.STOCK_STATS), "seconds", "seconds"),
    ], [
        Summary("example statistics while converting: seconds added", "seconds",
                formats.seconds, "of which statistics", t.STOCK_STATS, True),
        Summary("columnar batch records and statistics while converting: seconds", "seconds",
                formats.seconds, t.COLUMNAR_STATS, t.PLAIN, True),
        Summary("the same with the strings in the columnar batches: seconds", "seconds",
                formats.seconds, t.COLUMNAR_STRINGS_STATS, t.PLAIN, True),
    ], _derive_statistics),
    Layout("schema_inference", "Schema inference (ParquetSchemaGen)", [
        Table("", starting(""), [
            NAME, SECONDS, Column("Files", "files", formats.count),
            against("seconds", "vs stock", lambda s: s[t.STOCK_SCHEMA], _times_faster),
            Column("of which StatisticsGen s", "statistics_seconds", formats.seconds),
            Column("Features", "feature_count", formats.count),
            Column("Names or types differing", "type_differences", formats.count)]),
    ], [], [
        Summary("schema inference (footers only), seconds", "seconds", formats.seconds,
                "ours, footers only", t.STOCK_SCHEMA, True),
    ]),
    Layout("input_pipeline", "Trainer input pipeline (input_fn)", [
        Table("", INPUT_METHODS, [
            NAME, EPS,
            against("examples_per_second", "vs TFXIO", lambda s: s[t.TFXIO], formats.ratio),
            against("examples_per_second", "of raw bound", lambda s: s[t.RAW], formats.share),
            Column("Spread", lambda c, _: c.spread("examples_per_second"), formats.share),
            PEAK_RSS]),
        Table("Peak memory as the data grows", starting("peak RSS:"), [NAME, ROWS, PEAK_RSS, EPS]),
        Table("Batches of a GPU's size", named(*AT_BATCH_4096), [
            NAME, EPS, Column("vs batch 4,096", _at_batch_4096, formats.ratio), PEAK_RSS]),
        Table("Training the reference model", starting("reference model"), [
            NAME, Column("Steps/s", "steps_per_second", formats.seconds), EPS,
            Column("Input wait", "input_wait_fraction", formats.share)]),
        Table("The demo's AUC from each path", starting("demo,"), [
            NAME, Column("Eval AUC", "eval_auc", formats.score),
            Column("Ceiling AUC", "ceiling_auc", formats.score)]),
    ], [
        Bars("Trainer input pipelines", INPUT_METHODS, "examples_per_second", "examples/s"),
    ], [
        Summary("trainer input, first epoch, examples/s", "examples_per_second", formats.rate,
                t.COLUMNAR_FIRST, t.TFXIO),
        Summary("trainer input, cached epochs, examples/s", "examples_per_second",
                formats.rate, "ours: cached epochs", t.TFXIO),
        Summary("a stock `run_fn` module's input (its `data_accessor` call), examples/s",
                "examples_per_second", formats.rate,
                t.ACCESSOR_STRINGS, "run_fn input under the stock Trainer (its data_accessor)"),
        Summary("reference model training (CPU), columnar batches vs per row, steps/s",
                "steps_per_second", formats.seconds, "reference model, columnar batches",
                "reference model, per-row tf.Example"),
    ]),
    Layout("peers", "Peer Parquet → TensorFlow loaders", [
        Table("", PEER_ROWS, [
            NAME, EPS, Column("Examples/CPU s", "examples_per_cpu_second", formats.rate),
            Column("Ours ÷ it, per CPU s", _ours_over, formats.ratio), PEAK_RSS,
            Column("Batches against the Parquet values", _equality, align="l")]),
    ], [
        Bars("Peer loaders into TensorFlow, per CPU-second", MEASURED_PEERS,
             "examples_per_cpu_second", "examples per CPU-second"),
    ], [
        Summary("Parquet into TensorFlow, batch 4,096, examples per CPU-second: ours (columnar) "
                "vs the best peer loader", "examples_per_cpu_second", formats.rate,
                peers.label("ours", 4096), BEST_PEER),
    ], _derive_peers),
    Layout("data_service", "Input workers (tf.data service)", [
        Table("", named(*(data_service.label(w, p) for p in data_service.PATHS
                          for w in data_service.WHERE)), [
            NAME, EPS, Column("Trainer CPU s per 1M examples",
                              "trainer_cpu_per_million_examples", formats.seconds),
            Column("Trainer CPU vs in-process", t.service_cpu_share, formats.percent)]),
        Table("Input cores per A100, on paper", named(*(data_service.label(w, p)
                                                       for p in data_service.PATHS
                                                       for w in data_service.WHERE)), [
            NAME, *(Column(f"Trainer cores, {model} ({rate / 1e6:.1f}M/s)", _cores_for(model),
                           formats.cores) for model, rate in A100_RATES.items())]),
    ]),
    Layout("memory_cap", "Larger than memory: conversion and input_fn under a memory cap", [
        Table("", starting("convert", "input_fn"), [
            NAME, Column("Data", "data_bytes", formats.size), Column("Cap", "cap", formats.mib),
            PEAK_RSS, Column("cgroup peak", "cgroup_peak", formats.mib), RATE,
            Column("Data ÷ cap", lambda c, _: t.over_cap(c), formats.ratio)]),
    ], [
        Lines("Peak RSS under a memory cap", {
            "convert": by_rows(starting("convert")), "input_fn": by_rows(starting("input_fn"))},
            "peak_rss", "peak RSS"),
    ], [
        Summary("larger than memory: 7,000,000 rows converted under a cgroup cap, rows/s",
                "rows_per_second", formats.rate, "convert, 7,000,000 rows"),
        Summary("larger than memory: the same read by the input_fn under a cap, ex/s",
                "rows_per_second", formats.rate, "input_fn, 7,000,000 rows"),
    ]),
    Layout("portable_runner",
           "Conversion on Beam's portable runner with an external SDK worker pool", [
        Table("", starting(""), [
            NAME, RATE, span("rows_per_second", "Min–max", formats.rate),
            against("rows_per_second", "vs DirectRunner", lambda s: s[DIRECT], formats.ratio),
            Column("Conversion s", "seconds", formats.seconds),
            Column("Worker check s", "check_seconds", formats.seconds), PROCESS_SECONDS,
            Column("vCPUs charged", "vcpus", formats.count),
            Column("vCPU-h per 1B rows", "vcpu_hours", formats.seconds)]),
    ], [], [
        Summary("vCPU-hours to convert 1B Criteo-shaped rows, one SDK worker vs the DirectRunner",
                "vcpu_hours", formats.seconds,
                "PortableRunner (embed job service) + worker pool, 1 SDK worker",
                DIRECT, True),
    ], _derive_portable),
    Layout("wide_table", "Wide tables (2,000 columns)", [
        Table("", WIDE, [
            NAME, ROWS, Column("Values", "values", formats.count), SECONDS,
            Column("CPU s", "cpu_seconds", formats.seconds),
            Column("Values/CPU s", "values_per_cpu_second", formats.rate), PEAK_RSS]),
        Table("", named(t.WIDE_SCHEMA), [
            NAME, Column("infer-schema s", "infer_seconds", formats.seconds),
            Column("show-schema s", "show_seconds", formats.seconds)]),
        Table("`tfx-tabular run`, one epoch", WIDE_RUNS, [
            NAME, Column("Features", "features", formats.count), SECONDS,
            Column("Steps", "steps", formats.count),
            Column("Steps/s", "steps_per_second", formats.seconds),
            Column("Export s", "export_seconds", formats.seconds),
            Column("Eval AUC", "eval_auc", formats.score), PEAK_RSS]),
    ], [
        Bars("Wide (2,000 columns) vs Criteo-shaped conversion", WIDE, "values_per_cpu_second",
             "values per CPU-second"),
    ], [
        Summary("2,000-column table: conversion, values per CPU-second", "values_per_cpu_second",
                formats.rate, "wide-without", "criteo-without"),
    ]),
]
# fmt: on
