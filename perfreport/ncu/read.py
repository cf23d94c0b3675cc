"""Pick the reader for an export by its name and first bytes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from perfreport.errors import InputError
from perfreport.files import check_regular
from perfreport.ncu.model import Capture
from perfreport.ncu.rep.proto import MAGIC
from perfreport.progress import Progress

if TYPE_CHECKING:
    from perfreport.ncu.rep.reader import FileHash

REP_SUFFIXES = (".ncu-rep", ".ncu-rep.gz", ".ncu-repz")
CSV_SUFFIXES = (".csv", ".log", ".txt", ".csv.gz", ".log.gz", ".txt.gz")  # gzip: the strict reader




def is_report(path: Path) -> bool:
    """A .ncu-rep by its name (read_export also knows one by its first bytes)."""
    return path.name.lower().endswith(REP_SUFFIXES)


def read_export(path: Path, progress: Progress | None = None, digest: FileHash | None = None,
                rep_reader: str = "auto", rules: bool = True) -> Capture:
    """Read a .ncu-rep[.gz] (rep.read_rep: its bytes, or ncu_report), or an ncu CSV (raw or details page, or a log).

    `progress` gets a line now and then while a report's kernels are read (the byte reader needs well under a
    millisecond a kernel; ncu_report, for layouts the byte reader does not know, 10-25 ms a full-set kernel);
    a CSV is read in one pass (about 1 s per 50 MB). `digest`: a report's hash already started (rep.FileHash).
    `rules` False: a report's rule results are not read (rep.read_rep); a details CSV lists them in its rows
    and they are kept, as the rows are read anyway.
    """
    if not path.exists():
        raise InputError(f"capture '{path}': no such file. Pass a .ncu-rep, an ncu CSV export, or a bundle folder.")
    if path.is_dir():
        raise InputError(f"capture '{path}': is a folder without ncu-profiles/; expected a file or a bundle.")
    check_regular(path, "a .ncu-rep or an ncu CSV export")
    report = is_report(path)
    if not report and path.name.lower().endswith(CSV_SUFFIXES):
        from perfreport.ncu.catalog.metrics import load_catalog
        from perfreport.ncu.csv.read import read_csv_export

        return read_csv_export(path, frozenset(load_catalog().needed()))
    if not report:
        with path.open("rb") as fh:
            report = fh.read(len(MAGIC)) == MAGIC  # a report by its first bytes, whatever its name
    if report:
        from perfreport.ncu.rep.reader import read_rep

        return read_rep(path, progress, rep_reader, digest, rules)
    raise InputError(
        f"capture '{path}': unknown file type (expected a name ending in "
        f"{', '.join(REP_SUFFIXES + CSV_SUFFIXES)}). Export with `ncu -o NAME` or "
        f"`ncu --import NAME.ncu-rep --csv --page raw > NAME-raw.csv`."
    )
