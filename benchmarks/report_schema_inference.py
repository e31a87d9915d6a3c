"""The schema-inference section's report, from its results record (`schema_inference.run`)."""

from __future__ import annotations

from benchmarks import harness
from benchmarks.harness import Section, Summary, Target


def _agreement(ours: dict, stock: dict) -> list[str]:
    notes = []
    only_ours = sorted(set(ours) - set(stock))
    only_stock = sorted(set(stock) - set(ours))
    if only_ours:
        notes.append(f"only in ours: {', '.join(only_ours)}")
    if only_stock:
        notes.append(f"only in stock: {', '.join(only_stock)}")
    names = {1: "BYTES", 2: "INT", 3: "FLOAT"}
    for name in sorted(set(ours) & set(stock)):
        if ours[name] != stock[name]:
            notes.append(f"{name}: ours {names.get(ours[name])}, stock {names.get(stock[name])}")
    return notes


def render(record: dict) -> Section:
    """The section from its results record."""
    ours, stock, many_files = record["ours"], record["stock"], record["many_files"]
    ours_s = harness.median([o["seconds"] for o in ours])
    many_s = harness.median([m["seconds"] for m in record["many"]])
    speedup = stock["seconds"] / ours_s
    differences = _agreement(ours[0]["features"], stock["features"])
    rows = ours[0]["rows"]
    markdown = "\n".join(
        [
            f"Same {rows:,}-row dataset ({ours[0]['files']} Parquet files). Ours reads only the "
            "footers; stock StatisticsGen + SchemaGen run TFDV over every converted row (DirectRunner, "
            f"multi-process on both cores). Ours: median of {record['repeats']} runs; stock: 1 run.",
            "",
            harness.table(
                ["", "seconds", "rows/s equivalent", "vs stock"],
                [
                    [
                        "ours, footers only",
                        f"{ours_s:.3f}",
                        harness.rate(rows / ours_s),
                        harness.ratio(speedup),
                    ],
                    [
                        "stock StatisticsGen + SchemaGen",
                        f"{stock['seconds']:.1f}",
                        harness.rate(rows / stock["seconds"]),
                        "1.00x",
                    ],
                    ["  of which StatisticsGen", f"{stock['statistics_seconds']:.1f}", "", ""],
                    [f"ours, {many_files} small files", f"{many_s:.3f}", "", ""],
                ],
            ),
            "",
            f"Feature names and types, ours versus stock SchemaGen ({len(ours[0]['features'])} vs "
            f"{len(stock['features'])} features): "
            + ("identical." if not differences else "; ".join(differences) + "."),
            "Shapes differ by design: ours gives shape [1] only to columns whose footers count no "
            "nulls; stock SchemaGen gives it to features present in every example of its data pass.",
        ]
    )
    targets = [
        Target(
            "schema inference vs stock StatisticsGen + SchemaGen",
            "≥ 100x faster",
            harness.ratio(speedup),
            speedup >= 100,
        ),
        Target(
            f"footer inference over {many_files} files", "≤ 2 s", f"{many_s:.2f} s", many_s <= 2.0
        ),
        Target(
            "feature names and types agree with stock SchemaGen",
            "identical",
            "identical" if not differences else f"{len(differences)} differences",
            not differences,
        ),
    ]
    summary = Summary(
        "schema inference (footers only)",
        f"{ours_s:.3f} s; {many_s:.2f} s for {many_files:,} files",
        f"stock StatisticsGen + SchemaGen: {stock['seconds']:.1f} s",
        harness.ratio(speedup),
    )
    return Section("Schema inference (ParquetSchemaGen)", markdown, targets, summary=[summary])
