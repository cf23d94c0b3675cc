"""Reader for the long ``--page details`` export: one row per (kernel, section, label) plus rule rows.

Rows are keyed by section *label* (``Duration``), auto-scaled and rounded for display (``1.23`` ms). Labels map
to raw metric names through ``details_labels.yaml`` so the tidy model has one vocabulary; unmapped labels are
kept as ``details::<Section>::<Label>``. Each value's rounding is kept as an absolute tolerance in ``precision``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import yaml

from perfreport.errors import InputError
from perfreport.ncu.catalog.dimensions import unit_problem, value_problem
from perfreport.ncu.catalog.sets import display_name, infer_section_set
from perfreport.ncu.csv.common import LONG_COLUMNS, RULE_COLUMNS, CsvTable, new_launch, no_kernels
from perfreport.ncu.csv.convert import convert, scale
from perfreport.ncu.model import Capture, KernelLaunch, Rule
from perfreport.yamlio import SAFE_LOADER

COMMAND_LINE_SECTION = "Command line profiler metrics"
_RAW_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*__[A-Za-z0-9_.]+")
_LABEL_NAME_RE = re.compile(r".*\(([A-Za-z][A-Za-z0-9_]*__[A-Za-z0-9_.]+)\)")

@dataclass
class _Option:
    metric: str
    cc: list[tuple[float, float]] = field(default_factory=list)  # empty: any CC

    def matches(self, cc: float | None) -> bool:
        if not self.cc:
            return True
        return cc is not None and any(lo <= cc <= hi for lo, hi in self.cc)


@lru_cache(maxsize=1)
def details_labels() -> dict[tuple[str, str], list[_Option]]:
    """Load details_labels.yaml: (section display name, label) -> metric options in priority order."""
    text = resources.files("perfreport.ncu.catalog").joinpath("details_labels.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=SAFE_LOADER)
    out: dict[tuple[str, str], list[_Option]] = {}
    for section, labels in data.items():
        for label, spec in labels.items():
            if isinstance(spec, str):
                out[(section, str(label))] = [_Option(spec)]
            else:
                out[(section, str(label))] = [_Option(o["metric"], [_cc_range(c) for c in o.get("cc", [])])
                                              for o in spec]
    return out


def _cc_range(text: str) -> tuple[float, float]:
    lo, sep, hi = str(text).partition("-")
    if not sep:
        return float(lo), float(lo)
    return (float(lo) if lo else 0.0), (float(hi) if hi else 1e9)


@lru_cache(maxsize=16384)
def metric_key(section: str, label: str, cc: str) -> str:
    """Return the raw metric name for a details row, or ``details::<section>::<label>`` when unmapped."""
    if section == COMMAND_LINE_SECTION or _RAW_NAME_RE.fullmatch(label):
        return label  # `--metrics` captures and `--print-metric-name name` print raw names
    m = _LABEL_NAME_RE.fullmatch(label)
    if m:
        return m.group(1)
    options = details_labels().get((section, label))
    if options:
        try:
            cc_value: float | None = float(cc)
        except ValueError:
            cc_value = None
        for option in options:
            if option.matches(cc_value):
                return option.metric
    return f"details::{section}::{label}"


class _Reader:
    """State for one details table: launches by ID, warnings issued once."""

    def __init__(self, table: CsvTable, only: frozenset[str] | None = None) -> None:
        self.table = table
        self.only = only
        self.keys: dict[tuple[str, str, str], str] = {}  # (section, label, cc) -> metric key
        h = table.header
        missing = [c for c in LONG_COLUMNS if c not in h]
        if missing:
            raise InputError(f"{table.where()}: details-page header lacks {missing}; expected the columns "
                             f"{list(LONG_COLUMNS)} after the kernel columns. Re-export with ncu --csv.")
        self.col = {c: h.index(c) for c in LONG_COLUMNS}
        self.rule_col = {c: h.index(c) for c in RULE_COLUMNS if c in h}
        self.launches: dict[str, tuple[KernelLaunch, dict[str, float]]] = {}  # ID -> launch, precision
        self.sections: list[str] = []
        self.warned: set[str] = set()
        self.warnings: list[str] = list(table.warnings)

    def warn_once(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            self.warnings.append(message)

    def section_seen(self, name: str) -> None:
        if name and name not in self.sections:
            self.sections.append(name)

    def row(self, k: int, row: list[str]) -> None:
        table, col = self.table, self.col
        if len(row) > len(table.header):
            raise InputError(f"{table.where(k)}: row has {len(row)} fields, expected at most "
                             f"{len(table.header)} (the header's columns). Re-export the file with ncu --csv.")
        if len(row) <= col["Metric Value"]:
            raise InputError(
                f"{table.where(k)}: row has {len(row)} fields, expected at least {col['Metric Value'] + 1} "
                f"(up to 'Metric Value'). The file looks truncated (cut mid-row); export it again.")
        launch, precision = self.launch_for(k, row)
        section = row[col["Section Name"]]
        rule_name = self.cell(row, "Rule Name")
        if rule_name:
            launch.rules.append(Rule(section, rule_name, self.cell(row, "Rule Type"),
                                     self.cell(row, "Rule Description"), self.cell(row, "Estimated Speedup Type"),
                                     self.cell(row, "Estimated Speedup")))
            self.section_seen(display_name(section))
            return
        label = row[col["Metric Name"]].strip()
        if not label:
            return  # sections may declare an unnamed header metric (Occupancy, CC >= 9.0)
        self.section_seen(section)
        self.value(k, launch, precision, (section, label), row[col["Metric Unit"]].strip(),
                   row[col["Metric Value"]])

    def cell(self, row: list[str], name: str) -> str:
        i = self.rule_col.get(name)
        return row[i] if i is not None and i < len(row) else ""

    def launch_for(self, k: int, row: list[str]) -> tuple[KernelLaunch, dict[str, float]]:
        key = row[self.table.fixed["ID"]] if "ID" in self.table.fixed else ""
        entry = self.launches.get(key)
        if entry is None:
            precision: dict[str, float] = {}
            entry = (new_launch(self.table, row, k, precision), precision)
            self.launches[key] = entry
        return entry

    def value(self, k: int, launch: KernelLaunch, precision: dict[str, float], where: tuple[str, str],
              unit: str, text: str) -> None:
        section, label = where
        key = self.keys.get((section, label, launch.cc))
        if key is None:
            key = self.keys[(section, label, launch.cc)] = metric_key(section, label, launch.cc)
        if self.only is not None and key not in self.only:
            return
        factor, base, known = scale(unit)
        problem = unit_problem(key, unit, base if known else None)
        if problem:
            raise InputError(f"{self.table.where(k)}: {section!r} / {label!r}: {problem}.")
        if not known:
            self.warn_once(f"unit:{unit}", f"{self.table.where(k)}: unknown unit {unit!r} (first at "
                                           f"{section!r} / {label!r}); values kept as printed with that unit.")
        try:
            converted = convert(text, factor)
        except ValueError:
            if unit:
                raise InputError(
                    f"{self.table.where(k)}: {section!r} / {label!r} (unit {unit!r}) has value {text.strip()!r}, "
                    f"expected a number such as 1.23 or 1,234. The row is damaged or was edited; re-export "
                    f"it with ncu --csv.") from None
            launch.text.setdefault(key, text.strip())
            launch.units.setdefault(key, base)
            return
        if converted is None:
            return
        value, tolerance = converted
        if value_problem(key, value):
            shown = text.strip() if len(text.strip()) <= 40 else text.strip()[:37] + "..."
            problem = value_problem(key, value, f"{shown} {unit}" if unit else shown)
            raise InputError(f"{self.table.where(k)}: {section!r} / {label!r}: {problem}.")
        if key in launch.metrics:
            self.merge(launch, precision, key, value, tolerance, section, label)
            return
        launch.metrics[key] = value
        launch.units[key] = base
        precision[key] = tolerance

    def merge(self, launch: KernelLaunch, precision: dict[str, float], key: str, value: float,
              tolerance: float, section: str, label: str) -> None:
        """Two rows for one metric (a label repeated, or two sections showing one metric): keep the finer."""
        old, old_tol = launch.metrics[key], precision.get(key, 0.0)
        if abs(old - value) > old_tol + tolerance + 1e-9 * max(abs(old), abs(value)):
            self.warn_once(f"dup:{section}:{label}", (
                f"{self.table.path}: kernel {launch.launch_id}: {section!r} / {label!r} gives {value} for "
                f"{key!r}, which already holds {old}; kept the more precise value. Export with "
                f"--print-metric-name name to get unambiguous raw metric names."))
        if tolerance < old_tol:
            launch.metrics[key] = value
            precision[key] = tolerance


def read_long(table: CsvTable, only: frozenset[str] | None = None) -> Capture:
    """Turn a details-page table into a Capture (rows pivoted per kernel, labels mapped to raw names).

    With `only`, just the rows that map to those raw metric names are converted (and checked).
    """
    reader = _Reader(table, only)
    for k, row in enumerate(table.rows):
        reader.row(k, row)
    launches = [launch for launch, _ in reader.launches.values()]
    if not launches:
        raise no_kernels(table)
    return Capture(
        source_path=str(table.path), source_format="csv-details", sha256=table.sha256, ncu_version=None,
        gpu=None, section_set=infer_section_set(displayed=reader.sections), sections=reader.sections,
        launches=launches, warnings=reader.warnings,
    )
