"""The hand-written docs describe what the package does today: no dated run logs, a short README,
and links that lead somewhere.

Hand-written: README.md outside its generated performance block, docs/*.md except the generated
docs/benchmarks.md, and docs/decisions/*.md (a record may carry its date on a `Date:` line).
Measured figures belong in docs/benchmarks.md, which `make bench` writes; a page links to its
sections instead of copying numbers with the day they were taken.
"""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
GENERATED_PAGES = {DOCS / "benchmarks.md"}
GENERATED_BLOCK = re.compile(r"<!-- bench:start -->.*?<!-- bench:end -->", re.S)
README_MAX_LINES = 150

MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
# Each names what a dated run log looks like; the prose a reader reads must match none.
RUN_LOG_PATTERNS = {
    "an ISO date": re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"),
    "a clock time": re.compile(r"\b(?:[01]\d|2[0-3]):[0-5]\d\b"),
    "a day of a month": re.compile(
        rf"\b{MONTH} \d{{1,2}}\b|\b\d{{1,2}} {MONTH}\b|\b{MONTH} \d{{4}}\b"
    ),
    "a session of work": re.compile(
        r"\b(?:this|that|the) (?:session|evening|morning|afternoon|night)\b"
        r"|\b(?:yesterday|tonight|today)\b",
        re.I,
    ),
    "a make bench run": re.compile(
        r"\b(?:one|this|that|last|latest|previous|earlier|next) `?make bench`?"
        r"|`?make bench`? runs? (?:on|at)\b",
        re.I,
    ),
    "a history of runs": re.compile(
        r"\bin (?:the|an) (?:earlier|previous|last|next) runs?\b"
        r"|\b(?:earlier|previous) runs\b|\bthe runs? before\b",
        re.I,
    ),
}
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
DATE_LINE = re.compile(r"^\s*\**Date:?\**:?\s")


def hand_written_pages() -> list:
    pages = [README]
    pages += [p for p in sorted(DOCS.glob("*.md")) if p not in GENERATED_PAGES]
    pages += sorted((DOCS / "decisions").glob("*.md"))
    return pages


def all_pages() -> list:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _prose_lines(text: str) -> list:
    """(line number, line, line with inline code blanked) for each line outside fenced code
    blocks: a date inside code is data (`day=2024-01-01`), not a log."""
    lines, in_fence = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            lines.append((number, line, INLINE_CODE.sub(_blank_code, line)))
    return lines


def _blank_code(code: re.Match) -> str:
    """Inline code blanked, but for `make bench`, whose runs a log would name."""
    return code.group(0) if code.group(0) == "`make bench`" else "``"


def _hand_written_text(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path == README:
        # The generated block is blanked line for line, so line numbers stay true.
        text = GENERATED_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return text


def _where(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def run_log_findings(path: Path, root: Path = REPO) -> list:
    """Each dated run log in a hand-written page: 'page:line: what (the text)'."""
    findings = []
    for number, _, prose in _prose_lines(_hand_written_text(path)):
        if path.parent.name == "decisions" and DATE_LINE.match(prose):
            continue
        for what, pattern in RUN_LOG_PATTERNS.items():
            for match in pattern.finditer(prose):
                findings.append(f"{_where(path, root)}:{number}: {what} ({match.group(0)!r})")
    return findings


def heading_anchors(path: Path) -> set:
    """The anchors GitHub gives a page's headings: lower case, punctuation but `-` and `_`
    dropped, spaces as hyphens, a repeated anchor numbered."""
    anchors, seen = set(), {}
    for _, line, _ in _prose_lines(path.read_text(encoding="utf-8")):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))  # a link: its text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def broken_links(path: Path, root: Path = REPO) -> list:
    """Each relative link of `path` whose file, or heading anchor in a Markdown file, is missing."""
    broken = []
    for number, line, _ in _prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{_where(path, root)}:{number}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                broken.append(f"{where} (no such heading)")
    return broken


def test_hand_written_docs_carry_no_dated_run_logs():
    """What was measured when belongs in docs/benchmarks.md (generated) or a decision record;
    a page says what the package does and links to the figures."""
    findings = [f for page in hand_written_pages() for f in run_log_findings(page)]
    assert not findings, "dated run logs in hand-written docs:\n" + "\n".join(findings)


def test_the_readme_stays_short_and_starts_with_the_demo_and_the_suite():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    commands = [line.split("#")[0].strip() for line in lines if line.startswith("make ")]
    assert commands[:2] == ["make demo", "make test"]


def test_every_relative_link_leads_to_a_file_and_heading():
    broken = [b for page in all_pages() for b in broken_links(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)


# The checks themselves: each must catch what it is for.


@pytest.mark.parametrize(
    "line",
    [
        "From one `make bench` run on 2026-11-28: 294,538 rows/s.",
        "+20.3% and +15.4% at 02:37, before short strings were copied.",
        "measured on 25 November on 2 cores",
        "by hand this session: ~-30 MiB",
        "From the last `make bench` (2 AMD EPYC cores): 277,881 rows/s",
        "`make bench` runs on a busy machine gave 1.3x",
        "2.45x and 783k in the runs before",
        "+30%, +46% and +58% in earlier runs",
    ],
)
def test_a_dated_run_log_is_found(tmp_path, line):
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text(f"# Page\n\n{line}\n", encoding="utf-8")
    assert run_log_findings(page, tmp_path)


@pytest.mark.parametrize(
    "line",
    [
        "Partition folders such as `day=2024-01-01` become features.",
        "The conversion runs before the pipeline starts; see the last section.",
        "The next run on the same host removes the folder the last run left.",
        "A record can carry its date.",
        "A `make bench` run rewrites docs/benchmarks.md and the README's table.",
    ],
)
def test_current_behaviour_is_not_mistaken_for_a_run_log(tmp_path, line):
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text(f"# Page\n\n{line}\n\n```\nday=2024-01-01 at 03:13\n```\n", encoding="utf-8")
    assert not run_log_findings(page, tmp_path)


def test_a_decision_record_may_carry_its_date_on_a_date_line_only(tmp_path):
    record = tmp_path / "docs" / "decisions" / "0002-x.md"
    record.parent.mkdir(parents=True)
    record.write_text("# X\n\nDate: 2026-11-28\n\nMeasured 2026-11-27.\n", encoding="utf-8")
    assert run_log_findings(record, tmp_path) == [
        "docs/decisions/0002-x.md:5: an ISO date ('2026-11-27')"
    ]


def test_a_broken_link_or_anchor_is_found(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A page\n\n## The `input_fn`: reading\n", encoding="utf-8")
    page = docs / "b.md"
    page.write_text(
        "# B\n\n[ok](a.md#the-input_fn-reading) [ok](#b) [web](https://example.com/x.md)\n"
        "[gone](missing.md) [no heading](a.md#nowhere)\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "docs/b.md:4: missing.md (no such file)",
        "docs/b.md:4: a.md#nowhere (no such heading)",
    ]
