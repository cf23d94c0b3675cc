"""`nsys stats --report cuda_gpu_kern_sum --format csv` output (older: `gpukernsum`) -> per-kernel time rows.

What nsys really prints (tests/data/nsys/): progress lines before the table (`Generating SQLite file ...`,
`Processing [x.sqlite] with [.../reports/cuda_gpu_kern_sum.py]...`, `NOTICE: ...`, a `** Title (report):`
banner, blank lines); a `SKIPPED: ... does not contain CUDA kernel data.` line instead of a table; kernel names
quoted because they contain commas; nsys 2022.x adding `GridXYZ,BlockXYZ` columns and then printing one row
per (kernel, grid, block), which is merged here per kernel name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NoReturn

from perfreport.errors import InputError
from perfreport.timeshare.model import INT64_LIMIT, Parsed, csv_row, quoted

EXPECTED = ("`nsys stats --report cuda_gpu_kern_sum --format csv` output (nsys before 2022.1: gpukernsum) "
            "or an `nsys export --type sqlite` file")
HOW_TO = ("Export it with `nsys stats --report cuda_gpu_kern_sum --format csv --output kern R.nsys-rep` "
          "(writes kern_cuda_gpu_kern_sum.csv), or `nsys export --type sqlite R.nsys-rep`.")
KERNEL_REPORTS = ("cuda_gpu_kern_sum", "gpukernsum", "cuda_gpu_kern_gb_sum")
_UNITS = {"ns": 1.0, "us": 1e3, "μs": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_PROCESSING = re.compile(r"^Processing \[.*\] with \[(.*)\]")
_BANNER = re.compile(r"^\s*\*\* .*\((\w+)\):\s*$")
_VERSION = re.compile(r"(20\d\d\.\d+\.\d+)")
_PREAMBLE = ("Processing [", "Generating ", "NOTICE:", "WARNING:", "SKIPPED:", "ERROR:", " **", "**")
_COLUMN = re.compile(r"^(?P<key>[^(]+?)\s*(?:\((?P<unit>[^)]*)\))?$")


def _columns(header: list[str]) -> dict[str, tuple[int, float]]:
    """Map our roles (total, instances, min, max, name) to (column index, factor to ns)."""
    cols: dict[str, tuple[int, float]] = {}
    roles = {"total time": "total", "instances": "instances", "calls": "instances", "min": "min",
             "minimum": "min", "max": "max", "maximum": "max", "name": "name"}
    for i, raw in enumerate(header):
        m = _COLUMN.match(raw.strip())
        if not m:
            continue
        role = roles.get(m["key"].strip().lower())
        if role and role not in cols:
            cols[role] = (i, _UNITS.get((m["unit"] or "ns").strip(), 0.0))
    return cols


def _is_kernel_header(header: list[str]) -> bool:
    """A kernel summary's header: total time, instances and name columns that _columns reads (one test for both,
    so a header it would accept always has the columns the rows are read by)."""
    keys = {h.strip().lower() for h in header}
    return "num calls" not in keys and {"total", "instances", "name"} <= _columns(header).keys()


def _guess_report(header: list[str]) -> str:
    keys = {h.strip().lower() for h in header}
    if "operation" in keys:
        return "a memory-operation summary (cuda_gpu_mem_time_sum / cuda_gpu_mem_size_sum)"
    if "num calls" in keys:
        return "an API-call summary (cuda_api_sum / osrt_sum): host calls, not GPU kernels"
    if "range" in keys or "style" in keys:
        return "an NVTX range summary (nvtx_sum)"
    return "another nsys report"


_ROW = "the comma-separated kernel summary nsys writes. The file is damaged; re-export it"


def read_nsys_csv(path: Path, text: str) -> Parsed:
    """Parse the kernel-summary table out of nsys stats CSV output (preamble and other tables skipped)."""
    lines = text.splitlines()
    report, version, header_at, others = None, None, None, []
    for i, line in enumerate(lines):
        if m := _PROCESSING.match(line):
            report = re.split(r"[\\/]", m.group(1))[-1].removesuffix(".py")
            version = version or (v.group(1) if (v := _VERSION.search(m.group(1))) else None)
            continue
        if (m := _BANNER.match(line)) and m.group(1):
            report = m.group(1)
            continue
        if not line.strip() or line.startswith(_PREAMBLE) or "," not in line:
            continue
        fields = csv_row(f"{path}:{i + 1}", line, _ROW)
        if any(f.strip().lower().startswith("total time") for f in fields):
            if _is_kernel_header(fields):
                header_at = i
                break
            others.append((i + 1, fields))
    if header_at is None:
        _raise_no_table(path, lines, others)
    report = report or _report_from_filename(path)
    header = csv_row(f"{path}:{header_at + 1}", lines[header_at], _ROW)
    rows, warnings = _rows(path, lines, header_at, header)
    if report and report not in KERNEL_REPORTS:
        warnings.append(f"nsys report '{report}' is not one of {', '.join(KERNEL_REPORTS)}; read as a kernel "
                        f"summary because its header has 'Total Time', 'Instances' and 'Name'.")
    return Parsed("nsys-csv", rows, report=report, tool_version=version, warnings=warnings)


def _report_from_filename(path: Path) -> str | None:
    for name in KERNEL_REPORTS:
        if path.stem.endswith(name):
            return name
    return None


def _raise_no_table(path: Path, lines: list[str], others: list[tuple[int, list[str]]]) -> NoReturn:
    for n, line in enumerate(lines, 1):
        if line.startswith("SKIPPED:") and "kernel" in line.lower():
            raise InputError(
                f"{path}:{n}: nsys found no CUDA kernels ('{line.strip()}'): the capture had no CUDA trace. "
                f"Re-run `nsys profile --trace=cuda ...` (add nvtx,osrt as needed), then export the kernel "
                f"summary again."
            )
    if others:
        n, fields = others[0]
        raise InputError(
            f"{path}:{n}: not an nsys kernel summary: expected a CSV header with columns 'Total Time (ns)', "
            f"'Instances' and 'Name' (report cuda_gpu_kern_sum; older gpukernsum), got "
            f"'{','.join(fields)}' ({_guess_report(fields)}). {HOW_TO}"
        )
    stripped = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    for n, line in stripped:
        if "Total Time" in line and "Name" in line:
            raise InputError(
                f"{path}:{n}: an nsys table in column (text) format; expected CSV. Re-run nsys stats with "
                f"`--format csv`. {HOW_TO}"
            )
    n, first = stripped[0]
    hint = " It looks like JSON: for a PyTorch profiler trace use `import_torch_trace`." if first.lstrip()[
        :1] in "{[" else ""
    raise InputError(  # the line itself is not echoed: a file that is no recognised export may be anything
        f"{path}:{n}: not an nsys kernel summary: no CSV header with 'Total Time (ns)', 'Instances' and "
        f"'Name' was found (line {n}, {len(first)} characters, is none).{hint} Expected {EXPECTED}. {HOW_TO}"
    )


_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")  # 1,707,204,307.5: thousands separators, kept apart


def _number(path: Path, n: int, column: str, raw: str, factor: float) -> int:
    text = raw.strip()
    shown = quoted(raw)
    if "," in text:
        if not _GROUPED.fullmatch(text):  # 1707204307,5: a decimal comma, never "every comma deleted"
            raise InputError(
                f"{path}:{n}: column '{column}': '{shown}' has a comma that is not a thousands separator (a "
                f"decimal comma: the file was written or re-saved in a decimal-comma locale); expected numbers "
                f"like 1707204307.5. Re-export with `LC_ALL=C nsys stats --format csv ...`, or save the CSV with "
                f"'.' as the decimal mark.")
        text = text.replace(",", "")
    try:
        value = float(text)  # a 5,000-digit integer reads as inf here: refused below with the others
    except ValueError:
        raise InputError(
            f"{path}:{n}: column '{column}': expected a number, got '{shown}'. The row is damaged; re-export "
            f"the kernel summary."
        ) from None
    if not 0 <= value * factor < INT64_LIMIT:  # NaN fails too
        raise InputError(f"{path}:{n}: column '{column}': expected a finite value >= 0 (below 2^63 ns), got "
                         f"'{shown}'. The row is damaged; re-export the kernel summary.")
    return round(value * factor)


def _rows(path: Path, lines: list[str], header_at: int, header: list[str]) -> tuple[list[dict[str, Any]],
                                                                                        list[str]]:
    cols = _columns(header)  # total, instances and name are there: _is_kernel_header checked them
    bad_units = [header[i] for i, f in cols.values() if f == 0.0]
    if bad_units:
        raise InputError(f"{path}:{header_at + 1}: unknown time unit in column(s) {', '.join(bad_units)}; "
                         f"expected ns, us, ms or s. Re-export with the default `--timeunit nsec`.")
    merged: dict[str, dict[str, Any]] = {}
    seen_rows: dict[str, int] = {}
    name_i = cols["name"][0]
    for n, line in enumerate(lines[header_at + 1 :], header_at + 2):
        if not line.strip() or line.startswith(_PREAMBLE):
            break
        fields = csv_row(f"{path}:{n}", line, _ROW)
        if len(fields) > len(header) and name_i == len(header) - 1:
            fields = fields[:name_i] + [",".join(fields[name_i:])]  # an unquoted name with commas
        if len(fields) != len(header):
            raise InputError(f"{path}:{n}: expected {len(header)} columns like the header, got {len(fields)}: "
                             f"'{line[:120]}'. The file is truncated or damaged; re-export it.")
        name = fields[name_i].strip()
        if not name:
            raise InputError(f"{path}:{n}: empty kernel name in column 'Name'.")
        vals = {role: _number(path, n, header[i], fields[i], f) for role, (i, f) in cols.items() if role != "name"}
        count_i = cols["instances"][0]
        count = fields[count_i].strip().replace(",", "")
        if not re.fullmatch(r"\d+(\.0*)?", count):  # a launch count is whole: 2.5 instances is a damaged row
            raise InputError(f"{path}:{n}: column '{header[count_i]}': expected a whole number of launches, got "
                             f"'{quoted(fields[count_i])}'. The row is damaged; re-export the kernel summary.")
        if "min" in vals and "max" in vals and vals["min"] > vals["max"]:
            raise InputError(f"{path}:{n}: kernel {quoted(name[:80])}: Min {vals['min']} ns is above Max "
                             f"{vals['max']} ns; the row is damaged (columns shifted?). Re-export the kernel summary.")
        seen_rows[name] = seen_rows.get(name, 0) + 1
        row = merged.setdefault(name, {"name": name, "instances": 0, "total_ns": 0, "min_ns": None,
                                       "max_ns": None})
        row["instances"] += vals["instances"]
        row["total_ns"] += vals["total"]
        for key, fn in (("min", min), ("max", max)):
            if key in vals:
                old = row[f"{key}_ns"]
                row[f"{key}_ns"] = vals[key] if old is None else fn(old, vals[key])
    if not merged:
        raise InputError(f"{path}:{header_at + 1}: the kernel summary header has no rows under it: nsys traced "
                         f"no kernel. Re-run `nsys profile --trace=cuda ...` around the kernels of interest.")
    warnings = []
    multi = {k: v for k, v in seen_rows.items() if v > 1}
    if multi:
        warnings.append(
            f"{len(multi)} kernel name(s) appear in several rows (one per grid/block shape, {sum(multi.values())} "
            f"rows): merged per name (instances and total time summed, min/max over the rows; Med and StdDev "
            f"are not mergeable and are not kept)."
        )
    zero = [r["name"] for r in merged.values() if r["instances"] == 0]
    if zero:
        raise InputError(f"{path}: kernel(s) with 0 instances: {', '.join(zero[:3])}; the summary is damaged.")
    return list(merged.values()), warnings
