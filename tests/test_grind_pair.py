"""Issue 31, point 5: the H100 before/after pair (campaigns/h100-decode-compile), real device measurements.

Nine trials each of eager and torch.compile'd decode: the comparison page compares their trials (ratio of medians,
bootstrap CI, Mann-Whitney U) and says compiled is slower; the kernel time fell as the fusion predicted, the end-to-end
time rose (captures/README.md says why).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import read_download

from perfreport.site.render import RenderResult, report_render
from perfreport.warehouse.campaign_import import import_campaign
from perfreport.warehouse.db import open_campaign
from perfreport.warehouse.stats import SLOWER, compare

PAIR = Path(__file__).resolve().parents[1] / "campaigns" / "h100-decode-compile"
EAGER, COMPILED = "decode-b16-kv2048-eager", "decode-b16-kv2048-compiled"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    camp = tmp_path_factory.mktemp("pair") / PAIR.name
    shutil.copytree(PAIR, camp, ignore=shutil.ignore_patterns("cells"))
    import_campaign(camp)
    return camp


@pytest.fixture(scope="module")
def site(pair: Path, tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    return report_render(pair, tmp_path_factory.mktemp("pair-site"))


def _trials(cell: str) -> list[float]:
    doc = json.loads((PAIR / "captures" / cell.rsplit("-", 1)[1] / "inference_perfbench_v1.json").read_text())
    assert [r["trial"] for r in doc["results"]] == list(range(1, 10))
    assert doc["context"]["gpu"] == "NVIDIA H100 80GB HBM3"
    return [r["layer_tpot_ms"] for r in doc["results"]]


def test_the_bundles_hold_what_the_trial_files_hold() -> None:
    for folder in ("eager", "compiled"):
        merged = json.loads((PAIR / "captures" / folder / "inference_perfbench_v1.json").read_text())["results"]
        files = [json.loads((PAIR / "captures" / folder / "trials" / f"bench_t{t}.json").read_text())["results"][0]
                 for t in range(1, 10)]
        assert merged == files


def test_compiled_decode_is_significantly_slower(site: RenderResult) -> None:
    eager, compiled = _trials(EAGER), _trials(COMPILED)
    c = compare(eager, compiled)
    assert c.verdict == SLOWER and c.p_value is not None and c.p_value < 0.001
    assert 1.06 < c.ratio < 1.10 and c.ci_low is not None and c.ci_low > 1.0  # type: ignore[operator]
    rows = json.loads(read_download(site.campaign_site / "compare-stack.engine-1.trials.json"))["rows"]
    tpot = next(r for r in rows if r["metric"] == "layer_tpot_ms")
    assert (tpot["before"], tpot["after"], tpot["n_before"], tpot["n_after"]) == (EAGER, COMPILED, 9, 9)
    assert tpot["verdict"] == "slower" and tpot["ratio"] == pytest.approx(c.ratio)
    thr = next(r for r in rows if r["metric"] == "throughput_tok_s")
    assert thr["verdict"] == "slower" and thr["ratio"] < 1.0  # fewer tokens/s: higher is better there


def test_the_kernel_time_fell_as_the_fusion_predicted(pair: Path) -> None:
    con = open_campaign(pair)
    try:
        per_layer = dict(con.execute("SELECT cell_id, sum(total_ms) / 5 FROM kernel_join GROUP BY 1").fetchall())
        predicted = con.execute("SELECT sum(amdahl_bound_ms) / 5 FROM kernel_join WHERE cell_id = ? AND family IN "
                                "('norm', 'elementwise')", [EAGER]).fetchone()[0]
        fused = con.execute("SELECT count(*) FROM kernel_join WHERE cell_id = ? AND label LIKE 'triton_%'",
                            [COMPILED]).fetchone()[0]
    finally:
        con.close()
    realized = per_layer[EAGER] - per_layer[COMPILED]
    assert fused == 2 and 0.01 < predicted < 0.02 and 0.01 < realized < 0.02  # ms per layer, both ~3.5%
    assert abs(realized - predicted) / per_layer[EAGER] < 0.01  # the kernel-level prediction held within 1 point
    walls = {cell: sorted(_trials(cell))[4] for cell in (EAGER, COMPILED)}
    gaps = {cell: walls[cell] - per_layer[cell] for cell in walls}  # host time between kernels per layer
    assert gaps[COMPILED] > 2 * gaps[EAGER]  # what it missed: the compiled layer's host time


def test_grounding_trials_is_the_number_the_data_holds(pair: Path, tmp_path: Path) -> None:
    from perfreport.config.campaign import load_campaign
    from perfreport.lake.gate import check_campaign

    assert all(c.context_problems == [] for c in check_campaign(load_campaign(pair)))  # 9 typed, 9 held
    camp = tmp_path / "c"
    shutil.copytree(pair, camp)
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("trials: 9", "trials: 3"))
    problems = [p for c in check_campaign(load_campaign(camp)) for p in c.context_problems]
    assert problems == [f"cells[{cell}].context.grounding.trials: 3 typed, but the cell holds 9 trial(s) (distinct "
                        f"`trial` numbers of its bundle results and of its timelines imported with --trial or "
                        f"trials:); write 9" for cell in (EAGER, COMPILED)]
