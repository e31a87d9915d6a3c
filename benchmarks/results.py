"""The results file: tidy rows, one per (section, configuration, metric), holding every repeat.

    {"run": {machine, versions, command, calibration, ..., remeasured: [...]},
     "rows": [{"section", "configuration", "metric", "samples": [number or text, ...]}, ...]}

Sections record rows with a `Recorder`; the report reads them back as `Section` views, whose
configurations give each metric's median (`section["ours, none"].seconds`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from typing import Iterable


class Missing(LookupError):
    """A configuration or metric the results do not hold (a figure that was not measured)."""


class Recorder:
    """Collects one section's rows: every number or text of a sample dict becomes a sample of
    the metric of that name; other values (lists, dicts, flags) are left out."""

    def __init__(self, section: str):
        self.section = section
        self._samples: dict[tuple[str, str], list] = {}

    def add(self, configuration: str, sample: dict) -> None:
        for metric, value in sample.items():
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                self._samples.setdefault((configuration, metric), []).append(value)

    def rows(self) -> list[dict]:
        return [
            {"section": self.section, "configuration": c, "metric": m, "samples": s}
            for (c, m), s in self._samples.items()
        ]


def with_rate(sample: dict, count: str = "rows", name: str = "rows_per_second") -> dict:
    """`sample` plus its rate: `count` ÷ its seconds."""
    return {**sample, name: sample[count] / sample["seconds"]}


def save(results: dict, path: str) -> None:
    """`results` as JSON, one row a line (diffs between runs read row by row)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    rows = ",\n".join(json.dumps(row, ensure_ascii=False) for row in results["rows"])
    with open(path, "w") as handle:
        handle.write('{"run": ' + json.dumps(results["run"], ensure_ascii=False))
        handle.write(',\n"rows": [\n' + rows + "\n]}\n")


def merged(earlier: dict, again: dict, sections: Iterable[str]) -> dict:
    """`earlier` results with `sections`' rows replaced by those measured `again`; the run keeps
    the earlier one's facts and lists, under "remeasured", each later run's sections, start,
    code, calibration and duration."""
    sections = sorted(set(sections))
    run = dict(earlier["run"])
    later = {key: again["run"][key] for key in ("started_utc", "code", "calibration")}
    later.update(sections=sections, elapsed_seconds=again["run"]["elapsed_seconds"])
    before = [
        {**r, "sections": [name for name in r["sections"] if name not in sections]}
        for r in run.get("remeasured", [])
    ]
    run["remeasured"] = [r for r in before if r["sections"]] + [later]
    kept = [row for row in earlier["rows"] if row["section"] not in sections]
    return {"run": run, "rows": kept + again["rows"]}


def load(path: str) -> dict:
    with open(path) as handle:
        return json.load(handle)


def _lookup(mapping: dict, key: str, owner: str):
    if key not in mapping:
        raise Missing(f"{owner}: no {key!r}")
    return mapping[key]


@dataclasses.dataclass
class Configuration:
    """One configuration's metrics: an attribute is its median, `samples` its repeats."""

    name: str
    metrics: dict[str, list]

    def samples(self, metric: str) -> list:
        return _lookup(self.metrics, metric, self.name)

    def __getattr__(self, metric: str) -> float:
        if metric.startswith("__") or metric in ("name", "metrics"):
            raise AttributeError(metric)
        return statistics.median(self.samples(metric))

    def range(self, metric: str) -> tuple[float, float]:
        values = self.samples(metric)
        return min(values), max(values)

    def spread(self, metric: str) -> float:
        """(max - min) / median: how noisy the repeats were."""
        low, high = self.range(metric)
        middle = getattr(self, metric)
        return (high - low) / middle if middle else 0.0


@dataclasses.dataclass
class Section:
    """One section's configurations, in the order they were recorded."""

    name: str
    configurations: dict[str, Configuration]

    def __getitem__(self, name: str) -> Configuration:
        return _lookup(self.configurations, name, self.name)

    def __contains__(self, name: str) -> bool:
        return name in self.configurations

    def starting(self, prefix: str) -> list[Configuration]:
        return [c for n, c in self.configurations.items() if n.startswith(prefix)]

    def find(self, prefix: str, rows: float) -> Configuration:
        """The configuration named `prefix`… that converted `rows` rows."""
        for c in self.starting(prefix):
            if "rows" in c.metrics and c.rows == rows:
                return c
        raise Missing(f"{self.name}: no {prefix!r} on {rows:,} rows")

    def best(self, names: Iterable[str], metric: str = "rows_per_second") -> Configuration:
        """Of `names`, the configuration with the highest median `metric`."""
        return max((self[n] for n in names), key=lambda c: getattr(c, metric))

    def derive(self, name: str, **metrics: float) -> None:
        """Add a configuration of figures computed from the others (one sample each)."""
        self.configurations[name] = Configuration(name, {m: [v] for m, v in metrics.items()})


def sections(rows: list[dict]) -> dict[str, Section]:
    """The rows grouped into sections, in the order they were recorded."""
    grouped: dict[str, dict[str, dict[str, list]]] = {}
    for row in rows:
        configurations = grouped.setdefault(row["section"], {})
        configurations.setdefault(row["configuration"], {})[row["metric"]] = row["samples"]
    return {
        name: Section(name, {c: Configuration(c, m) for c, m in configurations.items()})
        for name, configurations in grouped.items()
    }
