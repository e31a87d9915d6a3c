"""Render the benchmark report from a results file, without measuring anything.

    python -m benchmarks.report [docs/benchmarks.json] [--out docs/benchmarks.md]
    python -m benchmarks.report [docs/benchmarks.json] --readme [README.md]

One renderer for every section: the tables and plot panels that `layout.py` declares, over the
tidy rows of the results file (`results.py`), the targets of `targets.py` checked against them,
the static method text of `method/*.md`; the plot goes beside the report as .png. With
`--readme` it rewrites only README.md's performance table, between its bench markers.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import textwrap
from typing import Optional, Sequence

from benchmarks import formats, layout, results
from benchmarks.targets import TARGETS, Target

METHOD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "method")
VERDICTS = {True: "**met**", False: "**not met**", None: "not measured"}
START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
NOTICE = (
    "<!-- Generated from docs/benchmarks.json by `make bench` (without measuring: "
    "`python -m benchmarks.report --readme`); edits here are overwritten. -->"
)
WIDTH = 100  # README's prose wraps here
UNMEASURABLE = (results.Missing, ZeroDivisionError, ValueError)


@dataclasses.dataclass
class Checked:
    target: Target
    value: Optional[float]  # None: not measured

    @property
    def met(self) -> Optional[bool]:
        return None if self.value is None else self.target.met(self.value)

    @property
    def goal(self) -> str:
        return f"{self.target.comparison} {self.target.format(self.target.threshold)}"

    @property
    def measured(self) -> str:
        return "—" if self.value is None else self.target.format(self.value)


@dataclasses.dataclass
class Report:
    run: dict  # the results file's header: command, machine, versions, calibration
    sections: dict[str, results.Section]
    checked: list[Checked]


def build(saved: dict) -> Report:
    """The results' sections, with each layout's derived figures, and every target checked."""
    sections = results.sections(saved["rows"])
    for view in layout.LAYOUTS:
        if view.derive and view.section in sections:
            try:
                view.derive(sections[view.section])
            except UNMEASURABLE:
                pass  # the figures it derives are then "not measured"
    return Report(saved["run"], sections, [_check(t, sections) for t in TARGETS])


def _check(target: Target, sections: dict) -> Checked:
    try:
        return Checked(target, target.figure(sections[target.section]))
    except (KeyError, *UNMEASURABLE):
        return Checked(target, None)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A Markdown table; `align` has a letter per column, l or r (default: all l)."""
    marks = [":---" if a == "l" else "---:" for a in align or "l" * len(headers)]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(marks) + " |"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _cell(column: layout.Column, row: results.Configuration, section: results.Section) -> str:
    try:
        if isinstance(column.value, str):
            return column.format(getattr(row, column.value))
        return column.format(column.value(row, section))
    except UNMEASURABLE:
        return "—"


def _table(table: layout.Table, section: results.Section) -> list[str]:
    rows = table.rows(section)
    if not rows:
        return []
    body = [[_cell(column, row, section) for column in table.columns] for row in rows]
    head = [f"### {table.title}", ""] if table.title else []
    headers, align = [c.header for c in table.columns], "".join(c.align for c in table.columns)
    return [*head, markdown_table(headers, body, align), ""]


def _notes(section: results.Section) -> list[str]:
    """What the results say went wrong: every configuration's error."""
    errors = [
        f"* {c.name}: {error}"
        for c in section.configurations.values()
        for error in dict.fromkeys(c.metrics.get("error", []))
    ]
    return ["Errors:", "", *errors, ""] if errors else []


def _method(section: str) -> list[str]:
    with open(os.path.join(METHOD, f"{section}.md"), encoding="utf-8") as handle:
        return [handle.read().strip(), ""]


def _machine(report: Report) -> list[str]:
    run = report.run
    machine, scaling = run["machine"], run["calibration"]["scaling"]
    contention = run["calibration"]["contention"]
    rows = [
        ["CPU", f"{machine['nproc']} × {machine['cpu']}"],
        ["Memory", formats.size(machine["memory"])],
        ["OS", machine["kernel"]],
        ["Load average at start", " / ".join(f"{x:.2f}" for x in machine["load"])],
        [
            "2-process speedup, pure-Python loop (ideal 2.00x), at start and end",
            " and ".join(formats.ratio(s["speedup"]) for s in scaling),
        ],
        [
            "CPU used by other processes / by the benchmark / stolen, during the run",
            f"{formats.share(contention['other'])} / {formats.share(contention['own'])} / "
            f"{formats.share(contention['steal'])} of {machine['nproc']} cores",
        ],
        ["Python", machine["python"]],
        *[[name, version] for name, version in run["versions"].items()],
        ["tfx_tabular", f"{run['code']} (copied at the start; every run used that copy)"],
    ]
    return ["## Machine and versions", "", markdown_table(["", ""], rows), "", *_method("machine")]


def _targets(report: Report) -> list[str]:
    titles = {view.section: view.title.split(":")[0].split(" (")[0] for view in layout.LAYOUTS}
    rows = [
        [titles[c.target.section], c.target.name, c.goal, c.measured, VERDICTS[c.met], c.target.why]
        for c in report.checked
    ]
    headers = ["Section", "Target", "Goal", "Measured", "Met?", "Why"]
    return ["## Targets", "", markdown_table(headers, rows, "llrrll"), ""]


def remeasured(run: dict) -> list[str]:
    """What later `--only ... --merge` runs measured again (their rows replaced the first run's),
    as paragraph lines: each run's sections, start, code, duration and contention."""
    lines = []
    for later in run.get("remeasured", []):
        contention = later["calibration"]["contention"]
        names = ", ".join(f"`{name}`" for name in later["sections"])
        lines += [
            _fill(
                f"Measured again by a later run (`--only ... --merge`) on {later['started_utc']}, "
                f"on {later['code']}, in {later['elapsed_seconds'] / 60:.1f} min (other "
                f"processes used {formats.share(contention['other'])} of the CPU): {names}. "
                "Their rows replace the first run's; figures compared within a section come "
                "from one run."
            ),
            "",
        ]
    return lines


def markdown(report: Report, png: str) -> str:
    command = report.run["command"]
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `make bench` (`python -m benchmarks.run --rows {command['rows']} "
        f"--stock-rows {command['stock_rows']} --repeats {command['repeats']}`) on "
        f"{report.run['started_utc']}; the whole run took "
        f"{report.run['elapsed_seconds'] / 60:.1f} min. Regenerate rather than edit.",
        "",
        *remeasured(report.run),
        *_machine(report),
        *_targets(report),
        f"![Benchmark plots]({os.path.basename(png)})",
        "",
    ]
    for view in layout.LAYOUTS:
        section = report.sections.get(view.section)
        if section is None:
            continue
        lines += [f"## {view.title}", "", *_method(view.section)]
        for table in view.tables:
            lines += _table(table, section)
        lines += _notes(section)
    return "\n".join(lines)


# --- the plot ----------------------------------------------------------------------------------


def _bars(panel: layout.Bars, section: results.Section, ax) -> None:
    shown = [(c.name, getattr(c, panel.metric)) for c in panel.rows(section)]
    y = list(range(len(shown)))[::-1]
    ax.barh(y, [value for _, value in shown], color="#3182bd")
    ax.set_yticks(y)
    ax.set_yticklabels([textwrap.fill(name, 40) for name, _ in shown], fontsize=6)
    for yi, (_, value) in zip(y, shown, strict=True):
        ax.text(value * 1.08, yi, f"{value:,.0f}" if value >= 100 else f"{value:.3g}", fontsize=6)
    ax.set_xscale("log")
    values = [value for _, value in shown]
    ax.set_xlim(min(values) / 2, max(values) * 4)  # room for the figures, and bars' lengths
    ax.set_xlabel(f"{panel.label} (log scale, median)")


def _lines(panel: layout.Lines, section: results.Section, ax) -> None:
    for label, select in panel.groups.items():
        points = [(c.rows, getattr(c, panel.metric)) for c in select(section)]
        ax.plot([x for x, _ in points], [y / 2**20 for _, y in points], "o-", label=label)
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("rows (log scale)")
    ax.set_ylabel(f"{panel.label}, MiB (median)")
    ax.legend(fontsize=7)


def plot(report: Report, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (panel, report.sections[view.section])
        for view in layout.LAYOUTS
        if view.section in report.sections
        for panel in view.panels
    ]
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4.6 * rows), squeeze=False)
    for ax, (panel, section) in zip(axes.flat, panels, strict=False):
        try:
            (_bars if isinstance(panel, layout.Bars) else _lines)(panel, section, ax)
        except UNMEASURABLE:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        ax.set_title(panel.title, fontsize=9)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(saved: dict, out: str) -> Report:
    """Write the Markdown report to `out` and the plot beside it (.png)."""
    report = build(saved)
    png = os.path.splitext(out)[0] + ".png"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    plot(report, png)
    with open(out, "w", encoding="utf-8") as handle:
        handle.write(markdown(report, png))
    return report


# --- README.md's performance table -------------------------------------------------------------


def _summary_row(summary: layout.Summary, section: results.Section) -> list[str]:
    ours = getattr(section[summary.ours], summary.metric)
    row = [summary.what, summary.format(ours), "", ""]
    if summary.baseline:
        names = summary.baseline if isinstance(summary.baseline, tuple) else (summary.baseline,)
        base = section.best(names, summary.metric)
        value = getattr(base, summary.metric)
        row[2] = f"{base.name}: {summary.format(value)}"
        row[3] = formats.ratio(value / ours if summary.lower_is_better else ours / value)
    return row


def _summary_rows(report: Report) -> list[list[str]]:
    rows = []
    for view in layout.LAYOUTS:
        for summary in view.summary:
            try:
                rows.append(_summary_row(summary, report.sections[view.section]))
            except (KeyError, *UNMEASURABLE):
                continue  # not measured in this run
    return rows


def readme_block(report: Report, link: str = "docs/benchmarks.md") -> str:
    """The text between the markers (a newline after START, one before END); `link` is the
    full report's, relative to the README."""
    run = report.run
    verdicts = [c.met for c in report.checked]
    intro = (
        f"Medians of {run['command']['repeats']} interleaved repeats on "
        f"{run['command']['rows']:,} Criteo-shaped rows, from one `make bench` run on "
        f"{run['started_utc']} ({run['machine']['nproc']} × {run['machine']['cpu']} vCPUs); "
        f"every figure, method and target: [{link}]({link})."
    )
    verdict = (
        f"Targets: {verdicts.count(True)} of {len(verdicts)} met, {verdicts.count(False)} not "
        f"met, {verdicts.count(None)} not measured: [{link}]({link}#targets)"
    )
    later = run.get("remeasured", [])
    if later:
        names = sorted({name for r in later for name in r["sections"]})
        intro = intro.replace(
            "; every figure",
            f", {', '.join(names)} measured again by {len(later)} later run(s); every figure",
        )
    table = markdown_table(["what", "ours", "baseline", "ratio"], _summary_rows(report))
    return "\n".join(["", NOTICE, "", _fill(intro), "", table, "", _fill(verdict + "."), ""])


def _fill(text: str) -> str:
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


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


def update_readme(readme: str, report: Report, link: str = "docs/benchmarks.md") -> bool:
    """Rewrite `readme`'s block from `report`; True if it changed."""
    with open(readme, encoding="utf-8") as handle:
        text = handle.read()
    new = replace_block(text, readme_block(report, link))
    if new == text:
        return False
    with open(readme, "w", encoding="utf-8") as handle:
        handle.write(new)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", nargs="?", default="docs/benchmarks.json")
    p.add_argument("--out", help="the Markdown report (default: beside the results, as .md)")
    p.add_argument(
        "--readme",
        nargs="?",
        const="README.md",
        help="instead of the report, rewrite this README's performance table (default "
        "README.md) between its bench markers, linking the report (--out or its default)",
    )
    args = p.parse_args(argv)
    out = args.out or os.path.splitext(args.results)[0] + ".md"
    saved = results.load(args.results)
    if args.readme:
        link = os.path.relpath(out, os.path.dirname(os.path.abspath(args.readme)))
        changed = update_readme(args.readme, build(saved), link)
        print(f"benchmarks: {'rewrote' if changed else 'left unchanged'} {args.readme}'s table")
        return 0
    write(saved, out)
    print(f"benchmarks: wrote {out} and its .png from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
