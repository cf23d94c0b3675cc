"""The same H200 kernels exported three ways (.ncu-rep, --page raw, --page details) give the same numbers.

Every metric a CSV carries must equal the report's value within the CSV's printed precision; every derived
field the export can support must agree; what an export cannot carry (FLOPs on the details page) is null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfreport.config.ceilings import load_ceilings
from perfreport.ncu.aggregate import summarize_capture
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.ncu.csv.read import read_csv_export
from perfreport.ncu.derive import DeriveContext
from perfreport.ncu.model import Capture
from perfreport.ncu.rep.reader import read_rep

DATA = Path(__file__).parent / "data"
PAIRS = [
    ("h200_oracle/oracle_full.ncu-rep.gz", "h200_oracle/oracle_full-raw.csv"),
    ("h200_oracle/oracle_full.ncu-rep.gz", "h200_oracle/oracle_full-raw-base.csv"),
    ("h200_oracle/oracle_full.ncu-rep.gz", "h200_oracle/oracle_full-details.csv"),
    ("h200_oracle/oracle_basic.ncu-rep.gz", "h200_oracle/oracle_basic-raw.csv"),
    ("h200_oracle/oracle_basic.ncu-rep.gz", "h200_oracle/oracle_basic-details.csv"),
    ("h200_shared/gemm_full.ncu-rep.gz", "h200_shared/gemm_full-raw.csv"),
    ("h200_shared/gemm_full.ncu-rep.gz", "h200_shared/gemm_full-details.csv"),
    ("h200_shared/attn_basic.ncu-rep.gz", "h200_shared/attn_basic-raw.csv"),
    ("h200_shared/attn_basic.ncu-rep.gz", "h200_shared/attn_basic-details.csv"),
    ("../../campaigns/h200-decoder-layer/captures/prefill/layer_basic.ncu-rep.gz",
     "h200_campaign/prefill_layer_basic-raw.csv"),
    ("h200_oracle/many/many_basic.ncu-rep.gz", "h200_oracle/many/many_basic-raw.csv.gz"),  # 150 launches
    ("h200_rep_layouts/metrics.ncu-rep.gz", "h200_rep_layouts/metrics-raw.csv"),  # --metrics list: dram__bytes.sum
    ("h200_many_layers/layers16_basic.ncu-rep.gz", "h200_many_layers/layers16_basic-raw.csv.gz"),  # 224 launches
]
# Fields derived from several counters: relative tolerance for 2-decimal details exports vs full precision.
DERIVED = ("duration_ns", "dram_bytes", "l2_bytes", "arithmetic_intensity", "achieved_tflops", "sol_pct",
           "sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
           "regs_per_thread", "smem_per_block_bytes", "branch_divergence_pct", "compute_pct_of_peak")


def _derived(capture: Capture) -> list[dict[str, Any]]:
    return summarize_capture(capture, DeriveContext(load_ceilings(), "h200_sm90"), "x")


@pytest.mark.parametrize(("rep_name", "csv_name"), PAIRS, ids=[c for _, c in PAIRS])
def test_every_metric_the_csv_carries_matches_the_report(rep_name: str, csv_name: str) -> None:
    rep, csv = read_rep(DATA / rep_name), read_csv_export(DATA / csv_name)
    # CSV names are demangled *and simplified* by ncu (at::native:: -> at::, (int)4 -> 4): match on function
    assert [k.function for k in csv.launches] == [k.function for k in rep.launches]
    needed = load_catalog().needed()
    compared = 0
    for r, c in zip(rep.launches, csv.launches, strict=True):
        assert c.grid_size == r.grid_size and c.block_size == r.block_size
        for metric in needed:
            if metric not in c.metrics:
                continue
            assert metric in r.metrics, metric
            tol = c.precision.get(metric, 0.0) + 1e-9 * abs(r.metrics[metric])
            assert abs(c.metrics[metric] - r.metrics[metric]) <= tol, (metric, c.metrics[metric], r.metrics[metric])
            if c.units.get(metric) is not None and r.units.get(metric):
                # derived__* counts: `inst` in the report, `thread` in the CSV; both plain counts (scale 1)
                same = {c.units[metric], r.units[metric]} == {"inst", "thread"} and metric.startswith("derived__")
                assert c.units[metric] == r.units[metric] or same, metric
            compared += 1
    assert compared >= 10 * len(rep.launches)


@pytest.mark.parametrize(("rep_name", "csv_name"), PAIRS, ids=[c for _, c in PAIRS])
def test_derived_fields_agree_and_unsupported_ones_are_null(rep_name: str, csv_name: str) -> None:
    rep_k, csv_k = _derived(read_rep(DATA / rep_name)), _derived(read_csv_export(DATA / csv_name))
    details = "details" in csv_name
    rel = 0.02 if details else 1e-4
    for r, c in zip(rep_k, csv_k, strict=True):
        assert c["family"] == r["family"] and c["block_limit_factor"] == r["block_limit_factor"]
        for field in DERIVED:
            if c[field] is None:
                # only the details page may lack what the report has, and only counter-derived fields
                assert r[field] is None or details, (field, r["function"])
                continue
            assert c[field] == pytest.approx(r[field], rel=rel, abs=0.01), (field, r["function"])
        if details:
            assert c["flops"] is None and c["arithmetic_intensity"] is None and c["ai_measured"] is False
        else:
            assert c["ai_measured"] == r["ai_measured"] and c["bound"] == r["bound"]


def test_a_gzipped_csv_imports_by_name_like_the_plain_one(tmp_path: Path) -> None:
    """read_export takes NAME-raw.csv.gz (the strict reader decompresses it): the Capture of the plain file."""
    import gzip

    from perfreport.ncu.read import read_export

    gz = DATA / "h200_oracle/many/many_basic-raw.csv.gz"
    plain = tmp_path / "many_basic-raw.csv"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    a, b = read_export(gz), read_export(plain)
    assert len(a.launches) == len(b.launches) == 150
    assert [la.metrics for la in a.launches] == [la.metrics for la in b.launches]
    assert a.source_format == b.source_format and a.sha256 != b.sha256  # the file's own bytes
