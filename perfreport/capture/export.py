"""CSV exports of a report through `ncu_report`, for when `ncu --import` cannot run (no ncu binary here, or it failed).

Same shapes as `ncu --import R --csv --page raw` (header, units row, one row per kernel; values in base units, as
`--print-units base` writes them) and `--page details --section SpeedOfLight` (long rows keyed by section and label),
so import_ncu reads them like ncu's own. `ncu_report` ships with ncu (extras/python) and on PyPI (`ncu-report`);
it is imported lazily, like everything heavy in perfreport.capture.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from perfreport.errors import InputError
from perfreport.files import write_text_atomic

FIXED = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Device", "CC")
SOL_SECTION = "SpeedOfLight"


def _actions(report: Path) -> list[Any]:
    try:
        import ncu_report
    except ImportError as exc:
        raise InputError(f"export of {report}: neither `ncu --import` nor the `ncu_report` module is available "
                         f"({exc}); add ncu's extras/python to PYTHONPATH or `pip install ncu-report`.") from exc
    try:
        ctx = ncu_report.load_report(str(report))
    except Exception as exc:  # ncu_report raises plain RuntimeError
        raise InputError(f"export of {report}: ncu_report cannot load it ({exc}).") from exc
    rng = [ctx.range_by_idx(r) for r in range(ctx.num_ranges())]
    acts = [r.action_by_idx(i) for r in rng for i in range(r.num_actions())]
    if not acts:
        raise InputError(f"export of {report}: the report holds no kernel (empty, truncated or not a report); "
                         f"`perftunereport capture diagnose {report}` says which.")
    return acts


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def _fixed(act: Any, index: int) -> list[str]:
    import ncu_report

    def attr(name: str) -> str:
        m = act.metric_by_name(name)
        return "" if m is None else _text(m.value())

    dims = [f"({', '.join(attr(f'launch__{k}_dim_{a}') for a in 'xyz')})" for k in ("block", "grid")]
    cc = f"{attr('device__attribute_compute_capability_major')}.{attr('device__attribute_compute_capability_minor')}"
    return [str(index), attr("launch__process_id"), "", "", act.name(ncu_report.IAction.NameBase_DEMANGLED),
            attr("launch__context_id"), attr("launch__stream_id"), dims[0], dims[1], attr("launch__device_id"), cc]


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue()


def raw_page(report: Path) -> str:
    """The raw page: every metric of every kernel as a column, in base units."""
    acts = _actions(report)
    names = sorted({n for a in acts for n in a.metric_names()})
    units = {}
    rows = []
    for i, act in enumerate(acts):
        row = _fixed(act, i)
        for name in names:
            m = act.metric_by_name(name)
            row.append("" if m is None or not m.has_value() else _text(m.value()))
            if m is not None and name not in units:
                units[name] = m.unit()
        rows.append(row)
    return _csv([[*FIXED, *names], [""] * len(FIXED) + [units.get(n, "") for n in names], *rows])


def sol_page(report: Path) -> str:
    """The SpeedOfLight section as a details page: one row per header metric, labelled as ncu labels it."""
    from perfreport.ncu.csv.details import details_labels, metric_key

    def label_for(section: str, metric: str, cc: str) -> str | None:
        labels = [lab for (sec, lab) in details_labels() if sec == section]
        return next((lab for lab in labels if metric_key(section, lab, cc) == metric), None)

    rows = []
    for i, act in enumerate(_actions(report)):
        fixed = _fixed(act, i)
        for section in act.sections():
            if section.identifier() != SOL_SECTION:
                continue
            for m in section.header_metrics():
                label = label_for(section.name(), m.name(), fixed[-1])
                if label is not None and m.has_value():
                    rows.append([*fixed, section.name(), label, m.unit(), _text(m.value())])
    header = [*FIXED, "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
    return _csv([header, *rows])


def export_report(report: Path, raw_csv: Path, sol_csv: Path) -> list[Path]:
    """Write both exports atomically; return the files written."""
    write_text_atomic(raw_csv, raw_page(report))
    write_text_atomic(sol_csv, sol_page(report))
    return [raw_csv, sol_csv]
