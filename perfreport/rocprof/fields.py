"""Each kernel-row field an AMD row fills, with its formula and the rocprof-compute counters it reads per gfx.

The kernel page shows this table for a row whose vendor is amd (the ncu field table names ncu metrics): the
formula in words and, resolved from formulas.yaml for the row's gfx, the pmc_perf.csv counters and sysinfo.csv
values behind it, as rocprof-compute names them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from perfreport.kernels.row import KERNEL_ROW
from perfreport.rocprof.derive import formulas_doc
from perfreport.rocprof.expr import compile_formula

# row field -> (formula in words, formulas.yaml entries it is built from); the per-dtype FLOP entries stand for
# every FLOP path of the gfx (FLOP_PATHS)
FLOP_PATHS = ("valu_f16_flops", "valu_f32_flops", "valu_f64_flops", "mfma_f16_flops", "mfma_bf16_flops",
              "mfma_f32_flops", "mfma_f64_flops")
HBM = ("hbm_read_bytes", "hbm_write_bytes")
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "duration_ns": ("End_Timestamp - Start_Timestamp (pmc_perf.csv, per dispatch)", ()),
    "flops": ("sum over the VALU (64 x (ADD + MUL + TRANS + 2 x FMA)) and MFMA (512 x MOPS) paths", FLOP_PATHS),
    "dram_bytes": ("L2-Fabric read + write bytes (rocprof-compute panel 1700)", HBM),
    "arithmetic_intensity": ("flops.total / dram_bytes", (*FLOP_PATHS, *HBM)),
    "achieved_tflops": ("flops.total / duration_ns / 1000", FLOP_PATHS),
    "achieved_dram_tbps": ("dram_bytes / duration_ns / 1000", HBM),
    "l2_bytes": ("L1-L2 bytes (panel 1600 L1-L2 BW)", ("l2_bytes",)),
    "l1_bytes": ("vL1D cache bytes (panel 1600 Cache BW)", ("l1_bytes",)),
    "lds_bytes": ("LDS bytes (panel 1200 Theoretical Bandwidth)", ("lds_bytes",)),
    "ai_l2": ("flops.total / l2_bytes", (*FLOP_PATHS, "l2_bytes")),
    "ai_l1": ("flops.total / l1_bytes", (*FLOP_PATHS, "l1_bytes")),
    "ai_lds": ("flops.total / lds_bytes", (*FLOP_PATHS, "lds_bytes")),
    "l1_hit_rate_pct": ("vL1D hit rate (panel 0200)", ("l1_hit_rate_pct",)),
    "l2_hit_rate_pct": ("L2 hit rate (panel 0200)", ("l2_hit_rate_pct",)),
    "dram_pct_of_peak": ("100 x dram_bytes / duration / $hbm_bw (panel 0200 Pct of Peak)", HBM),
    "compute_pct_of_peak": ("100 x the busiest FLOP path's rate / its peak (panel 0200 Pct of Peak)", FLOP_PATHS),
    "sol_pct": ("100 x achieved / the binding datasheet roof (chips.yaml)", (*FLOP_PATHS, *HBM)),
    "pct_of_achievable": ("100 x achieved / the measured roof (roofline.csv: its mean; the CI from Low, High)",
                          (*FLOP_PATHS, *HBM)),
    "pct_of_achievable_ci": ("[100 x achieved / High, 100 x achieved / Low] of roofline.csv's measured roof",
                             (*FLOP_PATHS, *HBM)),
}
TIMESTAMPS = ("Start_Timestamp", "End_Timestamp")


@lru_cache(maxsize=16)
def field_table(gfx: str) -> list[dict[str, Any]]:
    """The AMD field table of one gfx: field, unit, formula and the counters it reads (empty when the gfx is not in
    formulas.yaml)."""
    arch = formulas_doc().get("archs", {}).get(gfx)
    if not isinstance(arch, dict):
        return []
    formulas = {name: compile_formula(str(text)) for name, text in (arch.get("formulas") or {}).items()}
    units = {f.name: f.unit for f in KERNEL_ROW}
    out = []
    for name, (words, entries) in SOURCES.items():
        counters = sorted({c for e in entries if e in formulas for c in formulas[e].counters}
                          | {f"${v}" for e in entries if e in formulas for v in formulas[e].sysvars}
                          | (set(TIMESTAMPS) if name == "duration_ns" or "duration" in words else set()))
        out.append({"field": name, "unit": units.get(name), "formula": words,
                    "metrics": counters or ["no counter of this gfx: not captured"]})
    return out


def field_tables() -> dict[str, list[dict[str, Any]]]:
    """Every gfx's field table, by gfx (formulas.yaml's archs)."""
    return {gfx: field_table(gfx) for gfx in sorted(formulas_doc().get("archs", {}))}
