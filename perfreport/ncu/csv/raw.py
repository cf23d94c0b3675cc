"""Reader for the wide ``--page raw`` export: one row per kernel, one column per metric, a units row.

Speed matters (2,000 kernels x 2,240 columns is ~40 MB): each column's unit factor is resolved once
(convert.Column) and convert.convert_row converts a row; this module keeps the page's shape checks and the
messages for cells that are neither numbers nor missing. Clean exports are split by pandas (csv/fast.py) and
converted here too.
"""

from __future__ import annotations

from perfreport.errors import InputError
from perfreport.ncu.catalog.dimensions import metric_dimensions, unit_problem, value_problem
from perfreport.ncu.catalog.sets import infer_section_set
from perfreport.ncu.csv.common import CsvTable, new_launch, no_kernels
from perfreport.ncu.csv.convert import Column, convert, convert_row, scale
from perfreport.ncu.model import Capture, KernelLaunch

_GPU = "device__attribute_display_name"
_INF = float("inf")


def read_wide(table: CsvTable, only: frozenset[str] | None = None) -> Capture:
    """Turn a raw-page table into a Capture (values in base units, precision as absolute tolerance).

    With `only`, just those metric columns are converted (and checked); section-set inference still sees all.
    """
    rows, header = table.rows, table.header
    capture = Capture(
        source_path=str(table.path), source_format="csv-raw", sha256=table.sha256, ncu_version=None,
        gpu=None, section_set=None, sections=[], launches=[], warnings=list(table.warnings),
    )
    if not rows:
        raise no_kernels(table)
    start = table.first_metric
    names = header[start:]
    first = rows[0]
    fixed_idx = list(table.fixed.values()) + table.nvtx
    has_units = len(first) == len(header) and all(not first[i].strip() for i in fixed_idx)
    wanted = [(j, n) for j, n in enumerate(names) if only is None or n in only or n == _GPU]
    if has_units:
        columns = [Column(n, start + j, first[start + j].strip()) for j, n in wanted]
        _check_units(table, columns, first)
        _warn_unknown_units(capture, table, columns)
    else:
        columns = [Column(n, start + j, None) for j, n in wanted]
        capture.warnings.append(
            f"{table.where()}: no units row after the header; values are taken as printed and assumed to be "
            f"in base units (ns, byte, hz). Re-export with `ncu --import R --csv --page raw` to get units."
        )
    data_start = 1 if has_units else 0
    if data_start >= len(rows):
        raise no_kernels(table)
    seen_lists: list[str] = []
    dims = metric_dimensions()
    checked = [c for c in columns if c.name in dims]  # the values derivation reads: finite and >= 0
    units_template = {c.name: c.base or "" for c in columns} if has_units else {}
    by_id: dict[int, tuple[int, KernelLaunch]] = {}
    copies: list[tuple[int, int, str]] = []  # (line, line of the first, kernel) of rows written twice
    for k in range(data_start, len(rows)):
        row = rows[k]
        if len(row) != len(header):
            _raise_ragged(table, k, len(row))
        precision: dict[str, float] = {}
        launch = new_launch(table, row, k, precision)
        cells = row[start:] if only is None else [row[c.index] for c in columns]
        absent = _fill(table, k, launch, columns, cells, precision, seen_lists)
        _check_values(table, k, launch, checked, row)
        if has_units:
            units = dict(units_template)
            for name in absent:
                del units[name]
            launch.units = units
        rows[k] = []  # release the row's strings as we go: lowers peak memory on big exports
        if (earlier := by_id.get(launch.launch_id)) is not None:
            _check_copy(table, k, launch, *earlier)
            copies.append((table.row_lines[k], table.row_lines[earlier[0]], launch.name))
            continue
        by_id[launch.launch_id] = (k, launch)
        capture.launches.append(launch)
    if copies:
        capture.warnings.append(
            f"{table.path}: {len(copies)} row(s) repeat a launch ID already read, with the same values, and are "
            f"counted once: " + ", ".join(f"line {a} = line {b} ({name[:60]!r})" for a, b, name in copies[:3]) +
            (f" and {len(copies) - 3} more" if len(copies) > 3 else "") + ". Files concatenated or merged twice "
            "hold such copies; export the report again with ncu --csv --page raw.")
    if seen_lists:
        capture.warnings.append(
            f"{table.path}: {len(seen_lists)} column(s) hold per-instance value lists ('a; b; c'), e.g. "
            f"{', '.join(seen_lists[:3])}; they are kept as text, not numbers. Re-export with "
            f"--print-metric-instances none to get the aggregate values."
        )
    _provenance(capture, names)
    return capture


def _check_copy(table: CsvTable, k: int, launch: KernelLaunch, first_k: int, first: KernelLaunch) -> None:
    """A row repeating a launch ID must repeat its kernel and values (a copy): anything else is two launches under
    one ID, which no ncu export holds."""
    if launch.name == first.name and launch.metrics == first.metrics and launch.text == first.text:
        return
    what = "kernel" if launch.name != first.name else "values"
    raise InputError(
        f"{table.where(k)}: launch ID {launch.launch_id} again (first at line {table.row_lines[first_k]}) with "
        f"another {what}; expected each launch once (ncu numbers launches uniquely in a report). The file joins "
        f"two exports or was edited: export each report on its own with ncu --csv --page raw.")


def _fill(table: CsvTable, k: int, launch: KernelLaunch, columns: list[Column], cells: list[str],
          precision: dict[str, float], seen_lists: list[str]) -> list[str]:
    """Convert one row's metric cells into launch.metrics/precision/text; return the names with no value."""
    def other(col: Column, s: str) -> bool:
        return _cell(table, k, launch, col, s, precision, seen_lists)

    return convert_row(columns, cells, launch.metrics, precision, other)


def _cell(table: CsvTable, k: int, launch: KernelLaunch, col: Column, s: str, precision: dict[str, float],
          seen_lists: list[str]) -> bool:
    """Convert a cell that is neither a plain decimal nor missing (text, instanced list, exponent); reject garbage.

    Return False when the cell holds no value.
    """
    t = s.strip()
    try:
        converted = convert(t, col.factor)
    except ValueError:
        if ";" in t:  # old exports print instanced metrics inline: "32.00; 32.00; 0.00"
            if col.name not in seen_lists:
                seen_lists.append(col.name)
        elif col.required:
            shown = t if len(t) <= 60 else t[:57] + "..."
            raise InputError(
                f"{table.where(k)}: column {col.index + 1} {col.name!r} (unit {col.unit!r}) holds {shown!r}, "
                f"expected a number such as 1.23 or 1,234 (or empty / n/a for no value). The row is damaged "
                f"or was edited; re-export it with ncu --csv."
            ) from None
        launch.text[col.name] = t
        return True
    if converted is None:
        return False
    launch.metrics[col.name], precision[col.name] = converted
    return True


def _check_units(table: CsvTable, columns: list[Column], units: list[str]) -> None:
    """Refuse a units row that gives a metric derivation reads a unit outside its dimension (or an unknown one)."""
    for col in columns:
        printed = units[col.index].strip()
        _, base, known = scale(printed)
        problem = unit_problem(col.name, printed, base if known else None)
        if problem:
            raise InputError(f"{table.where(0)}: column {col.index + 1}: {problem}.")


def _check_values(table: CsvTable, k: int, launch: KernelLaunch, checked: list[Column], row: list[str]) -> None:
    """Refuse a row whose value of a metric derivation reads is not finite or is negative (inf, 1e400, -5)."""
    metrics = launch.metrics
    for col in checked:
        v = metrics.get(col.name)
        if v is not None and not 0.0 <= v < _INF:
            shown = row[col.index].strip()
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            problem = value_problem(col.name, v, f"{shown} {col.unit}" if col.unit else shown)
            raise InputError(f"{table.where(k)}: column {col.index + 1}: {problem}.")


def _warn_unknown_units(capture: Capture, table: CsvTable, columns: list[Column]) -> None:
    unknown: dict[str, str] = {}
    for col in columns:
        u = col.base or ""
        if u and not scale(u)[2] and u not in unknown:
            unknown[u] = col.name
    for u, name in unknown.items():
        capture.warnings.append(
            f"{table.where()}: unknown unit {u!r} (first in column {name!r}); values kept as printed with "
            f"that unit, not converted to a base unit."
        )


def _raise_ragged(table: CsvTable, k: int, got: int) -> None:
    expected = len(table.header)
    hint = ("The file looks truncated (cut mid-row)" if k == len(table.rows) - 1 and got < expected
            else "The row was damaged or the file mixes exports")
    raise InputError(
        f"{table.where(k)}: row has {got} fields, expected {expected} (one per header column). "
        f"{hint}; re-export it with `ncu --import R.ncu-rep --csv --page raw > R-raw.csv`."
    )


def _provenance(capture: Capture, names: list[str]) -> None:
    gpus = sorted({g for la in capture.launches if (g := la.text.get(_GPU))})
    capture.gpu = ", ".join(gpus) if gpus else None
    capture.section_set = infer_section_set(metrics=names)
