"""Read an ncu CSV export (``--page raw`` wide or ``--page details`` long) into the tidy Capture model."""

from __future__ import annotations

from pathlib import Path

from perfreport.ncu.csv.common import load_table
from perfreport.ncu.csv.details import read_long
from perfreport.ncu.csv.raw import read_wide
from perfreport.ncu.model import Capture


def read_csv_export(path: Path, only: frozenset[str] | None = None) -> Capture:
    """Read one ncu CSV export (file or saved ncu stdout); raise InputError/EmptyCaptureError if unusable.

    `only`: raw metric names to convert (the importer passes what derivation reads); None converts every column.
    With `only`, a clean export (see fast) is split by pandas (raw) or the byte scan (details); anything
    irregular takes the strict reader.
    """
    path = Path(path)
    if only is not None:
        from perfreport.ncu.csv.fast import read_clean  # pandas import (~0.3 s) only when used

        capture = read_clean(path, only)
        if capture is not None:
            return capture
    table = load_table(path)
    if "Metric Name" in table.header:
        return read_long(table, only)
    return read_wide(table, only)
