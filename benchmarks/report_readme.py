"""README.md's performance table, generated from a results file so that it never drifts from the
last `make bench`: `benchmarks.run` rewrites it at the end of a full run, and

    python -m benchmarks.report docs/benchmarks.json --readme [README.md]

rewrites it from the saved results without measuring. Only the text between the START and END
markers is replaced; each section's renderer supplies its rows (`Section.summary`) and remarks.
"""

from __future__ import annotations

import textwrap
from typing import Optional

from benchmarks import harness, report_examplegen, report_portable_runner
from benchmarks.harness import Section, Summary

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
NOTICE = (
    "<!-- Generated from docs/benchmarks.json by `make bench` (without measuring: "
    "`python -m benchmarks.report --readme`); edits here are overwritten. -->"
)
WIDTH = 100  # README's prose wraps here


def _fill(text: str) -> str:
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def _vcpu_hours(hours: float) -> str:
    return f"{hours:.1f}" if hours < 10 else f"{hours:,.0f}"


def _cost(results: dict) -> Optional[Summary]:
    """vCPU-hours per billion rows: ours (DirectRunner, and one pool worker) against stock's
    marginal rate, the cost model of docs/examplegen.md#cost-at-scale."""
    sections = results["sections"]
    if "examplegen" not in sections:
        return None
    f = report_examplegen.Figures(sections["examplegen"])
    if f.fit is None:  # stock's two sizes too noisy to separate start-up from per-row cost
        return None
    cores = results["machine"]["nproc"]
    ours = report_portable_runner.vcpu_hours(f.default.rate, cores)
    stock = report_portable_runner.vcpu_hours(f.fit.marginal, cores)
    figures = f"{_vcpu_hours(ours)} (DirectRunner)"
    pool = sections.get("portable_runner", {}).get("samples", {}).get("portable-1")
    if pool:
        pool_rate = harness.median([s["rows"] / s["seconds"] for s in pool])
        figures += f"; {_vcpu_hours(report_portable_runner.vcpu_hours(pool_rate, 1))} "
        figures += "(portable runner, 1 pool worker)"
    return Summary(
        "cost model: vCPU-hours to convert 1B Criteo-shaped rows "
        "([examplegen.md](docs/examplegen.md#cost-at-scale))",
        figures,
        f"stock ExampleGen at its marginal {harness.rate(f.fit.marginal)} rows/s on {cores} "
        f"vCPUs: {_vcpu_hours(stock)}",
        f"{harness.ratio(stock / ours)} fewer",
    )


def _intro(results: dict, report: str) -> str:
    machine, command = results["machine"], results["command"]
    other = results["calibration"]["contention"]["other"]
    dataset = results["sections"].get("examplegen", {}).get("dataset")
    rows = (
        f"{dataset['rows']:,} Criteo-shaped rows ({dataset['files']} Parquet files, "
        f"hive-partitioned by day)"
        if dataset
        else f"{command['rows']:,} Criteo-shaped rows"
    )
    return _fill(
        f"{rows}, medians of {command['repeats']} interleaved repeats, from one `make bench` run "
        f"on {results['started_utc']} ({results['elapsed_seconds'] / 60:.1f} min on "
        f"{machine['nproc']} × {machine['cpu']} vCPUs; other processes' CPU use meanwhile "
        f"{other:.0%}); every figure, method and target: [{report}]({report})."
    )


def _targets(sections: list[Section], report: str) -> str:
    targets = [t for s in sections for t in s.targets]
    measured = [t for t in targets if t.met is not None]
    text = (
        f"Targets: {sum(bool(t.met) for t in measured)} of {len(measured)} met "
        f"([{report}]({report}#targets))"
    )
    missed = [f"{t.name} ({t.measured}; goal {t.goal})" for t in measured if not t.met]
    if missed:
        text += "; not met: " + "; ".join(missed)
    unmeasured = [t.name for t in targets if t.met is None]
    if unmeasured:
        text += "; not measured: " + "; ".join(unmeasured)
    return text + "."


def block(results: dict, sections: list[Section], report: str = "docs/benchmarks.md") -> str:
    """The text between the markers (a newline after START, one before END): `results`, rendered
    as `sections`; `report` is the full report's link, relative to the README."""
    rows = [row for section in sections for row in section.summary]
    cost = _cost(results)
    if cost:
        rows.append(cost)
    table = harness.table(
        ["what", "ours", "baseline", "ratio"],
        [[r.what, r.ours, r.baseline, r.ratio] for r in rows],
        "llll",
    )
    remarks = " ".join([_targets(sections, report), *[r for s in sections for r in s.remarks]])
    return "\n".join(["", NOTICE, "", _intro(results, report), "", table, "", _fill(remarks), ""])


def replace_block(text: str, new: str) -> str:
    """`text` with what lies between its one START marker and its one END marker replaced."""
    if text.count(START) != 1 or text.count(END) != 1:
        raise ValueError(f"expected one {START} and one {END} marker")
    start, end = text.index(START) + len(START), text.index(END)
    if end < start:
        raise ValueError(f"{END} comes before {START}")
    return text[:start] + new + text[end:]


def current_block(text: str) -> str:
    """What lies between the markers now."""
    replace_block(text, "")  # validates the markers
    return text[text.index(START) + len(START) : text.index(END)]


def update(
    readme: str, results: dict, sections: list[Section], report: str = "docs/benchmarks.md"
) -> bool:
    """Rewrite `readme`'s block from `results`; True if it changed."""
    with open(readme, encoding="utf-8") as handle:
        text = handle.read()
    new = replace_block(text, block(results, sections, report))
    if new == text:
        return False
    with open(readme, "w", encoding="utf-8") as handle:
        handle.write(new)
    return True
