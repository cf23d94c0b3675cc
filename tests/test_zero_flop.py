"""Kernels that count no FLOP (tests/data/h100_zero_flop, captured on an H100): a concatenation and an int32 add. Their
arithmetic intensity is a measured 0 (FLOP and byte counters captured, no FP work), not a missing one: the import
writes it, the roofline puts them in the unmeasured band with a note, the verdict is memory; and the CSV's spelling of
the anonymous namespace (`unnamed>`) names the same function as the report's (`<unnamed>`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_config

from perfreport.ncu.importer import import_ncu
from perfreport.warehouse.gather import gather

DATA = Path(__file__).parent / "data" / "h100_zero_flop"


@pytest.mark.parametrize("export", ["zero_flop_full.ncu-rep.gz", "zero_flop_full-raw.csv"])
def test_zero_flop_kernels_import_with_ai_zero(tmp_path: Path, export: str) -> None:
    camp = write_config(tmp_path / "camp", hardware="h100_sm90")
    result = import_ncu(camp, "c1", DATA / export)
    rows = {k["function"]: k for k in json.loads(result.path.read_text())["kernels"]}
    assert set(rows) == {"elementwise_kernel", "CatArrayBatchedCopy_vectorized", "vectorized_elementwise_kernel"}
    for fn in ("CatArrayBatchedCopy_vectorized", "vectorized_elementwise_kernel"):
        k = rows[fn]
        assert k["flops"] == {"tensor": 0.0, "fp64": 0.0, "fp32": 0.0, "fp16": 0.0, "total": 0.0}
        assert k["arithmetic_intensity"] == 0.0 and k["ai_measured"] is True and k["achieved_tflops"] == 0.0
        assert k["dram_bytes"] > 2e8 and k["bound"] == "memory" and k["chip"] == "gh100"
    assert rows["CatArrayBatchedCopy_vectorized"]["family"] == "copy"
    copy = rows["elementwise_kernel"]  # the strided copy executes half-precision instructions: 4 FLOP per 2 elements
    assert copy["flops"]["fp16"] == pytest.approx(134_217_728, rel=1e-6) and copy["arithmetic_intensity"] > 0


def test_the_roofline_keeps_ai_zero_kernels_off_the_log_axis(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp", hardware="h100_sm90")
    import_ncu(camp, "c1", DATA / "zero_flop_full.ncu-rep.gz")
    model = gather(camp).roofline
    names = ("CatArrayBatchedCopy_vectorized", "vectorized_elementwise_kernel")
    zero = [p for p in model.points if p.label in names]
    assert len(zero) == 2 and all(not p.measured and p.ai is None for p in zero)
    assert sum("AI measured as 0 (no floating-point work)" in n for n in model.notes) == 2
