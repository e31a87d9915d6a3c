"""The one-pass statistics section's report, from its results record (`example_statistics.run`)."""

from __future__ import annotations

from benchmarks import harness
from benchmarks.harness import Section, Summary, Target

TITLE = (
    "One-pass statistics and columnar batches (ParquetExampleGen's `statistics` and `columnar/`)"
)
MAX_ADDED = 0.15  # issue 16: statistics add at most 15% to the conversion
MAX_COLUMNAR_ADDED = 0.15  # issue 27: so do the columnar batch records, with or without statistics
MIN_VS_STOCK = 20  # and cost a twentieth of stock StatisticsGen's extra pass
MAX_MEMORY_GROWTH = 1.25  # "flat": peak RSS at 10x the rows within 25%


def _draw(bars: list[tuple[str, float, str]], ax) -> None:
    y = list(range(len(bars)))[::-1]
    ax.barh(y, [seconds for _, seconds, _ in bars], color=[color for _, _, color in bars])
    ax.set_yticks(y)
    ax.set_yticklabels([label for label, _, _ in bars], fontsize=7)
    ax.set_xscale("log")
    for yi, (_, seconds, _) in zip(y, bars, strict=True):
        ax.text(seconds * 1.08, yi, f"{seconds:.1f} s", va="center", fontsize=7)
    ax.set_xlim(left=1)
    ax.set_xlabel("seconds (log scale), median")
    ax.set_title("Statistics: in the conversion pass vs stock's extra pass", fontsize=9)


def render(record: dict) -> Section:
    samples, stock = record["samples"], record["stock"]
    rows, large_rows = record["rows"], record["large_rows"]
    seconds = {c: harness.median([s["seconds"] for s in runs]) for c, runs in samples.items()}
    rss = {c: harness.median([s["peak_rss"] for s in runs]) for c, runs in samples.items()}
    added = seconds["with"] - seconds["without"]
    share = added / seconds["without"]
    vs_stock = stock["seconds"] / added if added > 0 else float("inf")
    growth = record["large"]["peak_rss"] / rss["columnar-with"]
    columnar_added = {
        "without": seconds["columnar"] / seconds["without"] - 1,
        "with": seconds["columnar-with"] / seconds["with"] - 1,
    }
    columnar_run = samples["columnar"][0]
    bytes_ratio = columnar_run["columnar_bytes"] / columnar_run["per_row_bytes"]
    complete = all(s["rows"] == s["expected"] for runs in samples.values() for s in runs)

    def conversion(label: str, config: str) -> list:
        return [
            label,
            f"{seconds[config]:.2f}",
            harness.rate(rows / seconds[config]),
            harness.mib(rss[config]),
        ]

    body = [
        conversion("ours, conversion without statistics", "without"),
        conversion("ours, conversion with statistics (one pass)", "with"),
        ["  of which statistics", f"{added:.2f}", "", ""],
        conversion("ours, conversion with columnar batches", "columnar"),
        conversion(
            "ours, conversion with columnar batches and statistics (the pipeline's)",
            "columnar-with",
        ),
        [
            "stock StatisticsGen over ours' Examples (extra pass)",
            f"{stock['seconds']:.1f}",
            harness.rate(rows / stock["seconds"]),
            "",
        ],
        [
            f"ours with columnar batches and statistics, {large_rows:,} rows (1 run)",
            f"{record['large']['seconds']:.1f}",
            harness.rate(large_rows / record["large"]["seconds"]),
            harness.mib(record["large"]["peak_rss"]),
        ],
    ]
    markdown = "\n".join(
        [
            f"Same {rows:,}-row dataset, default options (DirectRunner, one thread per core, no "
            f"compression), medians of {len(samples['with'])} interleaved runs; seconds are "
            "`convert()` from planning to publishing. Stock StatisticsGen (TFX's executor, "
            "DirectRunner with a worker process per core, its faster mode) reads the Examples "
            "ours wrote: the second pass stock TFX needs. Peak RSS: the converting process tree. "
            f"Columnar batch records ({columnar_run['columnar_bytes'] / 2**20:,.0f} MiB) vs the "
            f"per-row shards ({columnar_run['per_row_bytes'] / 2**20:,.0f} MiB): "
            f"{bytes_ratio:.2f}x the bytes.",
            "",
            harness.table(["", "seconds", "rows/s", "peak RSS"], body, "lrrr"),
        ]
    )
    targets = [
        Target(
            f"statistics' cost added to the conversion at {rows:,} rows",
            f"≤ {MAX_ADDED:.0%}",
            harness.percent(share),
            share <= MAX_ADDED and complete,
        ),
        Target(
            "statistics vs stock StatisticsGen's extra pass",
            f"≥ {MIN_VS_STOCK}x faster",
            harness.ratio(vs_stock) if added > 0 else "no cost measurable",
            vs_stock >= MIN_VS_STOCK,
        ),
        Target(
            "columnar batches' cost added to the conversion, without statistics",
            f"≤ {MAX_COLUMNAR_ADDED:.0%}",
            harness.percent(columnar_added["without"]),
            columnar_added["without"] <= MAX_COLUMNAR_ADDED and complete,
        ),
        Target(
            "columnar batches' cost added to the conversion, with statistics",
            f"≤ {MAX_COLUMNAR_ADDED:.0%}",
            harness.percent(columnar_added["with"]),
            columnar_added["with"] <= MAX_COLUMNAR_ADDED and complete,
        ),
        Target(
            "columnar batch records' bytes vs the per-row shards'",
            "≤ 1x",
            f"{bytes_ratio:.2f}x",
            bytes_ratio <= 1,
        ),
        Target(
            f"peak memory with columnar batches and statistics, {rows:,} → {large_rows:,} rows",
            f"flat (≤ {MAX_MEMORY_GROWTH:.2f}x)",
            f"{growth:.2f}x",
            growth <= MAX_MEMORY_GROWTH,
        ),
    ]
    bars = [
        ("conversion", seconds["without"], "#9ecae1"),
        ("conversion + statistics\n(one pass)", seconds["with"], "#3182bd"),
        ("conversion + columnar\n+ statistics", seconds["columnar-with"], "#08519c"),
        ("stock StatisticsGen\n(extra pass)", stock["seconds"], "#999999"),
    ]
    summary = [
        Summary(
            "example statistics while converting",
            f"+{added:.2f} s ({seconds['without']:.2f} → {seconds['with']:.2f} s median, "
            f"{harness.percent(share)})",
            f"stock StatisticsGen's extra pass: {stock['seconds']:.1f} s",
            harness.ratio(vs_stock) if added > 0 else "no cost measurable",
        ),
        Summary(
            "columnar batch records while converting",
            f"{harness.percent(columnar_added['without'])} time without statistics, "
            f"{harness.percent(columnar_added['with'])} with; {bytes_ratio:.2f}x the per-row bytes",
            f"per-row Examples only: {seconds['without']:.2f} s",
            f"{seconds['columnar'] / seconds['without']:.2f}x time",
        ),
        Summary(
            "peak memory with columnar batches and statistics, 10x more rows",
            f"{harness.mib(rss['columnar-with'])} → {harness.mib(record['large']['peak_rss'])} from "
            f"{rows:,} to {large_rows:,} rows",
            "",
            f"{growth:.2f}x",
        ),
    ]
    return Section(TITLE, markdown, targets, [lambda ax: _draw(bars, ax)], summary)
