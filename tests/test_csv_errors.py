"""ncu CSV readers: every unusable input gives one InputError naming file, line, expected vs got and the fix."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from test_csv_read import lines_of, write

from perfreport.errors import EmptyCaptureError, InputError
from perfreport.ncu.csv.read import read_csv_export

H200 = Path(__file__).parent / "data" / "h200_shared"
FIXED = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Device", "CC"]




def _error(path: Path, kind: type[InputError] = InputError) -> str:
    with pytest.raises(kind) as info:
        read_csv_export(path)
    return str(info.value.message)


def test_error_empty_file(tmp_path: Path) -> None:
    msg = _error(write(tmp_path, ""))
    assert "empty" in msg and "ncu --import" in msg


def test_error_no_kernels_log() -> None:
    msg = _error(H200 / "empty.log", EmptyCaptureError)
    assert "empty.log:3" in msg and "No kernels were profiled" in msg
    assert "reduce_kernel, vectorized_elementwise_kernel" in msg
    assert "--kernel-name" in msg and "regex:" in msg


def test_error_no_kernels_child_process_log() -> None:
    msg = _error(H200 / "trap_env.log", EmptyCaptureError)
    assert "No kernels were profiled" in msg and "--target-processes all" in msg


def test_error_log_without_csv_points_to_report() -> None:
    msg = _error(H200 / "trap_noenv.log")
    assert "/tmp/o/trap_noenv.ncu-rep" in msg and "--csv --page raw" in msg


def test_error_no_header(tmp_path: Path) -> None:
    msg = _error(write(tmp_path, "hello world\nnothing here\n"))
    assert "no ncu CSV header" in msg and "line 1 (11 characters)" in msg and "--page raw" in msg
    assert "hello world" not in msg  # a file that is no export is not echoed


def test_error_unknown_tool_csv(tmp_path: Path) -> None:
    msg = _error(write(tmp_path, '"Time (%)","Total Time (ns)","Instances","Name"\n"50.0","100","2","k"\n'))
    assert "unknown tool (4 columns; its header is an nsys kernel summary's: import it with `perftunereport " \
        "import_nsys`)" in msg and '"ID","Process ID"' in msg


def test_error_id_header_without_kernel_name(tmp_path: Path) -> None:
    msg = _error(write(tmp_path, '"ID","Value"\n"1","2"\n'))
    assert "unknown tool" in msg and "Kernel Name" in msg


def test_error_duplicate_columns(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    msg = _error(write(tmp_path, f'{header},"c2clink__enabled_mask"\n{units},""\n{row},"0"\n'))
    assert "x.csv:1" in msg and "duplicate column" in msg and "'c2clink__enabled_mask'" in msg


def test_error_ragged_row(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    msg = _error(write(tmp_path, f'{header}\n{units}\n{row},"extra"\n{row}\n'))
    assert "x.csv:3" in msg and "567 fields, expected 566" in msg


def test_error_truncated_mid_row(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    half = row[: len(row) // 2]
    half = half[: half.rindex('",') + 1]  # cut mid-row, at a field boundary
    msg = _error(write(tmp_path, f"{header}\n{units}\n{half}"))
    assert "x.csv:3" in msg and "truncated" in msg and "expected 566" in msg


def test_error_truncated_inside_quotes(tmp_path: Path) -> None:
    text = (H200 / "attn_basic-raw.csv").read_text()
    start = text.index('"cudnn_generated')
    msg = _error(write(tmp_path, text[: start + 10]))
    assert "x.csv:3" in msg and "truncated" in msg


def test_error_header_without_rows(tmp_path: Path) -> None:
    header, units, _ = lines_of("gemm_full-raw.csv")
    msg = _error(write(tmp_path, f"{header}\n{units}\n"), EmptyCaptureError)
    assert "x.csv:1" in msg and "no kernel rows" in msg
    details_header = lines_of("gemm_full-details.csv")[0]
    _error(write(tmp_path, details_header + "\n", "d.csv"), EmptyCaptureError)


def test_error_garbage_in_numeric_column(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    cells = next(csv.reader([row]))
    col = next(csv.reader([header])).index("gpu__time_duration.sum")
    cells[col] = "12..5x"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerow(cells)
    msg = _error(write(tmp_path, f"{header}\n{units}\n{out.getvalue()}"))
    assert "x.csv:3" in msg and f"column {col + 1}" in msg and "'gpu__time_duration.sum'" in msg
    assert "'12..5x'" in msg and "expected a number" in msg


def test_error_garbage_in_details_value(tmp_path: Path) -> None:
    lines = lines_of("gemm_full-sol.csv")
    lines[6] = lines[6].replace('"1.23"', '"1,23"')  # Duration in a European locale
    msg = _error(write(tmp_path, "\n".join(lines)))
    assert "x.csv:7" in msg and "'Duration'" in msg and "'1,23'" in msg


def test_error_malformed_quoting(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    msg = _error(write(tmp_path, f'{header}\n{units}\n"0"x{row[3:]}\n'))
    assert "x.csv:3" in msg and "malformed CSV row" in msg


def test_error_details_row_cut_before_value(tmp_path: Path) -> None:
    lines = lines_of("gemm_full-sol.csv")
    lines[3] = lines[3][: lines[3].rindex(',"cycle"')]
    msg = _error(write(tmp_path, "\n".join(lines)))
    assert "x.csv:4" in msg and "expected at least 15" in msg and "truncated" in msg


def test_error_binary_report(tmp_path: Path) -> None:
    path = tmp_path / "r.ncu-rep"
    path.write_bytes(b"NVR\x00\x02\x00\x00\x00" + bytes(100))
    msg = _error(path)
    assert ".ncu-rep" in msg and "ncu --import r.ncu-rep --csv --page raw" in msg
