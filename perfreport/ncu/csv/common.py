"""Shared part of the CSV readers: find the ncu table inside a file, split it into rows, name the columns.

ncu prints CSV to stdout while profiling, so a saved log holds ``==PROF==`` lines and application output
around (and sometimes between) the CSV rows. The table starts at the first line beginning with ``"ID",``.
"""

from __future__ import annotations

import csv
import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfreport.errors import EmptyCaptureError, InputError
from perfreport.files import gunzip_limit, gzip_bomb, sha256_file
from perfreport.kernels.names import function_name
from perfreport.ncu.model import KernelLaunch
from perfreport.ncu.rep.proto import MAGIC as REP_MAGIC

HOW_TO_EXPORT = (
    "Produce one with `ncu --import R.ncu-rep --csv --page raw > R-raw.csv` (or `--page details`), "
    "or profile with `ncu --csv --page raw ... > log.txt`."
)

# Fixed (per-kernel) columns; "Kernel Time" (ncu <= 2020) is kept in KernelLaunch.text.
FIXED_COLUMNS = frozenset({
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
    "Block Size", "Grid Size", "Device", "CC",
})
LONG_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
RULE_COLUMNS = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup")
_NVTX_MARKERS = ("Domain", "Push/Pop_Range", "Start/Stop_Range")
_HEADER_PREFIXES = ('"ID",', "ID,Process ID,")  # ncu quotes every field; tolerate a re-saved file
_function_name = lru_cache(maxsize=4096)(function_name)  # 2,000 launches of a few kernels: parse each name once


@dataclass
class CsvTable:
    """The ncu table of one file: header, data rows and the file line each row starts on."""

    path: Path
    sha256: str
    header: list[str]
    header_line: int
    rows: LazyRows | list[list[str]]  # list: rows already split (the fast path's pandas rows)
    row_lines: list[int]
    fixed: dict[str, int]  # fixed column name -> index
    nvtx: list[int]  # indexes of NVTX columns
    first_metric: int  # index of the first column after the fixed block
    warnings: list[str] = field(default_factory=list)

    def where(self, row_index: int | None = None) -> str:
        """Return ``file:line`` for a data row (or for the header)."""
        line = self.header_line if row_index is None else self.row_lines[row_index]
        return f"{self.path}:{line}"


def is_nvtx_column(name: str) -> bool:
    """Return True for the NVTX state columns ``--nvtx`` adds (``thread Domain:Push/Pop_Range:...``)."""
    return any(marker in name for marker in _NVTX_MARKERS)


def load_table(path: Path) -> CsvTable:
    """Read ``path`` and return its ncu table, or raise InputError saying what is wrong and how to fix it."""
    try:
        digest, lines = _read_lines(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc}). Check the path.") from None
    header_index = _find_header(path, lines)
    header_text = lines[header_index].rstrip("\r")
    header = _parse_line(path, header_index + 1, header_text)
    _check_duplicates(path, header_index + 1, header)
    fixed, nvtx, first_metric = _fixed_block(path, header_index + 1, header)
    rows, row_lines, skipped = _records(path, lines, header_index, header_text)
    table = CsvTable(path, digest, header, header_index + 1, rows, row_lines, fixed, nvtx, first_metric)
    if skipped:
        table.warnings.append(
            f"{path}: skipped {skipped} line(s) after the CSV header that are not CSV rows "
            f"(ncu '==PROF==' lines or application output)."
        )
    return table


def _read_lines(path: Path) -> tuple[str, list[str]]:
    """Return (sha256, lines without their '\\n'), decoding line by line so the file is held once, not 3 times."""
    digest = sha256_file(path)
    with path.open("rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener: Any = gzip.open if gz else open
    lines: list[str] = []
    size = path.stat().st_size
    limit, read = gunzip_limit(size) if gz else None, 0
    try:
        with opener(path, "rb") as fh:
            head = fh.read(65536)
            _check_head(path, head)
            fh.seek(0)
            # a .gz reads at most gunzip_limit bytes, even as one line: a gzip bomb must not fill memory
            while raw := fh.readline(-1 if limit is None else limit + 1 - read):
                read += len(raw)
                if limit is not None and read > limit:
                    raise gzip_bomb(f"{path}", size)
                if b"\x00" in raw:  # past the head too: a NUL would enter a kernel name or a value
                    _raise_nul(path, len(lines) + 1)
                lines.append(raw.decode("utf-8", errors="replace").removesuffix("\n"))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"{path}: gzip-compressed but cannot be decompressed ({exc}). "
                         f"Re-copy the file or decompress it with `gunzip`.") from None
    if lines:
        lines[0] = lines[0].removeprefix("\ufeff")
    if not any(line.strip() for line in lines):
        raise InputError(f"{path}: the file is empty; expected an ncu CSV export. {HOW_TO_EXPORT}")
    return digest, lines


def _raise_nul(path: Path, line: int) -> None:
    raise InputError(
        f"{path}:{line}: a NUL byte (binary data) in the line; expected a text ncu CSV export. The file was "
        f"damaged (a disk or copy error) or is not an export. {HOW_TO_EXPORT}"
    )


def _check_head(path: Path, data: bytes) -> None:
    if data[:4] == REP_MAGIC:
        raise InputError(
            f"{path}: this is a binary ncu report (.ncu-rep), not a CSV export. Import it as a report, or "
            f"convert it: `ncu --import {path.name} --csv --page raw > {path.stem}-raw.csv`."
        )
    if b"\x00" in data:
        raise InputError(
            f"{path}: binary data (NUL bytes) found; expected a text ncu CSV export. {HOW_TO_EXPORT}"
        )


def _find_header(path: Path, lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if line.startswith(_HEADER_PREFIXES):
            return i
    _raise_no_header(path, lines)
    raise AssertionError("unreachable")


def _raise_no_header(path: Path, lines: list[str]) -> None:
    """Explain why a file without an ncu CSV header cannot be imported."""
    stripped = [(i + 1, line.rstrip("\r")) for i, line in enumerate(lines) if line.strip()]
    ncu_notes = [f"line {n}: {t.strip()}" for n, t in stripped if t.startswith(("==WARNING==", "==ERROR=="))]
    notes = ("\n  ncu said:\n    " + "\n    ".join(ncu_notes[:8])) if ncu_notes else ""
    for n, text in stripped:
        if "No kernels were profiled" in text:
            kernels = _available_kernels(stripped)
            if kernels:
                fix = (
                    f"Kernels the application launched, as listed after 'Available Kernels:': "
                    f"{', '.join(kernels)}. Fix the kernel filter: `--kernel-name <exact function name>` or "
                    f"`--kernel-name regex:'<pattern>'` matching one of these (see also --kernel-name-base)."
                )
            else:
                fix = (
                    "ncu listed no launched kernels at all, so the kernels ran in a process ncu did not "
                    "profile (e.g. `env VAR=1 python ...` after ncu with --target-processes "
                    "application-only). Use --target-processes all, or set the variables in ncu's own "
                    "environment; then check --kernel-name (exact name or regex:'<pattern>')."
                )
            raise EmptyCaptureError(
                f"{path}:{n}: ncu profiled no kernels ('No kernels were profiled'); there is nothing to "
                f"import. {fix}{notes}"
            )
    reports = [t.split("Report:", 1)[1].strip() for _, t in stripped if "==PROF== Report:" in t]
    if reports:
        raise InputError(
            f"{path}: an ncu log without CSV; ncu wrote the results to {', '.join(reports)}. Import the "
            f"report, or convert it: `ncu --import {reports[0]} --csv --page raw > out.csv`.{notes}"
        )
    first_n, first = stripped[0]
    # what the file holds is not echoed: a file that is no recognised export may be anything (a key, a password)
    if "," in first or "\t" in first:
        cols = len(first.split("," if "," in first else "\t"))
        nsys = "; its header is an nsys kernel summary's: import it with `perftunereport import_nsys`" if (
            "Total Time" in first and "Instances" in first) else ""
        raise InputError(
            f"{path}:{first_n}: a table from an unknown tool ({cols} columns{nsys}), expected an ncu CSV export whose "
            f'header starts with "ID","Process ID","Process Name","Host Name",... (nsys and other profilers\' '
            f"CSVs are not ncu exports). {HOW_TO_EXPORT}{notes}"
        )
    raise InputError(
        f"{path}: no ncu CSV header found; expected a line starting with "
        f'"ID","Process ID" (an export from `ncu --csv --page raw|details`), but line {first_n} '
        f"({len(first)} characters) is none. {HOW_TO_EXPORT}{notes}"
    )


def _available_kernels(stripped: list[tuple[int, str]]) -> list[str]:
    names: list[str] = []
    started = False
    for _, text in stripped:
        if text.strip().startswith("Available Kernels"):
            started = True
            continue
        if started:
            m = re.match(r"\s*\d+\.\s+(.*\S)", text)
            if not m:
                break
            names.append(m.group(1))
    return names


def _parse_line(path: Path, line_no: int, text: str) -> list[str]:
    try:
        rows = list(csv.reader([text]))
    except csv.Error as exc:
        raise InputError(f"{path}:{line_no}: malformed CSV header ({exc}). {HOW_TO_EXPORT}") from None
    return rows[0] if rows else []


def _check_duplicates(path: Path, line_no: int, header: list[str]) -> None:
    seen: dict[str, int] = {}
    dups: list[str] = []
    for i, name in enumerate(header):
        if name in seen:
            dups.append(f"{name!r} (columns {seen[name] + 1} and {i + 1})")
        else:
            seen[name] = i
    if dups:
        raise InputError(
            f"{path}:{line_no}: duplicate column names in the header: {', '.join(dups[:10])}"
            f"{' ...' if len(dups) > 10 else ''}; expected each column once, as ncu writes it. The file was "
            f"probably concatenated or edited by hand; re-export it from the report with ncu --csv."
        )


def _fixed_block(path: Path, line_no: int, header: list[str]) -> tuple[dict[str, int], list[int], int]:
    fixed: dict[str, int] = {}
    nvtx: list[int] = []
    i = 0
    while i < len(header) and (header[i] in FIXED_COLUMNS or is_nvtx_column(header[i])):
        if header[i] in FIXED_COLUMNS:
            fixed[header[i]] = i
        else:
            nvtx.append(i)
        i += 1
    if "Kernel Name" not in fixed:
        raise InputError(
            f"{path}:{line_no}: a table from an unknown tool: the header starts with \"ID\" but has no "
            f'"Kernel Name" column in its leading block (got {header[:8]}). Expected an ncu CSV export. '
            f"{HOW_TO_EXPORT}"
        )
    return fixed, nvtx, i


def _records(path: Path, lines: list[str], header_index: int, header_text: str
             ) -> tuple[LazyRows, list[int], int]:
    """Return the CSV rows after the header (quoted fields may span lines) and how many lines were skipped."""
    texts: list[str] = []
    starts: list[int] = []
    skipped = 0
    pending: list[str] = []
    pending_start = 0
    quoted = header_text.startswith('"')  # ncu quotes every field, so other lines are log/app output
    for i in range(header_index + 1, len(lines)):
        line = lines[i]
        if line.endswith("\r"):
            line = line[:-1]
        if pending:
            pending.append(line)
            if sum(part.count('"') for part in pending) % 2 == 0:
                texts.append("\n".join(pending))
                starts.append(pending_start)
                pending = []
            continue
        if not line.startswith('"') if quoted else (not line.strip() or line.startswith("==")):
            if line.strip():
                skipped += 1
            continue
        if line == header_text:
            continue  # ncu repeats the header when several processes print CSV
        if line.startswith(_HEADER_PREFIXES):
            raise InputError(
                f"{path}:{i + 1}: a second CSV table with a different header starts here; expected one ncu "
                f"export per file. Split the file at this line and import each part."
            )
        if line.count('"') % 2:
            pending = [line]
            pending_start = i + 1
            continue
        texts.append(line)
        starts.append(i + 1)
    if pending:
        raise InputError(
            f"{path}:{pending_start}: the file ends inside a quoted field that starts on this line; "
            f"expected a closing '\"'. The file looks truncated; export it again."
        )
    return LazyRows(path, texts, starts), starts, skipped


class LazyRows:
    """CSV records parsed on access: a 2,000-kernel raw page never holds all ~4.5 M cell strings at once."""

    def __init__(self, path: Path, texts: list[str], starts: list[int]) -> None:
        self._path, self._texts, self._starts = path, texts, starts

    def __len__(self) -> int:
        return len(self._texts)

    def __getitem__(self, k: int) -> list[str]:
        text = self._texts[k]
        try:
            parsed = list(csv.reader([text], strict=True))
        except csv.Error as exc:
            parsed, reason = [], str(exc)
        else:
            reason = "one record spans several rows"
        if len(parsed) != 1:
            raise InputError(
                f"{self._path}:{self._starts[k]}: malformed CSV row ({reason}); expected comma-separated, "
                f"double-quoted fields as ncu writes them. The file was damaged or edited; export it again."
            )
        return parsed[0]

    def __setitem__(self, k: int, value: list[str]) -> None:
        """Release a processed record (`rows[k] = []`) to lower peak memory."""
        self._texts[k] = ""

    def __iter__(self) -> Iterator[list[str]]:
        """One csv.reader over all records (a reader per record costs 3x on 200,000 short details rows)."""
        k = 0
        try:
            for row in csv.reader(self._texts, strict=True):
                yield row
                k += 1
        except csv.Error:
            self[k]  # raises the located InputError
            raise
        if k != len(self._texts):
            self[k]


def new_launch(table: CsvTable, row: list[str], row_index: int, precision: dict[str, float]) -> KernelLaunch:
    """Build a KernelLaunch from the fixed columns of one row; ``precision`` becomes its tolerance dict."""
    values: dict[str, str] = {}
    for column, index in table.fixed.items():
        values[column] = row[index] if index < len(row) else ""
    id_text = values.get("ID", "").strip()
    try:
        launch_id = int(id_text) if len(id_text) <= 19 else -1  # a longer one is no int64 (DuckDB, the lake)
    except ValueError:
        launch_id = -1
    if not 0 <= launch_id < 2**63:
        shown = id_text if len(id_text) <= 40 else id_text[:37] + "..."
        raise InputError(
            f"{table.where(row_index)}: column 'ID' holds {shown!r}, expected an integer launch id from 0 to "
            f"2^63-1. The row is damaged; re-export the file with ncu --csv."
        )
    name = values.get("Kernel Name", "")
    nvtx_cells = [row[i].strip() for i in table.nvtx if i < len(row) and row[i].strip()]
    launch = KernelLaunch(
        launch_id=launch_id,
        name=name,
        function=_function_name(name),
        mangled=name if name.startswith("_Z") else None,
        process_id=values.get("Process ID", ""),
        process_name=values.get("Process Name", ""),
        host=values.get("Host Name", ""),
        context=values.get("Context", ""),
        stream=values.get("Stream", ""),
        device=values.get("Device", ""),
        cc=values.get("CC", ""),
        block_size=values.get("Block Size", ""),
        grid_size=values.get("Grid Size", ""),
        nvtx=" | ".join(nvtx_cells) if nvtx_cells else None,
        precision=precision,
    )
    if values.get("Kernel Time"):
        launch.text["Kernel Time"] = values["Kernel Time"]
    return launch


def no_kernels(table: CsvTable) -> EmptyCaptureError:
    """Return the error for a table header without data rows."""
    return EmptyCaptureError(
        f"{table.where()}: the ncu CSV header is present but no kernel rows follow; expected at least one "
        f"row per profiled kernel. ncu profiled nothing (check --kernel-name / --launch-skip / "
        f"--launch-count / --target-processes) or the file was cut after the header; capture again."
    )
