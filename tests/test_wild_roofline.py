"""Real captures made elsewhere (tests/data/wild, README there): ncu's own roofline numbers, %SoL against the
capture's own GPU, and the inputs to refuse (issue 28.3 and its done-when).

Expected values are computed here from the reports with NVIDIA's `ncu_report` module, the way ncu's
`SpeedOfLight_RooflineChart` section defines them (its body metrics, read from the section itself):

    achieved FP32 FLOP/s = (fadd + fmul + derived__..._ffma_pred_on_x2) per elapsed cycle x smsp__cycles_elapsed.avg
                           .per_second  (the `smsp__sass_thread_inst_executed_op_*_pred_on.sum.per_cycle_elapsed`
                           rates; `_x2` is 2 x ffma); FP64 likewise with d*; FP16 2 x hadd + 2 x hmul + 4 x hfma
    DRAM B/s = dram__bytes.sum.per_second;  AI per precision = FLOP/s / DRAM B/s
    peaks: derived__sm__..._ffma_pred_on_x2 x sm__cycles_elapsed.avg.per_second (FP32; dfma for FP64),
           dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second (DRAM)

and cross-checked against InstructionStats' per-opcode thread-instruction counts (FADD + FMUL + 2 FFMA) where the
report has them. Executed FLOPs = rate x gpu__time_duration.sum. Literal numbers come only from
/work/shared/data/wild/README.md (test_the_readmes_values). The CSV (leleucas) is read with the csv module.
Never from perfreport.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import ncu_report  # NVIDIA's module, as perfreport/ncu/rep/child.py imports it
import pytest
from conftest import run_cli, write_config

from perfreport.config.ceilings import ceiling_kind, load_ceilings
from perfreport.kernels.cells import ImportResult
from perfreport.ncu.importer import import_ncu

WILD = Path(__file__).resolve().parent / "data" / "wild"
REPORTS = sorted([*WILD.glob("**/*.ncu-rep"), *WILD.glob("**/*.ncu-rep.gz")])
SGLANG = WILD / "sglang-h800" / "sglang_profile.ncu-rep.gz"
MISTIC = WILD / "mistic-a100pcie" / "bwd29_profile.out.ncu-rep"
INDEXSPACES = WILD / "indexspaces" / "indexspaces_profile.ncu-rep.gz"
CUTLASS = WILD / "panjd123-cutlass" / "cutlass_report.ncu-rep.gz"
SPEEDY = WILD / "speedy-scan-3070" / "thedavidchu_profile.ncu-rep"
LELEUCAS = WILD / "leleucas-a100-csv" / "leleucas_bert_flashattn_nsight.csv"
POLY_READ_ONLY = WILD / "polyfhe" / "polyfhe_memtransfer-opt.csv"
POLY_TEXT = WILD / "polyfhe" / "polyfhe_ncu_opt_text.csv"
ROOFLINE = "SpeedOfLight_RooflineChart"
REL = 1e-6  # ours vs ncu's: the same counters through the same formula; only float rounding may differ
RATE = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
# ncu's weighted twins of the FMA rates (the roofline sections' body metrics name these, not the plain rate)
WEIGHTED = {"ffma": "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2",
            "dfma": "derived__smsp__sass_thread_inst_executed_op_dfma_pred_on_x2",
            "hadd": "derived__smsp__sass_thread_inst_executed_op_hadd_pred_on_x2",
            "hmul": "derived__smsp__sass_thread_inst_executed_op_hmul_pred_on_x2",
            "hfma": "derived__smsp__sass_thread_inst_executed_op_hfma_pred_on_x4"}
# FLOPs per instruction of ncu's charts: (op, weight) per precision; half instructions are packed pairs
TERMS = {"fp32": (("fadd", 1), ("fmul", 1), ("ffma", 2)), "fp64": (("dadd", 1), ("dmul", 1), ("dfma", 2)),
         "fp16": (("hadd", 2), ("hmul", 2), ("hfma", 4))}
OPCODES = {"fp32": {"FADD": 1, "FADD32I": 1, "FMUL": 1, "FMUL32I": 1, "FFMA": 2, "FFMA32I": 2},
           "fp64": {"DADD": 1, "DMUL": 1, "DFMA": 2}}
PEAK = {"fp32": "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2",
        "fp64": "derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2"}
DRAM_PCT = ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed")
CEILINGS = load_ceilings()


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(WILD)) for p in paths]


# --- ncu's side, read with ncu_report ----------------------------------------------------------------------------


@dataclass
class NcuLaunch:
    """One launch as ncu shows it. Rates per second; None where the report holds no value (or NaN)."""

    index: int
    function: str
    gpu: str | None
    cc: str | None
    sections: list[str]
    duration_ns: float | None
    flop_per_s: dict[str, float | None]  # fp32, fp64, fp16: None where a term's counter is not in the report
    dram_per_s: float | None
    peaks: dict[str, float | None]  # fp32, fp64 (FLOP/s), dram (B/s)
    dram_pct: float | None  # ncu's own DRAM throughput, % of its peak at the measured clock
    cycles: float | None  # smsp__cycles_elapsed.avg.per_second x duration: the elapsed cycles per SMSP
    opcodes: dict[str, float] = field(default_factory=dict)  # InstructionStats: thread instructions per opcode

    def has_roofline(self) -> bool:
        return ROOFLINE in self.sections

    def flops(self, precision: str) -> float | None:
        rate = self.flop_per_s[precision]
        return None if rate is None or self.duration_ns is None else rate * self.duration_ns * 1e-9

    def dram_bytes(self) -> float | None:
        if self.dram_per_s is None or self.duration_ns is None:
            return None
        return self.dram_per_s * self.duration_ns * 1e-9

    def shown(self) -> dict[str, float]:
        """The precisions the report counts, with their FLOP/s (ncu's chart points)."""
        return {p: v for p, v in self.flop_per_s.items() if v is not None}

    def ai(self) -> float | None:
        """Sum of ncu's per-precision AIs: FLOP/s of every precision counted / DRAM B/s."""
        shown = self.shown()
        return sum(shown.values()) / self.dram_per_s if shown and self.dram_per_s else None


def _value(metric: Any) -> Any:
    if metric is None or not metric.has_value():
        return None
    v = metric.value()
    return None if isinstance(v, float) and math.isnan(v) else v


def _per_opcode(action: Any) -> dict[str, float]:
    m = action.metric_by_name("sass__thread_inst_executed_true_per_opcode")
    if m is None or not m.has_value() or m.num_instances() == 0:
        return {}
    ids = m.correlation_ids()
    return {ids.as_string(i): m.as_double(i) for i in range(m.num_instances())}


def _launch(index: int, action: Any) -> NcuLaunch:
    sections = [s.identifier() for s in action.sections()]
    body: dict[str, Any] = {}
    for s in action.sections():
        if s.identifier() == ROOFLINE:  # the section's own metrics first (ncu draws the chart from them)
            body = {m.name(): _value(m) for m in s.body_metrics()}

    def get(name: str) -> float | None:
        v = body[name] if name in body else _value(action.metric_by_name(name))
        return None if v is None or isinstance(v, str) else float(v)

    def per_cycle(op: str) -> float | None:
        weighted = get(WEIGHTED[op]) if op in WEIGHTED else None
        if weighted is not None:
            return weighted  # already x its weight
        rate = get(RATE.format(op))
        return None if rate is None else dict(TERMS["fp16"] + TERMS["fp32"] + TERMS["fp64"])[op] * rate

    hz = get("smsp__cycles_elapsed.avg.per_second")
    flop_per_s: dict[str, float | None] = {}
    for precision, terms in TERMS.items():
        rates = [per_cycle(op) for op, _ in terms]
        flop_per_s[precision] = None if hz is None or any(r is None for r in rates) else \
            sum(r for r in rates if r is not None) * hz
    sm_hz, dram_hz = get("sm__cycles_elapsed.avg.per_second"), get("dram__cycles_elapsed.avg.per_second")
    peaks: dict[str, float | None] = {
        p: (v * sm_hz if (v := get(m)) is not None and sm_hz is not None else None) for p, m in PEAK.items()}
    bpc = get("dram__bytes.sum.peak_sustained")
    peaks["dram"] = bpc * dram_hz if bpc is not None and dram_hz is not None else None
    dur = get("gpu__time_duration.sum")
    major = _value(action.metric_by_name("device__attribute_compute_capability_major"))
    minor = _value(action.metric_by_name("device__attribute_compute_capability_minor"))
    name = _value(action.metric_by_name("device__attribute_display_name"))
    dram_pct = next((v for m in DRAM_PCT if (v := get(m)) is not None), None)
    return NcuLaunch(
        index=index, function=action.name(ncu_report.IAction.NameBase_FUNCTION), gpu=name,
        cc=f"{major}.{minor}" if major is not None and minor is not None else None, sections=sections,
        duration_ns=dur, flop_per_s=flop_per_s, dram_per_s=get("dram__bytes.sum.per_second"), peaks=peaks,
        dram_pct=dram_pct, cycles=hz * dur * 1e-9 if hz is not None and dur is not None else None,
        opcodes=_per_opcode(action))


@cache
def ncu_launches(path: Path) -> tuple[NcuLaunch, ...]:
    """Every launch of a report as ncu_report reads it (a .gz is gunzipped into a temp folder first)."""
    with tempfile.TemporaryDirectory(prefix="wild-ncu-") as tmp:
        plain = path
        if path.suffix == ".gz":
            plain = Path(tmp) / path.name[: -len(".gz")]
            with gzip.open(path, "rb") as src, plain.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        ctx = ncu_report.load_report(str(plain))
        actions = [ctx.range_by_idx(r).action_by_idx(i) for r in range(ctx.num_ranges())
                   for i in range(ctx.range_by_idx(r).num_actions())]
        return tuple(_launch(i, a) for i, a in enumerate(actions))


def token_for(path: Path) -> str:
    """The hardware token of the GPU the report was captured on (its display name and compute capability)."""
    first = ncu_launches(path)[0]
    token = CEILINGS.hardware_for_device(first.gpu, first.cc)
    assert token is not None, f"{path.name}: no hardware token for {first.gpu!r} (cc {first.cc})"
    return token


# --- our side: the importer ----------------------------------------------------------------------------------


@dataclass
class Imported:
    result: ImportResult
    kernels: list[dict[str, Any]]
    hardware: str

    def launches(self) -> dict[int, dict[str, Any]]:
        """Our derived row of every launch by launch id (a kernel row's per_launch rows, or the row itself)."""
        out: dict[int, dict[str, Any]] = {}
        for k in self.kernels:
            rows = k["per_launch"] or [dict(k, launch_id=k["launch_ids"][0])]
            assert [r["launch_id"] for r in rows] == k["launch_ids"], k["name"][:80]
            out.update({r["launch_id"]: r for r in rows})
        return out

    def kernel_of(self, launch_id: int) -> dict[str, Any]:
        return next(k for k in self.kernels if launch_id in k["launch_ids"])


def imported(path: Path, tmp: Path, hardware: str) -> Imported:
    camp = write_config(tmp / f"camp-{hardware}", hardware=hardware)
    result = import_ncu(camp, "c1", path)
    data = json.loads(result.path.read_text())
    assert data["hardware"] == hardware
    return Imported(result, data["kernels"], hardware)


@pytest.fixture(scope="module")
def own_gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Imported]:
    """Every wild report imported into a campaign whose hardware is the token of the report's own GPU."""
    tmp = tmp_path_factory.mktemp("wild")
    return {p: imported(p, tmp / p.parent.name / p.name, token_for(p)) for p in REPORTS}


def _close(ours: float | None, theirs: float | None, rel: float = REL) -> bool:
    if ours is None or theirs is None:
        return ours is None and theirs is None
    return ours == pytest.approx(theirs, rel=rel, abs=1e-12)


# --- the tests -----------------------------------------------------------------------------------------------


def test_the_data_is_all_there() -> None:
    """Ten folders of real artifacts, each with its SOURCE.txt and LICENSE.txt; the reports that hold ncu's roofline
    section and those that do not are both among them."""
    folders = sorted(p.name for p in WILD.iterdir() if p.is_dir())
    assert folders == ["hyperspec-2060mq", "indexspaces", "leleucas-a100-csv", "mistic-a100pcie", "mojo-1660ti",
                       "panjd123-cutlass", "polyfhe", "sglang-h800", "speedy-scan-3070", "yzwang-cudacode"]
    for folder in folders:
        assert (WILD / folder / "SOURCE.txt").is_file() and (WILD / folder / "LICENSE.txt").is_file(), folder
    with_section = {p.parent.name for p in REPORTS if any(k.has_roofline() for k in ncu_launches(p))}
    assert with_section == {"indexspaces", "sglang-h800", "mistic-a100pcie", "speedy-scan-3070", "panjd123-cutlass"}
    assert len(REPORTS) == 8


def test_the_expectation_agrees_with_instruction_stats() -> None:
    """ncu's chart values (rate x elapsed cycles) equal InstructionStats' per-opcode counts, to 1e-6: the expected
    numbers the other tests hold ours to are ncu's, read two ways. Elapsed cycles = rate x duration = sum / SMSPs."""
    checked = 0
    for path in REPORTS:
        for k in ncu_launches(path):
            if not (k.has_roofline() and k.opcodes and k.duration_ns):
                continue
            for precision, weights in OPCODES.items():
                counted = sum(w * k.opcodes.get(op, 0.0) for op, w in weights.items())
                assert k.flops(precision) == pytest.approx(counted, rel=REL, abs=1e-6), (path.name, k.index)
            checked += 1
    assert checked >= 14  # indexspaces 5, mistic 4, panjd123 3, sglang 4 (the NaN launch has no counts), speedy 1


@pytest.mark.parametrize("path", [p for p in REPORTS if any(k.has_roofline() for k in ncu_launches(p))],
                         ids=_ids([p for p in REPORTS if any(k.has_roofline() for k in ncu_launches(p))]))
def test_flops_and_ai_per_precision_equal_ncus_roofline_section(path: Path, own_gpu: dict[Path, Imported]) -> None:
    """Per launch: executed FP32/FP64/FP16 FLOPs, DRAM bytes, achieved FLOP/s and AI equal what ncu's
    SpeedOfLight_RooflineChart shows (rate x duration), within 1e-6. A precision the report does not count is null,
    never 0; AI is the sum of the shown precisions' AIs, null only where ncu shows no point (no counters, NaN)."""
    ours = own_gpu[path].launches()
    theirs = ncu_launches(path)
    assert sorted(ours) == [k.index for k in theirs]
    wrong: list[str] = []

    def check(k: NcuLaunch, what: str, got: Any, want: Any) -> None:
        if isinstance(want, bool) or want is None or isinstance(got, bool) or got is None:
            ok = got == want
        else:
            ok = _close(got, want)
        if not ok:
            wrong.append(f"{path.name} launch {k.index} ({k.function}): {what} ours {got!r} vs ncu {want!r}")

    for k in theirs:
        row = ours[k.index]
        fl = row["flops"] or {}
        check(k, "duration_ns", row["duration_ns"], k.duration_ns)
        for precision in TERMS:
            check(k, f"flops.{precision}", fl.get(precision), k.flops(precision))
        check(k, "dram_bytes", row["dram_bytes"], k.dram_bytes())
        dram = row["dram_bytes"]
        for precision in k.shown():  # AI per precision: the chart's points
            mine = fl.get(precision) / dram if fl.get(precision) is not None and dram else None
            want = k.flop_per_s[precision] / k.dram_per_s if k.dram_per_s else None  # type: ignore[operator]
            check(k, f"AI {precision} (flops.{precision} / dram_bytes)", mine, want)
        shown = k.shown()
        check(k, "achieved_tflops", row["achieved_tflops"], sum(shown.values()) / 1e12 if shown else None)
        check(k, "arithmetic_intensity", row["arithmetic_intensity"], k.ai())
        check(k, "ai_measured", row["ai_measured"], k.ai() is not None)
        if k.ai() is None:
            assert row["arithmetic_intensity"] is None, (path.name, k.index)  # never 0 for a missing one
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_sol_is_against_the_captures_own_gpu(path: Path, own_gpu: dict[Path, Imported]) -> None:
    """Imported into a campaign of the report's own GPU token, every roof is that GPU's; our DRAM %-of-peak equals
    ncu's own DRAM throughput % (the same bytes over ncu's peak dram__bytes.sum.peak_sustained x the DRAM clock
    measured during the kernel: 1e-6 relative, float rounding only; gpu__dram_throughput is the max of the DRAM
    throughput breakdowns, the bytes one on every launch here). %SoL against the datasheet DRAM roof is ncu's % x
    (ncu's peak at the measured clock / the datasheet peak): that factor lies in [0.6, 1.05] on the right GPU
    (GDDR clocked down during a short launch: 0.71 on the A40) and is far outside it against another GPU's roof
    (an RTX 3070 against H100 HBM: 0.13)."""
    imp = own_gpu[path]
    token = imp.hardware
    ours = imp.launches()
    keyed = 0
    for k in ncu_launches(path):
        row = ours[k.index]
        for key_field in ("sol_ceiling_key", "family_ceiling_key", "achievable_key"):
            key = row[key_field]
            assert key is None or key.startswith(token + "."), (path.name, k.index, key_field, key)
            keyed += key is not None
        assert _close(row["dram_throughput_pct"], k.dram_pct), (path.name, k.index, row["dram_throughput_pct"])
        if row["dram_bytes"] is not None and k.dram_pct is not None:
            assert _close(row["dram_pct_of_peak"], k.dram_pct), (path.name, k.index, row["dram_pct_of_peak"],
                                                                   k.dram_pct)
            assert _close(row["ncu_peaks"]["dram_tbps"], k.peaks["dram"] / 1e12), (path.name, k.index)  # type: ignore[operator]
        else:
            assert row["dram_pct_of_peak"] is None, (path.name, k.index)
        key, sol = row["sol_ceiling_key"], row["sol_pct"]
        if sol is None:
            continue
        kind, _ = ceiling_kind(key.split(".")[-1])
        if kind == "memory":
            assert sol == pytest.approx(100 * row["achieved_dram_tbps"] / CEILINGS.value(key), rel=1e-9)
            factor = sol / k.dram_pct if k.dram_pct else None
            assert factor is not None and 0.6 <= factor <= 1.05, (path.name, k.index, key, sol, k.dram_pct)
            assert factor == pytest.approx(k.peaks["dram"] / 1e12 / CEILINGS.value(key), rel=1e-6)  # type: ignore[operator]
        else:
            assert kind == "compute", key
            assert sol == pytest.approx(100 * row["achieved_tflops"] / CEILINGS.value(key), rel=1e-9)
    assert keyed, f"{path.name}: no roof named at all"


@pytest.mark.parametrize("path", [p for p in REPORTS if any(k.has_roofline() for k in ncu_launches(p))],
                         ids=_ids([p for p in REPORTS if any(k.has_roofline() for k in ncu_launches(p))]))
def test_ncu_peaks_are_the_sections(path: Path, own_gpu: dict[Path, Imported]) -> None:
    """The per-kernel peaks (ncu_peaks) are the section's: DRAM always; compute the roof of the precision that did
    the kernel's CUDA-core work (FP64 for the mistic DADD/DFMA kernel, FP32 otherwise), so the ridge is ncu's."""
    ours = own_gpu[path].launches()
    wrong = []
    for k in ncu_launches(path):
        row, shown = ours[k.index], k.shown()
        if not shown or k.peaks["fp32"] is None:
            continue
        precision = "fp64" if shown.get("fp64", 0.0) > shown.get("fp32", 0.0) else "fp32"
        want = k.peaks[precision] / 1e12  # type: ignore[operator]
        got = row["ncu_peaks"]["compute_tflops"]
        if not _close(got, want):
            wrong.append(f"{path.name} launch {k.index} ({k.function}): ncu_peaks.compute_tflops ours {got} vs "
                         f"ncu's {precision} peak {want} (fp32 {k.peaks['fp32'] / 1e12}, fp64 "  # type: ignore[operator]
                         f"{k.peaks['fp64'] / 1e12})")  # type: ignore[operator]
    assert not wrong, "\n".join(wrong)


def test_the_readmes_values_are_ncus() -> None:
    """The numbers /work/shared/data/wild/README.md gives equal what ncu_report reads here (the expectations the
    tests hold ours to are the README's)."""
    k = ncu_launches(SGLANG)[2]  # 52,760 cycles, FP32 231,718,912 FLOP, DRAM 21,469,696 B (AI 10.79 FLOP/B)
    assert k.cycles == pytest.approx(52_760, abs=0.5)
    assert k.flops("fp32") == pytest.approx(231_718_912, rel=REL) and k.flops("fp64") == 0.0
    assert k.dram_bytes() == pytest.approx(21_469_696, rel=REL) and k.ai() == pytest.approx(10.79, abs=0.005)
    assert k.flops("fp16") is None  # FP16 counters absent (HFMA2 runs)
    assert k.peaks["fp32"] == pytest.approx(53.2e12, rel=0.01)  # ncu's peaks: FP32 53.2 TFLOP/s ...
    assert ncu_launches(SGLANG)[0].peaks["dram"] == pytest.approx(3.34e12, rel=0.005)  # ... DRAM 3.34 TB/s
    k = ncu_launches(MISTIC)[0]  # FP64 2.2877e12 FLOP over 1.6046e12 DRAM bytes; peaks FP64 5.29 TFLOP/s, 1.56 TB/s
    assert k.flops("fp64") == pytest.approx(2.2877e12, rel=1e-4) and k.flops("fp32") == 0.0
    assert k.dram_bytes() == pytest.approx(1.6046e12, rel=1e-4)
    assert k.peaks["fp64"] == pytest.approx(5.29e12, rel=0.005) and k.peaks["dram"] == pytest.approx(1.56e12, rel=0.01)
    k = ncu_launches(INDEXSPACES)[4]  # julia_frb_5885, 4,283,936 ns: 5,569,264.6 cycles = smsp__cycles_elapsed.sum/336
    assert k.function == "julia_frb_5885" and k.duration_ns == 4_283_936
    assert k.cycles == pytest.approx(5_569_264.6, abs=0.05)
    assert k.flops("fp32") == pytest.approx(6_181_056, rel=REL)
    assert k.dram_bytes() == pytest.approx(1_996_068_736, rel=REL)
    (k,) = ncu_launches(SPEEDY)  # 336,704 ns, DRAM 78,334,208 B, no FP instruction; DRAM 53.4 % of 0.436 TB/s
    assert k.duration_ns == 336_704 and k.dram_bytes() == pytest.approx(78_334_208, rel=REL) and k.ai() == 0.0
    assert k.dram_pct == pytest.approx(53.4, abs=0.05) and k.peaks["dram"] == pytest.approx(0.436e12, rel=0.005)


def test_our_rows_hold_the_readmes_values(own_gpu: dict[Path, Imported]) -> None:
    """The README's numbers on our rows: every mismatch listed (file, launch, field, ours vs the README's)."""
    wrong: list[str] = []

    def want(path: Path, launch: int, name: str, expected: float, rel: float = REL, abs_: float = 0.0) -> None:
        row = own_gpu[path].launches()[launch]
        got = row["flops"][name.split(".")[1]] if name.startswith("flops.") and row["flops"] else row.get(name)
        if got is None or got != pytest.approx(expected, rel=rel, abs=abs_):
            wrong.append(f"{path.name} launch {launch}: {name} ours {got!r} vs README {expected!r}")

    want(SGLANG, 2, "flops.fp32", 231_718_912)
    want(SGLANG, 2, "dram_bytes", 21_469_696)
    want(SGLANG, 2, "arithmetic_intensity", 10.79, abs_=0.005)
    want(MISTIC, 0, "flops.fp64", 2.2877e12, rel=1e-4)
    want(MISTIC, 0, "dram_bytes", 1.6046e12, rel=1e-4)
    want(MISTIC, 0, "arithmetic_intensity", 2.2877e12 / 1.6046e12, rel=2e-4)
    want(INDEXSPACES, 4, "flops.fp32", 6_181_056)
    want(INDEXSPACES, 4, "dram_bytes", 1_996_068_736)
    want(INDEXSPACES, 4, "arithmetic_intensity", 6_181_056 / 1_996_068_736)
    want(SPEEDY, 0, "dram_bytes", 78_334_208)
    want(SPEEDY, 0, "arithmetic_intensity", 0.0)
    want(SPEEDY, 0, "dram_pct_of_peak", 53.4, abs_=0.05)
    want(CUTLASS, 2, "flops.fp32", 2_359_296)
    assert not wrong, "\n".join(wrong)


def test_cutlass_int8_gemms_are_integer_work(own_gpu: dict[Path, Imported]) -> None:
    """panjd123 `report`: the two int8 IMMA GEMMs execute IMMA (the tensor pipe's integer path) and no FP
    instruction: 0 FP32/FP64 FLOPs, no tensor FLOPs counted from integer ops; the B2bGemm does 2,359,296 FP32 FLOPs
    (1,179,648 FFMA) beside its IMMA."""
    theirs, ours = ncu_launches(CUTLASS), own_gpu[CUTLASS].launches()
    assert [k.function for k in theirs] == ["Kernel", "Kernel", "Kernel"]
    for i in (0, 1):
        k, row = theirs[i], ours[i]
        assert k.opcodes["IMMA"] > 0 and k.flops("fp32") == 0.0 and k.flops("fp64") == 0.0
        assert row["flops"]["fp32"] == 0.0 and row["flops"]["fp64"] == 0.0
        assert not row["flops"]["tensor"]  # null (no tensor-path counter in this set) or 0: never int ops as FLOPs
        assert row["tensor_dtype"] in (None, "int8")
    k, row = theirs[2], ours[2]
    assert k.opcodes["IMMA"] > 0 and k.opcodes["FFMA"] == 1_179_648
    assert k.flops("fp32") == pytest.approx(2_359_296, rel=REL)
    assert row["flops"]["fp32"] == pytest.approx(2_359_296, rel=REL)


def test_the_nan_launch_is_named_in_a_warning(own_gpu: dict[Path, Imported]) -> None:
    """sglang-h800 launch 4 (flash_fwd_kernel): ncu stored NaN for every counter (the profile of that launch is empty).
    Its row holds no number (null, never 0), and the import says so by name, not as a silent empty row."""
    k = ncu_launches(SGLANG)[4]
    assert k.function == "flash_fwd_kernel" and k.duration_ns is None and k.dram_per_s is None and not k.shown()
    imp = own_gpu[SGLANG]
    row = imp.kernel_of(4)
    assert row["function"] == "flash_fwd_kernel" and row["launch_ids"] == [4]
    for name in ("duration_ns", "flops", "dram_bytes", "arithmetic_intensity", "achieved_tflops", "sol_pct",
                 "dram_throughput_pct", "sm_throughput_pct"):
        assert row[name] is None, name
    assert row["ai_measured"] is False
    named = [w for w in imp.result.warnings if "flash_fwd_kernel" in w]
    assert named, ("the import does not warn about the all-NaN launch 4 (flash_fwd_kernel) by name; warnings were:\n"
                   + "\n".join(imp.result.warnings))
    assert any("4" in w for w in named), named  # its launch


# --- the CSVs ------------------------------------------------------------------------------------------------


def _nersc_csv() -> dict[int, dict[str, str]]:
    """leleucas' long-format CSV: launch ID -> {metric name: value as printed}."""
    out: dict[int, dict[str, str]] = {}
    with LELEUCAS.open(newline="", encoding="utf-8") as fh:
        for rec in csv.DictReader(fh):
            out.setdefault(int(rec["ID"]), {})[rec["Metric Name"]] = rec["Metric Value"]
    return out


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def test_the_nersc_csv_gives_durations_flops_and_ai(tmp_path: Path) -> None:
    """leleucas-a100-csv (`sm__` counters, plain counts; time = sm__cycles_elapsed.avg / .avg.per_second) imports
    through import_ncu: per launch the duration, FP32/FP64/FP16 FLOPs (ncu's weights) and DRAM bytes equal the
    CSV's. AI is the CUDA-core FLOPs over DRAM bytes where the tensor pipe executed nothing
    (sm__inst_executed_pipe_tensor.sum 0); a launch with tensor instructions has tensor FLOPs no counter here gives
    (an instruction count is no FLOP count, and the CSV names no GPU), so its AI is null or at least that sum's."""
    metrics = _nersc_csv()
    assert sorted(metrics) == list(range(10))
    imp = imported(LELEUCAS, tmp_path, "a100_sm80")  # an A100 (cutlass_80 kernels); the file names no GPU
    ours = imp.launches()
    assert sorted(ours) == list(range(10))
    wrong: list[str] = []
    for i, m in metrics.items():
        row, fl = ours[i], ours[i]["flops"] or {}
        ns = _num(m["sm__cycles_elapsed.avg"]) / _num(m["sm__cycles_elapsed.avg.per_second"]) * 1e9
        count = {op: _num(m[f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"])
                 for terms in TERMS.values() for op, _ in terms}
        want = {p: sum(w * count[op] for op, w in terms) for p, terms in TERMS.items()}
        dram = _num(m["dram__bytes.sum"])
        checks = [("duration_ns", row["duration_ns"], ns), ("dram_bytes", row["dram_bytes"], dram)]
        checks += [(f"flops.{p}", fl.get(p), v) for p, v in want.items()]
        core = sum(want.values()) / dram if dram else None
        tensor = _num(m["sm__inst_executed_pipe_tensor.sum"])
        ai = row["arithmetic_intensity"]
        if tensor == 0 and core is None:  # 0 DRAM bytes (launches 1, 3): no finite AI, never 0
            checks.append(("arithmetic_intensity", ai, None))
        elif tensor == 0:  # no tensor instruction: the CUDA-core FLOPs are all of them
            checks += [("arithmetic_intensity", ai, core), ("ai_measured", row["ai_measured"], True)]
        elif not (ai is None or (core is not None and ai >= core * (1 - REL))):
            wrong.append(f"launch {i}: arithmetic_intensity ours {ai!r}, below the CUDA-core FLOPs' {core!r} "
                         f"({tensor:g} tensor instructions)")
        for name, got, expected in checks:
            ok = got == expected if isinstance(expected, bool) or expected is None else _close(got, expected)
            if not ok:
                wrong.append(f"launch {i} ({imp.kernel_of(i)['function']}): {name} ours {got!r} vs the CSV's "
                             f"{expected!r} (sm__inst_executed_pipe_tensor.sum {tensor:g})")
    assert not wrong, "\n".join(wrong)
    # the README's launch 5 (cutlass_80_wmma_tensorop_f16 GEMM): 7,744 ns, FP32 147,456, FP16 98,304, DRAM 415,488
    row = ours[5]
    assert "cutlass_80_wmma_tensorop_f16" in imp.kernel_of(5)["name"]
    assert row["duration_ns"] == pytest.approx(7_744, rel=1e-6)
    assert row["flops"]["fp32"] == 147_456 and row["flops"]["fp16"] == 98_304 and row["flops"]["fp64"] == 0
    assert row["dram_bytes"] == 415_488
    assert _num(metrics[5]["sm__inst_executed_pipe_tensor.sum"]) == 6_144


def test_a_read_only_dram_csv_has_no_bytes_and_no_ai(tmp_path: Path) -> None:
    """polyfhe_memtransfer-opt.csv holds only dram__bytes_read.sum: DRAM bytes cannot be formed (no write counter),
    so every row's dram_bytes and AI are null (never the read bytes alone, never 0)."""
    imp = imported(POLY_READ_ONLY, tmp_path, "a100_sm80")
    assert len(imp.kernels) == 11 and sum(k["launches"] for k in imp.kernels) == 66
    for k in imp.kernels:
        for row in k["per_launch"] or [k]:
            assert row["dram_bytes"] is None and row["arithmetic_intensity"] is None, k["name"][:60]
            assert row["ai_measured"] is False and row["achieved_dram_tbps"] is None
    assert any("dram__bytes_read.sum" in w for w in imp.result.warnings), imp.result.warnings


def test_ncus_text_output_named_csv_is_refused_clearly(tmp_path: Path) -> None:
    """polyfhe_ncu_opt_text.csv is ncu's text report saved under a .csv name: refused with one clear error saying
    what was expected and how to get it, no traceback, nothing written."""
    camp = write_config(tmp_path / "camp", hardware="a100_sm80")
    run = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(POLY_TEXT), ok=False)
    assert "Traceback" not in run.output and (run.exception is None or isinstance(run.exception, SystemExit))
    assert "polyfhe_ncu_opt_text.csv" in run.output and "no ncu CSV header found" in run.output
    assert "--csv" in run.output  # how to produce a CSV ncu can be read from
    assert not (camp / "cells" / "c1" / "ncu_kernels.json").exists()


def test_the_roofline_says_a_lower_bound_ai_is_one(tmp_path: Path) -> None:
    """sglang-h800 (ncu 2023.3): no tensor-path, no fp16 counter; its RNG kernels' AI are drawn with a note."""
    from perfreport.ncu.importer import import_ncu
    from perfreport.warehouse.gather import gather

    camp = write_config(tmp_path / "camp", hardware="h800_sm90")
    import_ncu(camp, "c1", WILD / "sglang-h800" / "sglang_profile.ncu-rep.gz")
    model = gather(camp).roofline
    lower = [n for n in model.notes if "are lower bounds (tensor, fp16 not counted" in n]
    assert len(lower) == 3 and all("distribution_elementwise_grid_stride_kernel" in n for n in lower)
    assert sum(p.measured for p in model.points) == 3
