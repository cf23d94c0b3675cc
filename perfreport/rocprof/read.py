"""Read one rocprof-compute workload folder: sysinfo.csv, pmc_perf.csv, timestamps.csv, roofline.csv, perfmon/.

Only reading and checking happen here (derive.py computes): every problem is one line naming the file, what was
expected and got, and the fix. A folder missing sysinfo.csv or pmc_perf.csv is refused; the others are optional.
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from perfreport.errors import InputError

SYSINFO, PMC, TIMESTAMPS, ROOFLINE, PERFMON = "sysinfo.csv", "pmc_perf.csv", "timestamps.csv", "roofline.csv", "perfmon"
REQUIRED = (SYSINFO, PMC)
PMC_COLUMNS = ("Dispatch_ID", "Kernel_Name", "Grid_Size", "Workgroup_Size", "Start_Timestamp", "End_Timestamp")
SYSINFO_COLUMNS = ("gpu_arch", "gpu_model", "cu_per_gpu", "max_sclk", "hbm_bw")
_INSTANCE = re.compile(r"(?P<base>.+)\[(?P<i>\d+)\]$")
_PASS_FILE = re.compile(r"pmc_perf_(\d+)\.txt$")
_FIX = "profile again with `rocprof-compute profile -n NAME -- APP`, or copy the whole workloads/NAME/<gpu>/ folder"


@dataclass
class Workload:
    """One workload folder as read: sysinfo, dispatch rows, the counter -> pass map, optional timestamps/roofline."""

    path: Path
    sysinfo: dict[str, str]
    columns: list[str]
    dispatches: list[dict[str, str]]
    pass_of: dict[str, int] = field(default_factory=dict)  # pmc_perf column -> perfmon pass (pmc_perf_<n>.txt)
    instances: dict[str, list[str]] = field(default_factory=dict)  # X -> its X[i] columns
    timestamps: list[dict[str, str]] | None = None
    roofline: list[dict[str, str]] | None = None
    roofline_columns: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (name in the folder, sha256), sorted

    def sha256(self) -> str:
        """The folder's digest: SHA-256 of its files' `<sha256>  <name>` lines, as merged ncu sources are hashed."""
        lines = "".join(f"{digest}  {name}\n" for name, digest in self.files)
        return hashlib.sha256(lines.encode()).hexdigest()

    def number(self, key: str) -> float | None:
        """A sysinfo value as a number, None when absent, blank or not numeric (NA, N/A)."""
        return to_number(self.sysinfo.get(key))


def to_number(text: str | None) -> float | None:
    """A CSV cell as a float; None for a blank or non-numeric one (rocprof-compute writes NA, N/A, nan)."""
    if text is None or not text.strip():
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_csv(path: Path, need_rows: bool) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows; a row whose field count differs from the header's is a truncated or damaged file."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except UnicodeDecodeError as exc:
        raise InputError(f"'{path}': not UTF-8 text (byte {exc.start}); expected the CSV rocprof-compute writes. "
                         f"{_FIX}.") from None
    except csv.Error as exc:
        raise InputError(f"'{path}': not a readable CSV ({exc}); {_FIX}.") from None
    if not rows or not any(c.strip() for c in rows[0]):
        raise InputError(f"'{path}': empty, expected a header line and {'rows' if need_rows else 'a row'}; {_FIX}.")
    header = rows[0]
    body = [r for r in rows[1:] if r]
    for n, r in enumerate(rows[1:], 2):
        if r and len(r) != len(header):
            raise InputError(f"'{path}' line {n}: {len(r)} fields, the header has {len(header)}: the file is "
                             f"truncated or damaged; {_FIX}.")
    if not body:
        raise InputError(f"'{path}': a header but no row (expected one row per {'dispatch' if need_rows else 'run'});"
                         f" the profile recorded nothing: check the --kernel/--dispatch filters, then {_FIX}.")
    return header, [dict(zip(header, r, strict=True)) for r in body]


def _missing(path: Path, header: list[str], required: tuple[str, ...]) -> None:
    absent = [c for c in required if c not in header]
    if absent:
        raise InputError(f"'{path}': no column {', '.join(absent)}; expected rocprof-compute's {path.name} (columns "
                         f"{', '.join(required)}), got {len(header)} columns starting {', '.join(header[:4])}; {_FIX}.")


def _passes(folder: Path) -> dict[str, int]:
    """Counter -> pass from perfmon/pmc_perf_<n>.txt (`pmc: A B C`); empty when the folder keeps no perfmon/."""
    out: dict[str, int] = {}
    d = folder / PERFMON
    if not d.is_dir():
        return out
    for f in sorted(d.iterdir()):
        m = _PASS_FILE.search(f.name)
        if not m:
            continue
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("pmc:"):
                for counter in line[4:].split():
                    out.setdefault(counter, int(m.group(1)))
    return out


def read_workload(folder: Path) -> Workload:
    """Read and check a workload folder; InputError (one line) for a partial or damaged one."""
    if not folder.is_dir():
        what = "a file" if folder.exists() else "no such folder"
        raise InputError(f"'{folder}': {what}; expected a rocprof-compute workload folder (holding {SYSINFO} and "
                         f"{PMC}, as workloads/NAME/<gpu>/ after `rocprof-compute profile`).")
    for name in REQUIRED:
        if not (folder / name).is_file():
            got = sorted(p.name for p in folder.iterdir())[:8]
            raise InputError(f"'{folder}': no {name}; a rocprof-compute workload folder holds {' and '.join(REQUIRED)}"
                             f", got {', '.join(got) or 'an empty folder'}. Point at the <gpu> folder inside "
                             f"workloads/NAME/, or {_FIX}.")
    sys_header, sys_rows = _read_csv(folder / SYSINFO, need_rows=False)
    _missing(folder / SYSINFO, sys_header, SYSINFO_COLUMNS)
    columns, dispatches = _read_csv(folder / PMC, need_rows=True)
    _missing(folder / PMC, columns, PMC_COLUMNS)
    w = Workload(folder, sys_rows[0], columns, dispatches, pass_of=_passes(folder))
    for c in columns:
        if m := _INSTANCE.match(c):
            w.instances.setdefault(m.group("base"), []).append(c)
    if (folder / TIMESTAMPS).is_file():
        ts_header, w.timestamps = _read_csv(folder / TIMESTAMPS, need_rows=True)
        _missing(folder / TIMESTAMPS, ts_header, ("Dispatch_ID", "Start_Timestamp", "End_Timestamp"))
    if (folder / ROOFLINE).is_file():
        w.roofline_columns, w.roofline = _read_csv(folder / ROOFLINE, need_rows=False)
        _missing(folder / ROOFLINE, w.roofline_columns, ("device",))
    kept = [folder / n for n in (SYSINFO, PMC, TIMESTAMPS, ROOFLINE)]
    kept += sorted((folder / PERFMON).glob("*.txt")) if (folder / PERFMON).is_dir() else []
    w.files = sorted((p.relative_to(folder).as_posix(), _digest(p)) for p in kept if p.is_file())
    return w
