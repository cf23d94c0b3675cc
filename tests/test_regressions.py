"""`lake regressions`: change points of a kernel metric over real publications of the example (issue 31, point 3).

The example is published 12 times into a real lake; between publications every kernel's duration gets 1% noise
(seeded) and, from publication 8 on, decode attention runs 7% longer: the step must be found at publication 8 with
its magnitude, no change point in any other kernel (noise), and every publication kept in kernel_history.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from test_lake import DECODE, EXAMPLE, make_campaign

from perfreport.errors import PerfReportError
from perfreport.lake.query import lake_query
from perfreport.lake.regressions import lake_regressions
from perfreport.lake.writer import publish_to_lake
from perfreport.warehouse.stats import change_points

STEP_AT, PUBLICATIONS = 8, 12
ATTENTION = "cudnn_generated_fort_native_sdpa"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    camp = make_campaign(tmp_path_factory.mktemp("hist") / EXAMPLE.name)
    lake = tmp_path_factory.mktemp("hist-lake") / "lake"
    path = camp / "cells" / DECODE / "ncu_kernels.json"
    base = json.loads(path.read_text())
    rng = np.random.default_rng(31)
    ids = []
    for i in range(PUBLICATIONS):
        data = json.loads(json.dumps(base))
        for k in data["kernels"]:
            if k["duration_ns"] is not None:
                step = 1.07 if i >= STEP_AT and k["function"].startswith(ATTENTION) else 1.0
                k["duration_ns"] = round(k["duration_ns"] * step * (1 + 0.01 * rng.standard_normal()), 1)
        path.write_text(json.dumps(data))
        ids.append(publish_to_lake(camp, lake=lake, who="ci", cell_ids=[DECODE]).publication_id)
    return lake, ids


def test_every_publication_is_kept(history: tuple[Path, list[str]]) -> None:
    lake, ids = history
    rows = lake_query(lake, "SELECT count(DISTINCT publication_id), count(*) FROM kernel_history").rows
    assert rows == [(PUBLICATIONS, PUBLICATIONS * 21)]  # 21 decode rows per publication
    assert lake_query(lake, "SELECT count(*) FROM kernels").rows == [(21,)]  # the latest only


def test_the_7_percent_step_is_found_at_its_publication_and_nothing_else(history: tuple[Path, list[str]]) -> None:
    lake, ids = history
    result = lake_regressions(lake, "duration_ns")
    assert result.series == 21
    found = [r for r in result.rows if r.label != "insufficient data"]
    # attention's --set full and --set basic rows are two series (one value per publication each): both step
    assert [(r.kernel.startswith(ATTENTION), r.section_set, r.label, r.publication_id) for r in found] == [
        (True, "basic", "regression", ids[STEP_AT]), (True, "full", "regression", ids[STEP_AT])]
    for step in found:
        assert step.change_pct == pytest.approx(7.0, abs=1.5) and step.p_value is not None and step.p_value < 0.001
        assert step.points == PUBLICATIONS and step.after > step.before  # type: ignore[operator]


def test_the_cli_formats_and_filters(history: tuple[Path, list[str]]) -> None:
    lake, ids = history
    out = run_cli("lake", "regressions", "--lake", str(lake), "--kernel", "sdpa", "--format", "json", ok=True)
    doc = json.loads(out.stdout)
    assert doc["metric"] == "duration_ns" and doc["series"] == 2  # full and basic attention
    assert [(r["set"], r["label"]) for r in doc["rows"]] == [("basic", "regression"), ("full", "regression")]
    csv_out = run_cli("lake", "regressions", "--lake", str(lake), "--kernel", "sdpa", "--format", "csv", ok=True)
    assert csv_out.stdout.splitlines()[0].startswith("campaign,cell_id,kernel,set,metric,label,publication_id")
    table = run_cli("lake", "regressions", "--lake", str(lake), "--kernel", "sdpa", ok=True).stdout
    assert "2 series read, 2 change point(s)" in table
    later = run_cli("lake", "regressions", "--lake", str(lake), "--since", "2999-01-01", "--format", "json", ok=True)
    assert json.loads(later.stdout)["series"] == 0


def test_bad_options_are_one_clear_line(history: tuple[Path, list[str]]) -> None:
    lake, _ = history
    for args, says in ((["--metric", "nope"], "not a numeric kernel column"),
                       (["--kernel", "(unclosed"], "not a valid regular expression"),
                       (["--since", "yesterday"], "expected an ISO date or time")):
        out = run_cli("lake", "regressions", "--lake", str(lake), *args, ok=False)
        assert out.exit_code != 0 and says in out.output and "Traceback" not in out.output
    with pytest.raises(PerfReportError):
        lake_regressions(lake, "name")


def test_change_points_on_synthetic_series() -> None:
    rng = np.random.default_rng(0)
    step = rng.normal(100, 1, 100)
    step[60:] *= 1.07
    (cp,) = change_points(step.tolist())
    assert cp.index == 60 and cp.change_pct == pytest.approx(7.0, abs=0.5) and cp.p_value < 1e-10
    assert all(change_points(rng.normal(100, 1, 1000).tolist()) == [] for _ in range(20))  # noise: nothing
    tail = rng.normal(100, 1, 30).tolist()
    tail[-1] = 110.0
    (last,) = change_points(tail)
    assert last.index == 29 and last.points_after == 1  # one publication shows it: suspicious
    assert change_points([5.0] * 12) == []


def test_a_new_engine_commit_is_an_event_on_the_series_not_a_new_series(tmp_path: Path) -> None:
    """Six publications on one engine commit, then three on another with the nvjet GEMMs 30% faster: the GEMMs'
    series run across the commit and show an improvement at its first publication (a series keyed by the stack would
    restart at every commit and never see it)."""
    camp = make_campaign(tmp_path / EXAMPLE.name)
    lake = tmp_path / "lake"
    path = camp / "cells" / DECODE / "ncu_kernels.json"
    config = camp / "config.yaml"
    base = json.loads(path.read_text())
    rng = np.random.default_rng(7)
    ids = []
    for i in range(9):
        if i == 6:
            config.write_text(config.read_text().replace("engine_commit:", "engine_commit: 'abc1234' #", 1))
        data = json.loads(json.dumps(base))
        for k in data["kernels"]:
            if k["duration_ns"] is not None:
                faster = 0.7 if i >= 6 and k["function"].startswith("nvjet") else 1.0
                k["duration_ns"] = round(k["duration_ns"] * faster * (1 + 0.005 * rng.standard_normal()), 1)
        path.write_text(json.dumps(data))
        ids.append(publish_to_lake(camp, lake=lake, who="ci", cell_ids=[DECODE]).publication_id)
    commits = lake_query(lake, "SELECT DISTINCT engine_commit FROM kernel_history ORDER BY 1").rows
    assert len(commits) == 2  # the commit really changed in the descriptor
    rows = lake_regressions(lake, kernel="^nvjet").rows
    found = [r for r in rows if r.label == "improvement"]
    assert found and all(r.publication_id == ids[6] and r.points == 9 for r in found)
    assert all(r.change_pct == pytest.approx(-30, abs=2) for r in found)
