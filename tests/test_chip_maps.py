"""The per-chip tensor-path maps (perfreport/ncu/catalog/chips.yaml) held against ncu's committed catalogs.

Every counter a map names exists in its chip's catalog; the summed paths are disjoint by the catalog's own
descriptions (or by the instructions that feed them); every tensor counter of a catalog is summed, excluded with a
reason, or a breakdown of one that is; peaks are dense; GH100 is metrics.yaml; real exports pick their chip.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from perfreport.errors import ConfigError, InputError
from perfreport.ncu.catalog import chips
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.ncu.read import read_export
from perfreport.ncu.rep import wire

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CHIPS_DIR = ROOT / "perfreport" / "ncu" / "catalog" / "chips"
MAPS = chips.load_chip_maps().chips
CATALOGS = [(key, name) for key, m in MAPS.items() for name in m.catalogs]
# the order in which a path's dense peak is taken from its instructions: tcgen05 (UTC*), then warpgroup, then warp
FASTEST_FIRST = ("utchmma", "utcimma", "utcomma", "utcqmma", "hgmma", "igmma", "hmma", "imma")

_DESC = re.compile(
    r"# of math ops executed in Tensor path(?: by (?:op )?[A-Z0-9_]+)?"
    r" with (?:one source (?P<one>[A-Z0-9]+) and other source (?P<other>[A-Z0-9/]+)|source (?P<src>[A-Z0-9/]+))"
    r"(?:(?: and)? destination (?P<dst>[A-Z0-9]+))?(?: with sparsity (?P<sparsity>on|off))?")
_OP = re.compile(r"sm__ops_path_tensor_op_([a-z]+)_src_")


@dataclass(frozen=True)
class Fields:
    """What a tensor counter's description says it counts: its instruction, operand pairs, destination, sparsity."""

    op: str | None  # from the name: `op_utcomma_` (one description says UTCOMMA_K96, its twins UTCOMMA)
    pairs: frozenset[frozenset[str]]  # the unordered operand-type pairs it admits
    dst: str | None
    sparsity: str | None

    def overlaps(self, other: Fields) -> bool:
        """Whether the descriptions admit one op counted by both (a field one leaves open admits anything)."""
        pairs = ((self.op, other.op), (self.dst, other.dst), (self.sparsity, other.sparsity))
        return all(None in (x, y) or x == y for x, y in pairs) and bool(self.pairs & other.pairs)

    def breaks_down(self, total: Fields) -> bool:
        """Whether this counter is `total` split further (by instruction and/or sparsity)."""
        return (self.pairs == total.pairs and total.op is None and total.dst in (None, self.dst)
                and total.sparsity in (None, self.sparsity) and (self.op, self.sparsity) != (None, total.sparsity))


def fields(metric: str, description: str) -> Fields:
    """Parse one `sm__ops_path_tensor_*` description (the catalog's words are the evidence)."""
    m = _DESC.fullmatch(description)
    assert m is not None, f"{metric}: description not understood: {description!r}"
    if m["src"]:
        types = m["src"].split("/")
        pairs = frozenset(frozenset((a, b)) for a in types for b in types)
    else:
        pairs = frozenset(frozenset((m["one"], b)) for b in m["other"].split("/"))
    op = _OP.match(metric)
    return Fields(op[1] if op else None, pairs, m["dst"], m["sparsity"])


def base(metric: str) -> str:
    return metric.split(".", 1)[0]


def tensor_fields(catalog: str) -> dict[str, Fields]:
    """Every tensor-path counter of a catalog except the `_realtime` twins, parsed."""
    desc = chips.catalog(catalog)
    return {n: fields(n, d) for n, d in desc.items()
            if n.startswith(chips.TENSOR_PREFIX) and not n.endswith("_realtime")}


def instructions(total: str, parsed: dict[str, Fields]) -> set[str]:
    """The instructions whose counters break `total` down (an aggregate is the sum of those with its operands)."""
    return {f.op for n, f in parsed.items() if f.op is not None and f.breaks_down(parsed[total])}


# -- the counters exist ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "name"), CATALOGS)
def test_every_counter_a_map_names_is_in_that_chips_catalog(key: str, name: str) -> None:
    plain, full = chips.catalog_metrics(name), set(chips.catalog(name, suffix=True))
    m = MAPS[key]
    named = [p.flops for p in m.paths.values()] + [p.peak for p in m.paths.values()]
    assert [n for n in named if n not in full] == []
    assert [base(n) for n in named if base(n) not in plain] == []
    assert [e.metric for e in m.excluded if e.metric not in plain] == []
    # the lookup can fail: Hopper's warpgroup counters are in no Blackwell catalog
    hgmma = "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off"
    assert (hgmma in plain) == (key == "gh100")


def test_catalogs_are_the_committed_ncu_dumps() -> None:
    files = sorted(p.name for p in CHIPS_DIR.glob("*.csv.gz"))
    dumped = sorted({n for _, n in CATALOGS})
    assert files == sorted([f"metrics_{c}.csv.gz" for c in dumped] + [f"metrics_{c}_suffix.csv.gz" for c in dumped])
    readme = (CHIPS_DIR / "README.md").read_text(encoding="utf-8")
    assert all(f in readme for f in files) and chips.load_chip_maps().ncu_version in readme
    assert sum(p.stat().st_size for p in CHIPS_DIR.iterdir()) < 1_600_000  # shipped in the wheel (1.53 MB)
    assert len(chips.catalog_metrics("gh100")) == 3650 and len(chips.catalog_metrics("gb202")) == 3837
    # a map names several catalogs only where they are one catalog
    for m in MAPS.values():
        for suffix in (False, True):
            assert all(chips.catalog(c, suffix) == chips.catalog(m.key, suffix) for c in m.catalogs)
    assert chips.catalog("gb20b") != chips.catalog("gb202")  # DGX Spark: no dram__ counters
    assert chips.catalog("ga10b") != chips.catalog("ga102")  # Jetson Orin: mcc__ instead of dram__
    assert chips.catalog("tu116") != chips.catalog("tu102") and chips.catalog("ga100") != chips.catalog("ga102")
    # every chip ncu 2025.3.1 lists is dumped and mapped; Volta is not in its list
    listed = (CHIPS_DIR / "chips.txt").read_text(encoding="utf-8").strip().split(", ")
    assert sorted(listed) == dumped
    with pytest.raises(InputError, match="no catalog"):
        chips.catalog("gv100")


# -- GH100: what derivation reads on Hopper ---------------------------------------------------------------------------


def test_gh100_map_is_what_the_readers_extract_and_derivation_sums() -> None:
    cat, paths = load_catalog(), chips.tensor_paths("gh100")
    assert {p.flops for p in paths.values()} <= set(cat.tensor_flops) <= set(cat.needed())
    assert {p.peak for p in paths.values()} <= set(cat.tensor_peak_per_cycle) <= set(cat.needed())
    assert {k for k, p in paths.items() if not p.integer} == {"bf16", "fp16", "tf32", "fp8", "fp8_sparse", "fp64"}
    assert paths["bf16"].flops == "sm__ops_path_tensor_src_bf16_dst_fp32.sum"
    # the byte reader knows the unit of every Hopper path it extracts (metrics.yaml rep_units)
    assert {p.flops for p in paths.values()} | {p.peak for p in paths.values()} <= set(cat.rep_units)


# -- the summed paths are disjoint -----------------------------------------------------------------------------------


def _key_of(metric: str) -> str:
    tail = base(metric).removeprefix("sm__ops_path_tensor_src_").replace("_dst_fp32", "")
    return tail.replace("_sparsity_off", "").replace("_sparsity_on", "_sparse")


@pytest.mark.parametrize("key", list(MAPS))
def test_path_keys_name_their_counters(key: str) -> None:
    assert {k: _key_of(p.flops) for k, p in MAPS[key].paths.items()} == {k: k for k in MAPS[key].paths}


def _unresolved_overlaps(key: str, name: str) -> set[frozenset[str]]:
    """Pairs of summed paths whose descriptions overlap and whose instructions do not tell them apart."""
    parsed, paths = tensor_fields(name), MAPS[key].paths
    out = set()
    for a, b in itertools.combinations(paths, 2):
        fa, fb = base(paths[a].flops), base(paths[b].flops)
        if parsed[fa].overlaps(parsed[fb]):
            ia, ib = instructions(fa, parsed), instructions(fb, parsed)
            if not (ia and ib and not ia & ib):
                out.add(frozenset((a, b)))
    return out


@pytest.mark.parametrize(("key", "name"), CATALOGS)
def test_summed_paths_are_disjoint_aggregates(key: str, name: str) -> None:
    parsed = tensor_fields(name)
    for p in MAPS[key].paths.values():
        assert parsed[base(p.flops)].op is None, f"{p.flops} is one instruction's share, not the aggregate"
    # what the descriptions cannot separate is declared, and nothing more
    assert _unresolved_overlaps(key, name) == {frozenset(p) for p in MAPS[key].inferred_disjoint}


def test_disjointness_check_catches_a_breakdown_and_a_total() -> None:
    gh = tensor_fields("gh100")
    total, dense = gh["sm__ops_path_tensor_src_fp8"], gh["sm__ops_path_tensor_src_fp8_sparsity_off"]
    assert total.overlaps(dense) and dense.breaks_down(total) and not total.breaks_down(dense)
    hg = gh["sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32"]
    assert hg.breaks_down(gh["sm__ops_path_tensor_src_bf16_dst_fp32"])
    assert not gh["sm__ops_path_tensor_src_fp16"].overlaps(gh["sm__ops_path_tensor_src_bf16_dst_fp32"])
    # GB100: FP4 and FP4/FP6/FP8 overlap in words; UTCOMMA and UTCQMMA feed them
    gb = tensor_fields("gb100")
    fp4, f8f6f4 = "sm__ops_path_tensor_src_fp4_dst_fp32", "sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32"
    assert gb[fp4].overlaps(gb[f8f6f4])
    assert (instructions(fp4, gb), instructions(f8f6f4, gb)) == ({"utcomma"}, {"utcqmma"})
    assert instructions("sm__ops_path_tensor_src_bf16_dst_fp32", gb) == {"hmma", "utchmma"}
    # GB202: one source FP8 is apart from FP4/FP6; FP4 and FP4/FP6 only by inference
    g2 = tensor_fields("gb202")
    assert not g2["sm__ops_path_tensor_src_fp8_dst_fp32"].overlaps(g2["sm__ops_path_tensor_src_fp4_fp6_dst_fp32"])
    assert instructions("sm__ops_path_tensor_src_fp4_dst_fp32", g2) == set()
    assert _unresolved_overlaps("gb202", "gb202") == {frozenset(("fp4", "fp4_fp6"))}


# -- every tensor counter is accounted for ---------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "name"), CATALOGS)
def test_every_tensor_counter_is_summed_excluded_or_a_breakdown(key: str, name: str) -> None:
    desc, parsed, m = chips.catalog(name), tensor_fields(name), MAPS[key]
    tops = {base(p.flops) for p in m.paths.values()} | {e.metric for e in m.excluded}
    twins = [n for n in desc if n.startswith(chips.TENSOR_PREFIX) and n.endswith("_realtime")]
    assert [n for n in twins if n.removesuffix("_realtime") not in desc] == []
    loose = [n for n, f in parsed.items() if n not in tops and not any(f.breaks_down(parsed[t]) for t in tops)]
    assert loose == []


@pytest.mark.parametrize(("key", "name"), CATALOGS)
def test_excluded_aggregates_are_covered_or_apart(key: str, name: str) -> None:
    parsed, m = tensor_fields(name), MAPS[key]
    for e in m.excluded:
        summed = {k: parsed[base(p.flops)] for k, p in m.paths.items()}
        if e.covered_by:
            assert all(summed[k].breaks_down(parsed[e.metric]) for k in e.covered_by)
            assert {summed[k].sparsity for k in e.covered_by} == {"on", "off"}  # the whole total, split
        else:
            assert [k for k, f in summed.items() if f.overlaps(parsed[e.metric])] == []
    if key == "gh100":
        assert {e.metric: e.covered_by for e in m.excluded} == {
            "sm__ops_path_tensor_src_fp8": ("fp8", "fp8_sparse"), "sm__ops_path_tensor_src_int1": ()}


# -- peaks -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "name"), CATALOGS)
def test_peaks_are_dense_on_the_fastest_instruction(key: str, name: str) -> None:
    parsed = tensor_fields(name)
    for k, p in MAPS[key].paths.items():
        path, peak = base(p.flops), base(p.peak)
        assert p.peak.endswith(".sum.peak_sustained")
        assert peak == path or parsed[peak].breaks_down(parsed[path])
        dense = [n for n, f in parsed.items() if f.sparsity == "off" and f.breaks_down(parsed[path])]
        if parsed[path].sparsity is not None or not dense:
            assert parsed[peak].sparsity in (None, parsed[path].sparsity), p.peak
            continue
        best = min(dense, key=lambda n: FASTEST_FIRST.index(parsed[n].op) if parsed[n].op else len(FASTEST_FIRST))
        assert peak == best, f"{key}.{k}: expected {best}, got {peak}"


def test_h200_peaks_show_why_aggregate_peaks_are_not_dense() -> None:
    """The H200 report's per-cycle peaks: an aggregate's is its sparse instruction's, the dense one half of it."""
    rows = list(csv.reader((DATA / "h200_oracle" / "oracle_full-raw.csv").open(newline="")))
    value = {h: float(v.replace(",", "")) for h, v in zip(rows[0], rows[2], strict=True)
             if h.startswith(chips.TENSOR_PREFIX) and h.endswith(".sum.peak_sustained")}
    peak = {k: value[p.peak] for k, p in chips.tensor_paths("gh100").items()}
    assert peak["bf16"] == 540_672 == value["sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained"] / 2
    assert value["sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained"] == 270_336
    assert peak["tf32"] == 270_336  # the dense one: the aggregate's 540,672 allows sparsity


# -- detection -------------------------------------------------------------------------------------------------------


def _raw_device(path: Path) -> dict[str, str]:
    rows = list(csv.reader(path.open(newline="")))
    return dict(zip(rows[0], rows[2], strict=True))


@pytest.mark.parametrize("export", ["h200_oracle/oracle_full-raw.csv", "h200_oracle/oracle_basic.ncu-rep.gz",
                                    "h100_oracle/oracle_full-raw.csv", "h100_oracle/oracle_basic-raw.csv"])
def test_real_hopper_exports_pick_gh100(export: str) -> None:
    capture = read_export(DATA / export)
    (cc,) = {la.cc for la in capture.launches}
    assert (capture.gpu, cc) in {("NVIDIA H200", "9.0"), ("NVIDIA H100 80GB HBM3", "9.0")}
    assert chips.chip_for(capture.gpu, cc) == "gh100"
    if export.endswith(".csv"):
        raw = _raw_device(DATA / export)
        assert raw["device__attribute_chip"] == "384"
        assert chips.chip_for(raw["device__attribute_display_name"], raw["CC"], raw["device__attribute_chip"]) \
            == "gh100"


def test_a_b200_details_log_without_device_name_picks_gb100_by_cc() -> None:
    capture = read_export(DATA / "public_csv" / "public_microsoft-superbenchmark_details-page_long_sm100_ncu2025.log")
    assert capture.gpu is None and {la.cc for la in capture.launches} == {"10.0"}
    assert chips.chip_for(capture.gpu, "10.0") == "gb100"


@pytest.mark.parametrize(("name", "cc", "chip", "want"), [
    ("NVIDIA B200", "10.0", None, "gb100"),
    ("NVIDIA GB300", "10.3", None, "gb110"),
    ("NVIDIA GeForce RTX 5090", "12.0", None, "gb202"),
    ("NVIDIA GeForce RTX 5080", "12.0", "gb203", "gb202"),  # GB203's catalog is GB202's
    (None, "12.0", None, "gb202"),
    ("NVIDIA GB10", "12.1", None, "gb20b"),  # DGX Spark
    ("NVIDIA Thor", "11.0", None, "gb10b"),
    (None, "9.0", "GH100", "gh100"),
    (None, "10.0", "gb102", "gb100"),  # its catalog is gb100's
    ("NVIDIA H200", None, 384, "gh100"),
    ("NVIDIA H200", "9.0", 999, "gh100"),  # a chip number never seen is passed over
    ("NVIDIA A100-SXM4-80GB", "8.0", None, "ga100"),
    ("NVIDIA GeForce RTX 4090", "8.9", None, "ad102"),
    ("NVIDIA GeForce RTX 4060", "8.9", "ad107", "ad102"),  # AD107's catalog is AD102's
    ("NVIDIA L4", "8.9", None, "ad102"),
    ("NVIDIA A10", "8.6", "ga107", "ga102"),
    ("NVIDIA Jetson AGX Orin", "8.7", None, "ga10b"),
    ("Tesla T4", "7.5", None, "tu102"),
    ("NVIDIA T4", "7.5", "tu104", "tu102"),
    ("NVIDIA TITAN RTX", "7.5", None, "tu102"),
    ("Quadro RTX 6000", "7.5", None, "tu102"),
    ("NVIDIA GeForce RTX 2070 SUPER", "7.5", None, "tu102"),
    ("GeForce GTX 1660 SUPER", "7.5", None, "tu116"),  # an older driver: no NVIDIA prefix
    ("NVIDIA GeForce GTX 1650", "7.5", None, "tu116"),
    ("NVIDIA GeForce MX450", "7.5", None, "tu116"),
    ("NVIDIA T1000 8GB", "7.5", None, "tu116"),
    ("NVIDIA T600 Laptop GPU", "7.5", None, "tu116"),
    (None, "7.5", "tu117", "tu116"),  # TU117's catalog is TU116's
    ("NVIDIA GeForce GTX 1650", "7.5", 358, "tu102"),  # some GTX 1650 are TU106 dies: the chip number decides
    # no verified map: null, never another chip's names
    ("Tesla V100-SXM2-32GB", "7.0", None, None),  # ncu 2025.3.1 lists no Volta chip
    ("NVIDIA TITAN V", "7.0", "gv100", None),
    (None, "7.5", None, None),  # two maps share CC 7.5: the name decides, and there is none
    ("NVIDIA CMP 30HX", "7.5", None, None),  # a CC 7.5 name neither map claims
    ("NVIDIA GeForce GTX 1660 Ti", "7.5", "ga102", None),  # a chip that contradicts its CC
    ("NVIDIA H200", "10.0", 384, None),  # contradicts its CC
    ("NVIDIA B200", "10.0", "gh100", None),
    ("NVIDIA H200", None, None, None),
])
def test_chip_for(name: str | None, cc: str | None, chip: str | int | None, want: str | None) -> None:
    assert chips.chip_for(name, cc, chip) == want


def _rep_chip_id(path: Path) -> int:
    """device__attribute_chip of a report's launches (the import does not keep it)."""
    data = path.read_bytes()
    report = wire.read_report(gzip.decompress(data) if path.suffix == ".gz" else data, {"device__attribute_chip"},
                              rules=False)
    (chip,) = {a.values["device__attribute_chip"] for a in report.actions}
    assert isinstance(chip, int)
    return chip


@pytest.mark.parametrize(("report", "gpu", "cc", "chip_id", "want"), [
    ("hyperspec-2060mq/MgMap_profile.ncu-rep", "NVIDIA GeForce RTX 2060 with Max-Q Design", "7.5", 358, "tu102"),
    ("mojo-1660ti/josiahls_profile.ncu-rep", "NVIDIA GeForce GTX 1660 Ti", "7.5", 360, "tu116"),
    ("indexspaces/indexspaces_profile.ncu-rep.gz", "NVIDIA A40", "8.6", 370, "ga102"),
    ("speedy-scan-3070/thedavidchu_profile.ncu-rep", "NVIDIA GeForce RTX 3070", "8.6", 372, "ga102"),
])
def test_real_pre_hopper_reports_pick_their_chip(report: str, gpu: str, cc: str, chip_id: int, want: str) -> None:
    path = DATA / "wild" / report
    capture = read_export(path)
    assert capture.gpu == gpu and {la.cc for la in capture.launches} == {cc}
    assert chips.chip_for(capture.gpu, cc) == want  # what derivation asks: name and CC
    assert _rep_chip_id(path) == chip_id and chip_id in MAPS[want].chip_ids
    assert chips.chip_for(None, cc, chip_id) == want  # the number alone, where an export has no name


# device fields of the public reports in the team's wild set that are not in tests/data (read the same way)
@pytest.mark.parametrize(("gpu", "cc", "chip_id", "want"), [
    ("NVIDIA GeForce RTX 2080 Ti", "7.5", 354, "tu102"),  # yzwang-cudacode, ncu 2022.3
    ("NVIDIA A100-PCIE-40GB", "8.0", 368, "ga100"),  # mistic-a100pcie, ncu 2021.2
    ("NVIDIA A100 80GB PCIe", "8.0", 368, "ga100"),  # panjd123-cutlass, ncu 2024.1
    ("NVIDIA H800", "9.0", 384, "gh100"),  # sglang-h800, ncu 2023.3
])
def test_wild_device_fields_pick_their_chip(gpu: str, cc: str, chip_id: int, want: str) -> None:
    assert chips.chip_for(gpu, cc) == chips.chip_for(gpu, cc, chip_id) == chips.chip_for(None, cc, chip_id) == want


def test_cc_7_5_names_never_match_both_turing_maps() -> None:
    """TU10x and TU116 share CC 7.5: the display name picks one, in any case and spacing, and never both."""
    names = {
        "tu102": ["NVIDIA GeForce RTX 2060", "NVIDIA GeForce RTX 2060 SUPER", "NVIDIA GeForce RTX 2080 Ti",
                  "GeForce RTX 2080 SUPER with Max-Q Design", "NVIDIA TITAN RTX", "Quadro RTX 8000", "Tesla T4",
                  "  nvidia   geforce rtx 2070  "],
        "tu116": ["NVIDIA GeForce GTX 1660 Ti", "NVIDIA GeForce GTX 1660 SUPER", "GeForce GTX 1660 Super",
                  "NVIDIA GeForce GTX 1650 Ti with Max-Q Design", "NVIDIA GeForce GTX 1630", "NVIDIA GeForce MX550",
                  "Quadro T2000 with Max-Q Design", "NVIDIA T400 4GB"],
    }
    for key, listed in names.items():
        other = MAPS["tu116" if key == "tu102" else "tu102"]
        for name in listed:
            assert MAPS[key].accepts_name(name) and not other.accepts_name(name), name
            assert chips.chip_for(name, "7.5") == key
    for name in ("NVIDIA GeForce RTX 2050", "NVIDIA GeForce RTX 2060 Ti", "NVIDIA GeForce GTX 1670", "", None):
        assert chips.chip_for(name, "7.5") is None, name


# -- the pre-Hopper maps ---------------------------------------------------------------------------------------------


def test_tu116_has_no_tensor_paths_and_says_so() -> None:
    tu116 = MAPS["tu116"]
    assert tu116.tensor_cores is False and dict(chips.tensor_paths("tu116")) == {}
    assert tu116.catalogs == ("tu116", "tu117") and tu116.excluded == () and tu116.inferred_disjoint == ()
    for name in tu116.catalogs:
        assert [n for n in chips.catalog(name) if "ops_path_tensor" in n] == []
        # the tensor pipe is in the catalog (HMMA/IMMA run here), but no counter counts its math ops
        assert "sm__inst_executed_pipe_tensor_op_hmma" in chips.catalog(name)
        assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in chips.catalog(name, suffix=True)
    # every other map has tensor cores and paths
    assert [k for k, m in MAPS.items() if not m.tensor_cores or not m.paths] == ["tu116"]
    # what derivation reads from the catalog of every map: nothing of TU116's
    assert not {p.flops for p in chips.tensor_paths("tu102").values()} & set(chips.catalog("tu116", suffix=True))


def test_ga100_paths_are_the_ampere_aggregates_with_dense_peaks() -> None:
    paths, full = chips.tensor_paths("ga100"), set(chips.catalog("ga100", suffix=True))
    assert {k: (p.flops, p.peak, p.integer) for k, p in paths.items()} == {
        "bf16": ("sm__ops_path_tensor_src_bf16_dst_fp32.sum",
                 "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained", False),
        "fp16": ("sm__ops_path_tensor_src_fp16_dst_fp32.sum",
                 "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_off.sum.peak_sustained", False),
        "fp16_dst_fp16": ("sm__ops_path_tensor_src_fp16_dst_fp16.sum",
                          "sm__ops_path_tensor_src_fp16_dst_fp16_sparsity_off.sum.peak_sustained", False),
        "tf32": ("sm__ops_path_tensor_src_tf32_dst_fp32.sum",
                 "sm__ops_path_tensor_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained", False),
        "int8": ("sm__ops_path_tensor_src_int8.sum",
                 "sm__ops_path_tensor_src_int8_sparsity_off.sum.peak_sustained", True),
        "fp64": ("sm__ops_path_tensor_src_fp64.sum", "sm__ops_path_tensor_src_fp64.sum.peak_sustained", False),
    }
    assert all(p.flops in full and p.peak in full for p in paths.values())
    assert {e.metric: e.reason is not None for e in MAPS["ga100"].excluded} == {
        "sm__ops_path_tensor_src_int4": True, "sm__ops_path_tensor_src_int1": True}
    # GA10x and GA10B read the same counters, each held against its own catalog; Ada adds FP8, whole
    assert chips.tensor_paths("ga102") == chips.tensor_paths("ga10b") == paths
    ad = chips.tensor_paths("ad102")
    assert {k: p for k, p in ad.items() if k != "fp8"} == paths
    assert (ad["fp8"].flops, ad["fp8"].peak) == (
        "sm__ops_path_tensor_src_fp8.sum", "sm__ops_path_tensor_src_fp8_sparsity_off.sum.peak_sustained")


def test_turing_paths_split_by_destination_only() -> None:
    paths = chips.tensor_paths("tu102")
    assert {k: (p.flops, p.peak, p.integer) for k, p in paths.items()} == {
        "fp16_bf16_tf32": ("sm__ops_path_tensor_src_fp16_bf16_tf32_dst_fp32.sum",
                           "sm__ops_path_tensor_src_fp16_bf16_tf32_dst_fp32.sum.peak_sustained", False),
        "fp16_dst_fp16": ("sm__ops_path_tensor_src_fp16_dst_fp16.sum",
                          "sm__ops_path_tensor_src_fp16_dst_fp16.sum.peak_sustained", False),
        "int8": ("sm__ops_path_tensor_src_int8.sum", "sm__ops_path_tensor_src_int8.sum.peak_sustained", True),
    }
    assert MAPS["tu102"].catalogs == ("tu102", "tu104", "tu106")
    assert not [n for n in chips.catalog("tu102") if n.startswith(chips.TENSOR_PREFIX) and "sparsity" in n]


def test_unmapped_message_names_the_chip_and_its_tensor_counters() -> None:
    text = chips.unmapped_message("NVIDIA A100-SXM4-80GB", "8.0", 368, [
        "gpu__time_duration.sum", "sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum"])
    assert text.startswith("GPU 'NVIDIA A100-SXM4-80GB', CC 8.0, chip 368: no verified tensor-path map")
    assert "tensor FLOPs left null" in text
    assert "2 tensor counter(s): sm__ops_path_tensor_src_bf16_dst_fp32.sum, sm__ops_path_tensor_src_fp16.sum" in text
    assert "gpu__time_duration" not in text
    with pytest.raises(InputError, match="expected one of gh100, gb100"):
        chips.tensor_paths("gb203")


# -- validation ------------------------------------------------------------------------------------------------------


def _raw() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "perfreport" / "ncu" / "catalog" / "chips.yaml").read_text())
    return doc


def _problems(doc: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        chips.parse_chip_maps(doc, "chips.yaml")
    assert str(info.value).startswith("chips.yaml: ")
    return info.value.problems


def test_the_packaged_file_parses_to_the_loaded_maps() -> None:
    assert chips.parse_chip_maps(_raw(), "x") == chips.load_chip_maps()


def test_device_names_narrow_a_cc_to_the_names_that_match() -> None:
    doc = _raw()
    doc["chips"]["gb202"]["detect"]["device_names"] = ["NVIDIA GeForce RTX 5090( D)?", "NVIDIA RTX PRO 6000 .*"]
    gb202 = chips.parse_chip_maps(doc, "x").chips["gb202"]
    assert [gb202.accepts_name(n) for n in ("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090 D",
                                            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                            "NVIDIA GeForce RTX 5090 Laptop GPU", "NVIDIA GeForce RTX 5080", None)] \
        == [True, True, True, False, False, False]
    assert MAPS["gb202"].accepts_name(None)  # the packaged map takes every CC 12.0 device: one catalog for all
    doc["chips"]["gb202"]["detect"]["device_names"] = ["NVIDIA (RTX"]
    assert _problems(doc) == ["chips.gb202.detect.device_names: expected a regular expression, got \"NVIDIA (RTX\" "
                              "(missing ), unterminated subpattern at position 7)"]


def test_validation_names_key_expected_and_got() -> None:
    doc = _raw()
    gb = doc["chips"]["gb110"]  # gb100's and gb202's paths are shared by anchors: gb110's are its own
    gb["tensor_paths"]["bf16"]["flops"] = "sm__ops_path_tensor_src_bf16_dst_fp32"
    gb["tensor_paths"]["fp16"]["flops"] = gb["tensor_paths"]["tf32"]["flops"]
    gb["detect"]["cc"] = ["sm_100"]
    gb["excluded"] = {"sm__ops_path_tensor_src_fp8": {"covered_by": ["fp9"]}}
    gb["colour"] = "green"
    doc["chips"]["gh100"]["detect"]["chip_ids"] = [384, "x"]
    assert _problems(doc) == [
        "chips.gh100.detect.chip_ids: expected a list of positive integers, got an array",
        "chips.gb110.colour: unknown field, expected one of catalogs, detect, excluded, gpus, inferred_disjoint, "
        "name, tensor_cores, tensor_paths",
        'chips.gb110.detect.cc: expected entries matching \\d+\\.\\d+, got "sm_100"',
        "chips.gb110.tensor_paths.bf16.flops: expected a sm__ops_path_tensor_* counter ending in .sum, got "
        "\"sm__ops_path_tensor_src_bf16_dst_fp32\"",
        "chips.gb110.tensor_paths.tf32.flops: sm__ops_path_tensor_src_tf32_dst_fp32.sum is also path 'fp16'; "
        "expected each counter once (adding it twice counts its ops twice)",
        "chips.gb110.excluded.sm__ops_path_tensor_src_fp8.covered_by: expected path keys of this chip, got \"fp9\"",
    ]
    doc = _raw()
    doc["chips"]["gb110"]["detect"]["cc"] = ["10.0"]
    doc["chips"]["gb202"]["catalogs"] = ["gb204"]
    doc["chips"]["gb20b"]["catalogs"] = ["gb20b", "gb102"]
    assert _problems(doc) == [
        "chips.gb202.catalogs: expected 'gb202' first (the map's own catalog), got \"gb204\"",
        "chips.gb202.catalogs: no file chips/metrics_gb204.csv.gz for 'gb204'",
        "chips.gb20b.catalogs: 'gb102' is also chips.gb100's; expected one owner",
        "chips.gb110.detect: CC 10.0 is also chips.gb100's; expected device_names on both so that one export picks "
        "one map",
    ]
    assert _problems([]) == ["(top level): expected a mapping, got an array"]


def test_tensor_cores_false_is_the_only_way_to_an_empty_map() -> None:
    doc = _raw()
    doc["chips"]["gb110"]["tensor_paths"] = {}
    doc["chips"]["tu116"]["tensor_cores"] = "no"
    assert _problems(doc) == [
        "chips.gb110.tensor_paths: expected a non-empty mapping of path key -> flops, peak (or tensor_cores: false "
        "and {}), got an object",
        'chips.tu116.tensor_cores: expected true or false, got "no"',
        "chips.tu116.tensor_paths: expected a non-empty mapping of path key -> flops, peak (or tensor_cores: false "
        "and {}), got an object",
    ]
    doc = _raw()
    doc["chips"]["tu116"]["tensor_paths"] = doc["chips"]["tu102"]["tensor_paths"]
    doc["chips"]["tu116"]["excluded"] = {"sm__ops_path_tensor_src_int4": {"reason": "4-bit"}}
    assert _problems(doc) == [
        "chips.tu116.tensor_paths: expected {} on a chip with tensor_cores: false, got an object",
        "chips.tu116.excluded: expected none on a chip with tensor_cores: false, got an object",
    ]


# -- docs ------------------------------------------------------------------------------------------------------------


_QUOTE = re.compile(r"`(sm__\w+)`: \"([^\"]+)\"")
_ROW = re.compile(r"^\| `(\w+)`[^|]* \| `(sm__ops_path_tensor_\w+)\.sum` \| \"([^\"]+)\" \| `([\w.]+)`", re.M)


def _doc_section() -> tuple[str, dict[str, str]]:
    """docs/metrics.md "Tensor paths per chip": its rules, and its `### ... (`key`...)` parts by chip key."""
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text.split("\n## Tensor paths per chip\n", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"\n### .*?\(`([a-z0-9]+)`[^\n]*\n", section)
    return parts[0], dict(zip(parts[1::2], parts[2::2], strict=True))


def test_docs_quote_the_catalog_and_give_every_path_and_peak() -> None:
    rules, section = _doc_section()
    assert list(section) == list(MAPS)
    every = {(n, d) for key in MAPS for name in MAPS[key].catalogs for n, d in chips.catalog(name).items()}
    quoted = _QUOTE.findall(rules)
    assert len(quoted) == 7 and [q for q in quoted if q not in every] == []
    for key, text in section.items():
        desc = chips.catalog(key)
        rows = {k: (flops, d, peak) for k, flops, d, peak in _ROW.findall(text)}
        assert rows == {k: (base(p.flops), desc[base(p.flops)], p.peak) for k, p in MAPS[key].paths.items()}
        assert [(n, d) for n, d in _QUOTE.findall(text) if desc.get(n) != d] == []
