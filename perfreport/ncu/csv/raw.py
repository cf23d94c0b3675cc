"""Reader for the wide ``--page raw`` export: one row per kernel, one column per metric, a units row.

Speed matters (2,000 kernels x 2,240 columns is ~40 MB): each column's unit factor is resolved once, and a
plain or thousands-grouped decimal takes a fast path (one ``str.strip`` check, then ``float``) before the
general parser, and its result is remembered per column (values repeat across kernels). Column-at-a-time
variants (joined-column regex + ``map``; numpy string ufuncs) measured slower. Clean exports are split by
pandas (csv_fast) and converted here too.
"""

from __future__ import annotations

import math
import re

from perfreport.errors import InputError
from perfreport.ncu.catalog.units import MISSING_TOKENS, decimals, half_ulp, parse_number, rescale, unit_scale
from perfreport.ncu.csv.common import CsvTable, new_launch, no_kernels
from perfreport.ncu.model import Capture, KernelLaunch

_MAX_PLACES = 64
_MEMO_MAX = 64  # plain numbers remembered per column (bounded: 2,240 columns without `only`); repeats convert once
_HALF = [half_ulp(d) for d in range(_MAX_PLACES)]
_PLAIN_CHARS = "0123456789.-"
_GROUPED = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", re.ASCII).fullmatch  # "1,116,691,496,960"

# Marker metrics per section, for inferring the --set of a raw page (ncu 2025.3.1 set contents).
_LAUNCH = "launch__registers_per_thread"
_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
_SOL = "gpu__time_duration.sum"
_WARP_STATE = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
_COMPUTE = "sm__inst_executed.avg.per_cycle_active"
_SOURCE = "smsp__sass_average_branch_targets_threads_uniform.pct"
_HIER_ROOFLINE = "derived__lts__lts2xbar_bytes.sum.per_second"
_GPU = "device__attribute_display_name"
_ROOFLINE = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"


class _Column:
    """How to read one metric column: its unit factor and whether a value must be numeric."""

    __slots__ = ("name", "index", "factor", "exp", "base", "required", "memo")

    def __init__(self, name: str, index: int, unit: str | None) -> None:
        self.name = name
        self.index = index
        scaled = unit_scale(unit) if unit is not None else None
        self.factor, self.base = scaled if scaled is not None else (1.0, unit)
        self.exp = round(math.log10(self.factor)) if self.factor > 0 else 0
        # A column with a unit holds numbers; a unitless one may hold text (device name, policy).
        self.required = bool(unit)
        self.memo: dict[str, tuple[float, float]] = {}  # cell text -> (value, precision) of a plain number


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
        columns = [_Column(n, start + j, first[start + j].strip()) for j, n in wanted]
        _warn_unknown_units(capture, table, columns)
    else:
        columns = [_Column(n, start + j, None) for j, n in wanted]
        capture.warnings.append(
            f"{table.where()}: no units row after the header; values are taken as printed and assumed to be "
            f"in base units (ns, byte, hz). Re-export with `ncu --import R --csv --page raw` to get units."
        )
    data_start = 1 if has_units else 0
    if data_start >= len(rows):
        raise no_kernels(table)
    seen_lists: list[str] = []
    units_template = {c.name: c.base or "" for c in columns} if has_units else {}
    for k in range(data_start, len(rows)):
        row = rows[k]
        if len(row) != len(header):
            _raise_ragged(table, k, len(row))
        precision: dict[str, float] = {}
        launch = new_launch(table, row, k, precision)
        cells = row[start:] if only is None else [row[c.index] for c in columns]
        absent = _fill(table, k, launch, columns, cells, precision, seen_lists)
        if has_units:
            units = dict(units_template)
            for name in absent:
                del units[name]
            launch.units = units
        capture.launches.append(launch)
        rows[k] = []  # release the row's strings as we go: lowers peak memory on big exports
    if seen_lists:
        capture.warnings.append(
            f"{table.path}: {len(seen_lists)} column(s) hold per-instance value lists ('a; b; c'), e.g. "
            f"{', '.join(seen_lists[:3])}; they are kept as text, not numbers. Re-export with "
            f"--print-metric-instances none to get the aggregate values."
        )
    _provenance(capture, names)
    return capture


def _fill(table: CsvTable, k: int, launch: KernelLaunch, columns: list[_Column], cells: list[str],
          precision: dict[str, float], seen_lists: list[str]) -> list[str]:
    """Convert one row's metric cells into launch.metrics/precision/text; return the names with no value.

    This is the reader's hot loop (~4.5 M cells for 2,000 kernels): keep per-cell work minimal.
    """
    metrics = launch.metrics
    absent: list[str] = []
    half = _HALF
    plain = _PLAIN_CHARS
    grouped = _GROUPED
    for col, s in zip(columns, cells, strict=True):
        hit = col.memo.get(s)
        if hit is not None:
            metrics[col.name], precision[col.name] = hit
            continue
        if s and (not s.strip(plain) or grouped(s)):
            try:
                v = float(s.replace(",", "")) if "," in s else float(s)
            except ValueError:  # "-", ".", "1.2.3": the general parser decides
                pass
            else:
                dot = s.find(".")
                d = len(s) - dot - 1 if dot >= 0 else 0
                if d < _MAX_PLACES:
                    if col.factor == 1.0:
                        hit = v, half[d]
                    else:
                        hit = round(v * col.factor, d - col.exp), half[d] * col.factor
                    metrics[col.name], precision[col.name] = hit
                    if len(col.memo) < _MEMO_MAX:
                        col.memo[s] = hit
                    continue
        if not _cell(table, k, launch, col, s, precision, seen_lists):
            absent.append(col.name)
    return absent


def _cell(table: CsvTable, k: int, launch: KernelLaunch, col: _Column, s: str, precision: dict[str, float],
          seen_lists: list[str]) -> bool:
    """Convert one unusual cell (missing token, text, instanced list, exponent) or reject garbage.

    Return False when the cell holds no value.
    """
    t = s.strip()
    if t.lower() in MISSING_TOKENS:
        return False
    try:
        v = parse_number(t)
    except ValueError:
        if ";" in t:  # old exports print instanced metrics inline: "32.00; 32.00; 0.00"
            if col.name not in seen_lists:
                seen_lists.append(col.name)
        elif col.required:
            shown = t if len(t) <= 60 else t[:57] + "..."
            raise InputError(
                f"{table.where(k)}: column {col.index + 1} {col.name!r} (unit {col.base!r}) holds {shown!r}, "
                f"expected a number such as 1.23 or 1,234 (or empty / n/a for no value). The row is damaged "
                f"or was edited; re-export it with ncu --csv."
            ) from None
        launch.text[col.name] = t
        return True
    if v is None:
        return False
    places = decimals(t)
    launch.metrics[col.name] = rescale(v, col.factor, places)
    precision[col.name] = half_ulp(places, col.factor)
    return True


def _warn_unknown_units(capture: Capture, table: CsvTable, columns: list[_Column]) -> None:
    unknown: dict[str, str] = {}
    for col in columns:
        u = col.base or ""
        if u and unit_scale(u) is None and u not in unknown:
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
    gpus = sorted({g for la in capture.launches if (g := la.text.get("device__attribute_display_name"))})
    capture.gpu = ", ".join(gpus) if gpus else None
    capture.section_set = infer_raw_set(set(names))


def infer_raw_set(present: set[str]) -> str | None:
    """Infer the ncu --set (basic, detailed, full, roofline) from which marker metrics are columns."""
    launch = _LAUNCH in present and _OCCUPANCY in present
    sol = _SOL in present
    hier = _HIER_ROOFLINE in present
    compute = _COMPUTE in present and _SOURCE in present
    warp = _WARP_STATE in present
    if launch and sol and warp and compute and hier:
        return "full"
    if sol and hier and _ROOFLINE in present and not (_LAUNCH in present or _OCCUPANCY in present):
        return "roofline"
    if launch and sol and compute and _ROOFLINE in present and not warp and not hier:
        return "detailed"
    if launch and sol and not (compute or warp or hier or _ROOFLINE in present):
        return "basic"
    return None
