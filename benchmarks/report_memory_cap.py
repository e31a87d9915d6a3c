"""The memory-cap section's report, from its results record (`memory_cap.run`)."""

from __future__ import annotations

from benchmarks import harness
from benchmarks.harness import Section, Summary, Target

TITLE = "Larger than memory: conversion and input_fn under a memory cap"
DATA_OVER_CAP = 4


def _target_name(kind: str) -> str:
    return f"{kind} under a cap ≤ 1/{DATA_OVER_CAP} of its data"


def _verdict(kind: str, results: dict, cap: int) -> Target:
    """The target on the largest size."""
    big = results[max(results)]
    if "error" in big:
        return Target(_target_name(kind), "completes", big["error"], False)
    over = big["data_bytes"] / cap
    complete = big.get("rows") == big.get("expected") if kind == "convert" else big["examples"] > 0
    return Target(
        _target_name(kind),
        f"completes on ≥ {DATA_OVER_CAP}x the cap",
        f"{harness.size(big['data_bytes'])} of data under a "
        f"{harness.mib(cap)} cap ({over:.1f}x); peak RSS "
        f"{harness.mib(big['peak_rss'])}",
        complete and over >= DATA_OVER_CAP,
    )


def _summary(results: dict, caps: dict) -> Summary:
    """The largest size of each job: what it did under its cap."""
    done, over = [], []
    for kind, what in (("convert", "converted"), ("input_fn", "read by the input_fn")):
        n = max(results[kind])
        big = results[kind][n]
        if "error" in big:
            done.append(
                f"{kind} on {n:,} rows under a {harness.mib(caps[kind])} cap: {big['error']}"
            )
            continue
        amount = big.get("rows", big.get("examples"))
        data, unit = ("Arrow data", "rows/s") if kind == "convert" else ("TFRecords", "ex/s")
        done.append(
            f"{n:,} rows ({harness.size(big['data_bytes'])} of {data}) {what} under a "
            f"{harness.mib(caps[kind])} cgroup cap at {harness.rate(amount / big['seconds'])} "
            f"{unit}, peak RSS {harness.mib(big['peak_rss'])}"
        )
        over.append(f"{big['data_bytes'] / caps[kind]:.1f}x")
    return Summary(
        "larger than memory", "; ".join(done), "", f"{' and '.join(over)} the cap" if over else ""
    )


def _row(kind: str, n: int, r: dict, cap: int) -> list:
    if "error" in r:
        return [kind, f"{n:,}", "—", harness.mib(cap), "—", "—", "—", r["error"]]
    amount = r.get("rows", r.get("examples"))
    return [
        kind,
        f"{n:,}",
        harness.size(r["data_bytes"]),
        harness.mib(cap),
        harness.mib(r["peak_rss"]),
        harness.mib(r["cgroup_peak"]),
        harness.rate(amount / r["seconds"]),
        f"{amount:,} done",
    ]


def render(record: dict) -> Section:
    """The section from its results record."""
    caps = record["caps"]
    if "unavailable" in record:
        reason = record["unavailable"]
        return Section(
            TITLE,
            f"Not measured: {reason}.",
            [Target(_target_name(kind), "completes", reason, None) for kind in caps],
            summary=[Summary("larger than memory", f"not measured: {reason}")],
        )
    results = {kind: {int(n): r for n, r in record[kind].items()} for kind in caps}
    body = [_row(kind, n, r, caps[kind]) for kind in caps for n, r in results[kind].items()]
    markdown = "\n".join(
        [
            f"Each run is a fresh process inside a cgroup v1 memory cgroup (`memory.limit_in_bytes`: "
            f"{harness.mib(caps['convert'])} for the conversion, {harness.mib(caps['input_fn'])} for "
            "the input_fn, which loads TensorFlow), joined before any import; exceeding the limit "
            "gets the process killed. Datasets: `tfx_tabular.demo.criteo.write_dataset` at each size "
            "(14 files, row groups of 65,536 rows), converted with the defaults (threads, 8,192-row "
            "batches). "
            "*Data* is the decoded Arrow size for the conversion (rows × "
            f"{record['bytes_per_row']:,.0f} bytes per row, measured on a row group) and the TFRecord "
            "bytes of both splits for the input_fn, which reads all of them once (batch 4096, default "
            "options: no RAM budget set, so tf.data does not know about the cap). *Peak RSS* "
            "is the process's VmHWM; *cgroup peak* adds page cache, which the kernel reclaims at "
            "the limit.",
            "",
            harness.table(
                ["Job", "Rows", "Data", "Cap", "Peak RSS", "cgroup peak", "Rows/s", "Result"],
                body,
                "lrrrrrrl",
            ),
        ]
    )

    def panel(ax):
        for kind, style in (("convert", "o-"), ("input_fn", "s--")):
            points = [(n, r["peak_rss"]) for n, r in results[kind].items() if "error" not in r]
            ax.plot(
                [n for n, _ in points],
                [p / 2**20 for _, p in points],
                style,
                label=f"{kind} peak RSS",
            )
            ax.axhline(caps[kind] / 2**20, linestyle=":", color="gray")
        harness.finish_memory_axes(
            ax, "rows (log scale)", "MiB", "Peak RSS under a memory cap (dotted: the caps)"
        )

    return Section(
        TITLE,
        markdown,
        [_verdict(kind, results[kind], caps[kind]) for kind in caps],
        [panel],
        [_summary(results, caps)],
    )
