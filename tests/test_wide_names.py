"""Issue 32, point 6: long kernel names never push a table's numbers out of view.

Real data: campaigns/h100-decode-compile, an H100 capture of one decoder layer run eagerly (PyTorch elementwise
kernels whose demangled names run to 297 characters, cuBLASLt's splitKreduce_kernel to 409) and under torch.compile.
Before the fix the frontier table at 1400 px showed #, cell and kernel, then the window ended: the kernel column was
785 px wide. The names below are real ones from tests/data/wild (panjd123-cutlass, sglang-h800, their LICENSE.txt and
SOURCE.txt alongside), tests/data/h200_rep_layouts, tests/data/h200_oracle and this campaign's captures.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import read_download
from test_browser import Visit, browser  # noqa: F401 - the module's Chromium fixture
from test_kernel_identity import ADD_REP
from test_site_pages import tables

from perfreport.kernels.labels import SHOWN, short_name
from perfreport.ncu.rep.reader import read_rep
from perfreport.site.render import RenderResult, report_render
from perfreport.warehouse.campaign_import import import_campaign

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "campaigns" / "h100-decode-compile"
WILD = ROOT / "tests" / "data" / "wild"
EAGER = PAIR / "captures" / "eager" / "layer_full.ncu-rep.gz"

# (a real demangled name, its short name): the function and the template arguments that say what it computes
ATEN_ADD = ADD_REP  # as ncu's report prints it
# ncu's CSV spelling (tests/data/h200_rep_layouts/metrics-raw.csv): a mean and a sum reduction
ATEN_MEAN = ("reduce_kernel<512, 1, at::ReduceOp<float, at::MeanOps<float, float, float, float>, unsigned int, float, "
             "4, 4>>(T3)")
ATEN_SUM = ("reduce_kernel<512, 1, at::ReduceOp<float, at::func_wrapper_t<float, at::sum_functor<float, float, float>::"
            "operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, 4, 4>>(T3)")
NVJET = "nvjet_sm90_qqtst_144x128_128x6_1x2_h_bz_coopA_algo2_TNN"  # tests/data/h200_oracle
SHORT_NAMES = [
    (ATEN_ADD, "vectorized_elementwise_kernel<8,CUDAFunctor_add<BFloat16>,…>"),
    (ATEN_MEAN, "reduce_kernel<512,1,ReduceOp<float,MeanOps<float,float,float,float>,…>>"),
    (ATEN_SUM, "reduce_kernel<512,1,ReduceOp<float,func_wrapper_t<float,…>,unsigned int,…>>"),
    (NVJET, NVJET),  # a name that fits is shown whole
    ("triton_red_fused__fused_rms_norm_0", "triton_red_fused__fused_rms_norm_0"),  # the compiled capture's
    ("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x128_1x4x1_cga1x1x1_kernel0_0",
     "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmm…8_1x4x1_cga1x1x1_kernel0_0"),  # flat: its middle cut
    ("vectorized_elementwise_kernel<…,CUDAFunctor_add<BFloat16>,…>",  # a label that fits is shown as stored
     "vectorized_elementwise_kernel<…,CUDAFunctor_add<BFloat16>,…>"),
]
# the eager capture's elementwise kernels and cuBLASLt's reduction: name -> short name
EAGER_SHORT = {
    "silu": "vectorized_elementwise_kernel<8,silu_kernel::…,…>",
    "MulFunctor": "vectorized_elementwise_kernel<8,BinaryFunctor<BFloat16,…,MulFunctor<float>>,…>",
    "layer_norm": "vectorized_layer_norm_kernel<BFloat16,float,1>",
    "splitKreduce": "splitKreduce_kernel<32,16,int,float,__nv_bfloat16,float,__nv_bfloat16,0,float,…>",
}
WILD_SHORT = {  # CUTLASS 2 GEMMs of 4,382 and 7,262 characters; flash-attention 2 forward
    "kernel::Gemm<": "Kernel<Gemm<MmaMultistage<GemmShape<128,96,64>,…>,InterleavedEpilogue<…>,…>>",
    "B2bGemm": "Kernel<B2bGemm<B2bMmaMultistageSmemAccumulator<GemmShape<32,384,64>,…>,…>>",
    "flash_fwd_kernel": "flash_fwd_kernel<Flash_fwd_kernel_traits<128,128,64,4,0,0,half_t,…>,0,0,0,0,1,…>",
    "distribution_elementwise": "distribution_elementwise_grid_stride_kernel<float,4,…>",
}


def _names(*reps: Path) -> list[str]:
    return sorted({launch.name for rep in reps for launch in read_rep(rep).launches})


@pytest.mark.parametrize(("name", "short"), SHORT_NAMES)
def test_short_name_is_the_function_and_its_distinguishing_template_part(name: str, short: str) -> None:
    assert short_name(name) == short


def test_short_names_of_real_captures_fit_and_keep_what_tells_them_apart() -> None:
    eager = _names(EAGER)
    wild = _names(WILD / "panjd123-cutlass" / "cutlass_report.ncu-rep.gz",
                  WILD / "sglang-h800" / "sglang_profile.ncu-rep.gz")
    for names, expected in ((eager, EAGER_SHORT), (wild, WILD_SHORT)):
        for part, short in expected.items():
            (name,) = [n for n in names if part in n]
            assert len(name) > SHOWN and short_name(name) == short, (name[:80], short_name(name))
    assert all(len(short_name(n)) <= SHOWN for n in eager + wild)
    assert short_name("splitKreduce_kernel #2", 12) == "split…nel #2"  # the row number is what tells rows apart


@pytest.fixture(scope="module")
def pair_site(tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    camp = tmp_path_factory.mktemp("pair") / PAIR.name
    shutil.copytree(PAIR, camp, ignore=shutil.ignore_patterns("cells"))
    import_campaign(camp)
    return report_render(camp, tmp_path_factory.mktemp("pair-site"))


def test_a_shortened_name_has_its_whole_name_on_hover_and_in_the_downloads(pair_site: RenderResult) -> None:
    site = pair_site.campaign_site
    rows = json.loads(read_download(site / "07-frontier.kernels.json"))["rows"]
    labels = {r["label"] for r in rows}
    assert "vectorized_elementwise_kernel<…,silu_kernel::…,…>" in labels  # the downloads keep the stored label
    (table,) = [t for t in tables((site / "07-frontier.html").read_text(encoding="utf-8"))
                if [h for h, _ in t["head"]][:3] == ["#", "cell", "kernel"]]
    cells = [row[2] for row in table["rows"]]
    elided = [(text, attrs.get("title")) for text, attrs in cells if "…" in text]
    assert len(elided) >= 4 and all(title and len(title) > len(text) for text, title in elided)
    assert any(title.startswith("void at::native::vectorized_elementwise_kernel<(int)8, at::native::<unnamed>::"
                                "silu_kernel") for _, title in elided)  # the demangled name, not the label again
    assert all("title" not in attrs for text, attrs in cells if "…" not in text)  # whole: no hover text to add


# Per data table: its caption, the width of each kernel-name cell, and per numeric header its text and right edge,
# against the right edge of what shows without scrolling (the scroll box inside the window).
LAYOUT = """() => Array.from(document.querySelectorAll('table.data')).map(t => {
  const box = t.parentNode.getBoundingClientRect();
  const shows = Math.min(box.right, window.innerWidth);
  const names = (t.dataset.name || '').split(' ').filter(Boolean).map(Number);
  const heads = Array.from(t.tHead.rows[0].cells);
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize);
  return {table: (t.closest('[id]') || {id: ''}).id, shows, rem,
    kernel_heads: heads.map((th, i) => th.textContent === 'kernel' ? i + 1 : 0).filter(Boolean), names,
    name_widths: Array.from(t.tBodies[0].rows)
      .flatMap(r => names.map(i => r.cells[i - 1].getBoundingClientRect().width)),
    nums: heads.filter(th => th.classList.contains('num'))
      .map(th => [th.textContent, th.getBoundingClientRect().right])};
})"""
NAME_CAP_REM = 24 + 1  # site.css: a kernel-name cell is at most 24rem wide, plus its padding


def test_long_kernel_names_never_push_a_tables_numbers_out_of_view(browser: Any,  # noqa: F811
                                                                    pair_site: RenderResult) -> None:
    """At 1400 px, on every page: every kernel column is a capped name column, no name cell is wider than the cap, the
    first number of every table shows without scrolling, and the frontier table shows its % of roof and time share.
    A table with more numbers than a window holds still scrolls sideways (test_browser's wide-table test)."""
    pages = [pair_site.index_path] + [p for p, _ in pair_site.pages]
    checked = 0
    for path in pages:
        visit = Visit(browser, path)
        try:
            for t in visit.page.evaluate(LAYOUT):
                where = (path.name, t["table"])
                assert set(t["kernel_heads"]) <= set(t["names"]), where
                assert all(w <= NAME_CAP_REM * t["rem"] for w in t["name_widths"]), (where, max(t["name_widths"]))
                if t["nums"]:
                    assert t["nums"][0][1] <= t["shows"] + 1, (where, t["nums"][0], t["shows"])
                checked += bool(t["names"])
                if where == ("07-frontier.html", "table-kernels"):
                    shown = [h for h, right in t["nums"] if right <= t["shows"] + 1]
                    assert {"#", "% of roof (%)", "time share (%)"} <= set(shown), shown
        finally:
            visit.page.close()
    assert checked >= 10  # the kernel tables of pages 4-7, the cell pages and the comparison


# Each numeric column of a table's first body row brought into view as a reader scrolls the table's box sideways:
# where its centre is, the number's own cell is on top, and so is the row's kernel-name cell (it stays at the box's
# left edge: site.css's sticky name column). A column left of the name column is read with the box unscrolled.
EVERY_NUMBER = """() => Array.from(document.querySelectorAll('table.data[data-name]')).map(t => {
  const box = t.closest('.scroll'), row = t.tBodies[0] && t.tBodies[0].rows[0];
  const name = +t.dataset.name.split(' ')[0];
  const nums = (t.dataset.num || '').split(' ').filter(Boolean).map(Number);
  if (!row) return null;
  const onTop = c => { const r = c.getBoundingClientRect();
    const e = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2); return !!e && c.contains(e); };
  const out = nums.map(i => {
    box.scrollLeft = 0;
    const cell = row.cells[i - 1];
    cell.scrollIntoView({block: 'center', inline: 'nearest'});
    return {column: t.tHead.rows[0].cells[i - 1].textContent, number: onTop(cell), name: onTop(row.cells[name - 1]),
            scrolled: box.scrollLeft > 0};
  });
  box.scrollLeft = 0;
  return {table: t.closest('section').id, columns: out};
}).filter(Boolean)"""


def test_every_number_of_every_table_comes_into_view_beside_its_kernel(browser: Any,  # noqa: F811
                                                                      pair_site: RenderResult) -> None:
    """At 1400 px, on every page: scrolling a table sideways brings each of its numeric columns into view with the
    row's kernel name still shown beside it (the 30-column time-share table too, whose numbers a window can't hold)."""
    scrolled = checked = 0
    for path in [p for p, _ in pair_site.pages]:
        visit = Visit(browser, path)
        try:
            for t in visit.page.evaluate(EVERY_NUMBER):
                for c in t["columns"]:
                    where = (path.name, t["table"], c["column"])
                    assert c["number"] and c["name"], where
                    scrolled += c["scrolled"]
                    checked += 1
        finally:
            visit.page.close()
    assert checked >= 80 and scrolled >= 40, (checked, scrolled)  # wide tables were scrolled, and read
