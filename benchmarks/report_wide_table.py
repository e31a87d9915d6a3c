"""The wide-table section's report, from its results record (`wide_table.run`)."""

from __future__ import annotations

from benchmarks import harness
from benchmarks.harness import Section, Summary, Target

TITLE = "Wide tables (2,000 columns)"
# issue 28's targets at 2,000 columns
MAX_RSS = 2**30
MAX_SLOWDOWN = 2.0  # values/s within 2x of the Criteo-shaped conversion's
MAX_ADDED = 0.30  # one-pass statistics add at most 30% (CPU time) to the conversion
MAX_SCHEMA_SECONDS = 5.0  # infer-schema and show-schema "still fast"


def _medians(samples: dict) -> dict:
    return {
        config: {
            key: harness.median([s[key] for s in runs])
            for key in ("seconds", "cpu_seconds", "peak_rss", "values", "rows")
        }
        for config, runs in samples.items()
    }


def _draw(m: dict, ax) -> None:
    labels = list(m)
    y = list(range(len(labels)))[::-1]
    rates = [m[c]["values"] / m[c]["cpu_seconds"] / 1e6 for c in labels]
    colors = ["#3182bd" if c.startswith("wide") else "#9ecae1" for c in labels]
    ax.barh(y, rates, color=colors)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    for yi, rate in zip(y, rates, strict=True):
        ax.text(rate * 1.02, yi, f"{rate:.1f}M", va="center", fontsize=7)
    ax.set_xlabel("values per CPU-second (millions), median")
    ax.set_title("Wide (2,000 columns) vs Criteo-shaped conversion", fontsize=9)


def render(record: dict) -> Section:
    m = _medians(record["samples"])
    schema = record["schema"]
    per_cpu = {c: v["values"] / v["cpu_seconds"] for c, v in m.items()}
    slowdown = per_cpu["criteo-without"] / per_cpu["wide-without"]
    added = m["wide-with"]["cpu_seconds"] / m["wide-without"]["cpu_seconds"] - 1
    criteo_added = m["criteo-with"]["cpu_seconds"] / m["criteo-without"]["cpu_seconds"] - 1
    peak = max(m["wide-with"]["peak_rss"], m["wide-without"]["peak_rss"])
    complete = all(s["rows"] == s["expected"] for runs in record["samples"].values() for s in runs)
    body = [
        [
            config,
            f"{v['rows']:,.0f}",
            f"{v['values']:,.0f}",
            f"{v['seconds']:.1f}",
            f"{v['cpu_seconds']:.1f}",
            harness.rate(per_cpu[config]),
            harness.mib(v["peak_rss"]),
        ]
        for config, v in m.items()
    ]
    markdown = "\n".join(
        [
            f"A generated table of {record['rows']:,} rows x {record['columns']:,} columns (two "
            "fifths int64, two fifths float64, a fifth strings; 5% nulls; 5 files of one row "
            "group each) and a Criteo-shaped dataset, converted with default options "
            "(DirectRunner, one thread per core), with and without the one-pass statistics; "
            f"medians of {len(record['samples']['wide-with'])} interleaved runs. Values are "
            "non-null cells; CPU seconds are the converting process's (this machine's cores "
            "are shared, so CPU time is the steadier measure); peak RSS is the process tree's.",
            "",
            harness.table(
                ["", "rows", "values", "seconds", "CPU s", "values/CPU s", "peak RSS"],
                body,
                "lrrrrrr",
            ),
            "",
            f"Statistics add {harness.percent(added)} CPU at 2,000 columns "
            f"({harness.percent(criteo_added)} on the Criteo-shaped data). On the wide output: "
            f"`infer-schema` {schema['infer_seconds']:.2f} s, `show-schema` "
            f"{schema['show_seconds']:.2f} s.",
        ]
    )
    targets = [
        Target(
            "peak memory converting 2,000 columns",
            f"≤ {harness.mib(MAX_RSS)}",
            harness.mib(peak),
            peak <= MAX_RSS and complete,
        ),
        Target(
            "values/CPU s at 2,000 columns vs Criteo-shaped",
            f"within {MAX_SLOWDOWN:.0f}x",
            f"{slowdown:.2f}x slower",
            slowdown <= MAX_SLOWDOWN,
        ),
        Target(
            "statistics' CPU added at 2,000 columns",
            f"≤ {MAX_ADDED:.0%}",
            harness.percent(added),
            added <= MAX_ADDED,
        ),
        Target(
            "infer-schema and show-schema at 2,000 columns",
            f"≤ {MAX_SCHEMA_SECONDS:.0f} s each",
            f"{schema['infer_seconds']:.2f} s, {schema['show_seconds']:.2f} s",
            max(schema["infer_seconds"], schema["show_seconds"]) <= MAX_SCHEMA_SECONDS,
        ),
    ]
    summary = [
        Summary(
            "2,000-column table: conversion (+ statistics)",
            f"{harness.mib(peak)} peak, {harness.rate(per_cpu['wide-without'])} values/CPU s, "
            f"statistics {harness.percent(added)}",
            f"Criteo-shaped: {harness.rate(per_cpu['criteo-without'])} values/CPU s",
            f"{slowdown:.2f}x",
        )
    ]
    return Section(TITLE, markdown, targets, [lambda ax: _draw(m, ax)], summary)
