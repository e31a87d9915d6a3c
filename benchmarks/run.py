"""`make bench`: measure the benchmark sections, save their rows as JSON, then render them into
docs/benchmarks.md, docs/benchmarks.png and README.md's performance table.

    python -m benchmarks.run --rows 1000000 [--stock-rows 20000] [--repeats 3]
    python -m benchmarks.run --rows 20000 --repeats 1 --out /tmp/smoke/benchmarks.md --readme ''

Each section is a module with `run(ctx) -> list[dict]`, its tidy rows (`results.py`), saved as
`<workdir>/results/<section>.json`; all of them, under the machine facts, go to one results file
beside the report (docs/benchmarks.json), which `python -m benchmarks.report` re-renders without
measuring (`--readme` for README.md's table). Add a section to SECTIONS here, its tables to
`layout.py`, its method to `method/<section>.md` and its targets to `targets.py`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from benchmarks import (
    data_service,
    example_statistics,
    examplegen,
    harness,
    input_pipeline,
    memory_cap,
    peers,
    portable_runner,
    report,
    results,
    schema_inference,
    wide_table,
)

SECTIONS = {
    "examplegen": examplegen.run,
    "example_statistics": example_statistics.run,
    "schema_inference": schema_inference.run,
    "input_pipeline": input_pipeline.run,
    "peers": peers.run,
    "data_service": data_service.run,
    "memory_cap": memory_cap.run,
    "portable_runner": portable_runner.run,
    "wide_table": wide_table.run,
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the main dataset")
    p.add_argument(
        "--out",
        default="docs/benchmarks.md",
        help="the Markdown report; the plot (.png) and the results (.json) go beside it",
    )
    p.add_argument(
        "--workdir",
        default="benchmarks/.cache",
        help="datasets (kept and reused), outputs, logs and per-section results",
    )
    p.add_argument(
        "--stock-rows",
        type=int,
        default=20_000,
        help="rows for stock TFX ExampleGen (a subset of the same files)",
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="runs per configuration; medians reported"
    )
    p.add_argument(
        "--readme",
        default="README.md",
        help="the README whose performance table (between its bench markers) the run rewrites; "
        "'' for none. Runs with --only leave it alone",
    )
    p.add_argument(
        "--only",
        action="append",
        choices=list(SECTIONS),
        help="measure only this section (repeatable); for trying a section, with another --out",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="with --only: replace those sections' rows in the existing results (--out's .json) "
        "and re-render the report and README from them; the report says which sections were "
        "measured again, when and on which code",
    )
    args = p.parse_args(argv)
    if args.merge and not args.only:
        p.error("--merge needs --only: the sections to measure again")
    if args.rows < 1000 or args.stock_rows < 100 or args.repeats < 1:
        p.error("--rows must be ≥ 1000, --stock-rows ≥ 100 and --repeats ≥ 1")
    return args


def measure(ctx: harness.Context, machine: dict, only=None) -> tuple[dict, list[dict]]:
    """Every section between two calibrations: the calibration and the sections' rows."""
    cpu_start = harness.cpu_snapshot()
    scaling = [harness.core_scaling()]
    print(
        f"  calibration: 2 processes ran {scaling[0]['speedup']:.2f}x as fast as 1 "
        "(pure-Python loop; 2.00x = two full cores)",
        flush=True,
    )
    rows = []
    for name, section in SECTIONS.items():
        if only and name not in only:
            continue
        section_rows = section(ctx)
        results.save({"run": {}, "rows": section_rows}, ctx.path("results", f"{name}.json"))
        rows += section_rows
    scaling.append(harness.core_scaling())
    print(f"  calibration at end: {scaling[1]['speedup']:.2f}x", flush=True)
    contention = harness.cpu_contention(cpu_start, harness.cpu_snapshot(), machine["nproc"])
    print(
        f"  other processes used {contention['other']:.0%} of the machine's CPU during the run "
        f"(benchmark {contention['own']:.0%}, steal {contention['steal']:.0%})",
        flush=True,
    )
    return {"scaling": scaling, "contention": contention}, rows


def _earlier_results(path: str, command: dict) -> dict:
    """The results a --merge run adds to: measured on the same data, with the same repeats."""
    try:
        earlier = results.load(path)
    except (OSError, ValueError) as e:
        raise SystemExit(f"benchmarks: --merge needs the earlier results {path}: {e}") from None
    if earlier["run"]["command"] != command:
        raise SystemExit(
            f"benchmarks: --merge: {path} was measured with {earlier['run']['command']}, not "
            f"{command}: measure every section again instead"
        )
    return earlier


def main(argv=None) -> int:
    args = parse_args(argv)
    os.chdir(harness.REPO)
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    code = harness.snapshot_code(workdir)
    sys.path.insert(0, code)  # the parent's own tfx_tabular imports (datasets) use it too
    digest = harness.code_digest(code)
    ctx = harness.Context(
        rows=args.rows,
        stock_rows=args.stock_rows,
        repeats=args.repeats,
        workdir=workdir,
        out=args.out,
        code=code,
    )
    machine = harness.machine()
    run = {
        "command": {"rows": args.rows, "stock_rows": args.stock_rows, "repeats": args.repeats},
        "started_utc": harness.now_utc(),
        "machine": machine,
        "versions": harness.versions(),
        "code": f"git {harness.git_revision()}, code sha256 {digest[:12]}",
    }
    start = time.perf_counter()
    print(
        f"benchmarks: {args.rows:,} rows, stock on {min(args.stock_rows, args.rows):,}, "
        f"{args.repeats} repeat(s); {machine['nproc']} × {machine['cpu']}; workdir {workdir}",
        flush=True,
    )
    results_path = os.path.splitext(args.out)[0] + ".json"
    earlier = _earlier_results(results_path, run["command"]) if args.merge else None
    run["calibration"], rows = measure(ctx, machine, args.only)
    run["elapsed_seconds"] = elapsed = time.perf_counter() - start
    saved = {"run": run, "rows": rows}
    if earlier is not None:
        saved = results.merged(earlier, saved, args.only)
    results.save(saved, results_path)
    rendered = report.write(results.load(results_path), args.out)  # as a re-render would see it
    # A partial run without --merge would drop the other sections' rows from the table.
    readme = args.readme and (not args.only or args.merge)
    if readme:
        link = os.path.relpath(args.out, os.path.dirname(os.path.abspath(args.readme)))
        try:
            report.update_readme(args.readme, rendered, link)
        except (OSError, ValueError) as e:  # the results are saved: report, do not lose them
            print(f"  note: {args.readme}'s performance table not rewritten: {e}", flush=True)
            readme = False
    changed = harness.code_digest(harness.REPO) != digest
    shutil.rmtree(code, ignore_errors=True)
    print(
        f"benchmarks: wrote {results_path}, then {args.out} and its .png"
        + (f" and {args.readme}'s performance table" if readme else "")
        + f", measuring for {elapsed / 60:.1f} min",
        flush=True,
    )
    if changed:
        print(
            "  note: tfx_tabular/ or benchmarks/ changed in the working tree during the run; "
            f"the report measures the snapshot taken at the start ({digest[:12]})",
            flush=True,
        )
    for checked in rendered.checked:
        state = {True: "met", False: "NOT met", None: "not measured"}[checked.met]
        print(f"  {state:>12}: {checked.target.name}: {checked.measured} (goal {checked.goal})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
