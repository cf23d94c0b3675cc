"""Page 08 History: each kernel series over real lake publications of the campaign, with its change points (issue 31,
point 3).

The lake is test_regressions' `history`: the example's decode cell published 12 times with 1% noise per kernel and,
from publication 8 on (0-based; the 9th publication), decode attention 7% longer. The page must draw that step at
the 9th publication as a regression of ~7%, and no change point on any other series.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest
from conftest import read_download, run_cli
from test_browser import DRAWN, Visit, browser  # noqa: F401  (the browser fixture)
from test_lake import DECODE, EXAMPLE, make_campaign
from test_regressions import ATTENTION, PUBLICATIONS, STEP_AT, history  # noqa: F401  (the lake fixture)
from test_render import outline

from perfreport.errors import PerfReportError
from perfreport.lake.regressions import campaign_series
from perfreport.site.history_page import MAX_CHARTS, History
from perfreport.site.render import NAV, RenderResult, report_render

PAGE = "08-history.html"
SERIES = 21  # the decode cell's kernel rows: one series each


def _charts(html: str) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """(div id, data, layout) of every chart of a page, in page order."""
    return [tuple(item[1:]) for item in outline(html) if item[0] == "plotly"]  # type: ignore[misc]


def _rows(site: RenderResult, table: str) -> list[dict[str, Any]]:
    return json.loads(read_download(site.campaign_site / f"08-history.{table}.json"))["rows"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def history_site(history: tuple[Path, list[str]], example_campaign: Path,  # noqa: F811
                 tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    lake, _ = history
    series = campaign_series(lake, example_campaign)
    return report_render(example_campaign, tmp_path_factory.mktemp("history-site"),
                         History("the-lake", "duration_ns", series))


def test_the_step_is_drawn_at_its_publication_and_the_noise_has_none(
        history: tuple[Path, list[str]], history_site: RenderResult) -> None:  # noqa: F811
    _, ids = history
    html = (history_site.campaign_site / PAGE).read_text(encoding="utf-8")
    charts = _charts(html)
    assert [c[0] for c in charts] == [f"history-{i:03d}" for i in range(1, SERIES + 1)]  # 21 < MAX_CHARTS: all
    step, noise = charts[:2], charts[2:]  # regressions first: attention's basic and full series
    for _, data, layout in step:
        assert ATTENTION in layout["title"]["text"] and DECODE in layout["title"]["text"]
        value = next(t for t in data if t["name"] == "value")
        assert value["x"] == list(range(1, PUBLICATIONS + 1))
        assert [c[0] for c in value["customdata"]] == ids  # hover: each point's publication id
        before, after = value["y"][:STEP_AT], value["y"][STEP_AT:]
        assert sum(after) / len(after) / (sum(before) / len(before)) == pytest.approx(1.07, abs=0.015)
        (marker,) = [t for t in data if t["name"] in ("regression", "improvement", "suspicious")]
        assert marker["name"] == "regression" and marker["x"] == [STEP_AT + 1]  # the 9th publication
        (shape,) = layout["shapes"]
        assert shape["x0"] == shape["x1"] == STEP_AT + 0.5  # between the old level's last point and the new first
        (note,) = layout["annotations"]
        label, pct = note["text"].split()
        assert label == "regression" and float(pct.rstrip("%")) == pytest.approx(7.0, abs=1.5)
        levels = next(t for t in data if t["name"] == "level (segment mean)")["y"]
        assert levels[0] == levels[1] and levels[3] == levels[4] and levels[3] / levels[0] == pytest.approx(1.07, 0.015)
        go.Figure({"data": data, "layout": layout})  # every property valid
    for div_id, data, layout in noise:
        assert [t["name"] for t in data] == ["value", "level (segment mean)"], div_id
        assert layout["shapes"] == [] and layout["annotations"] == []
    assert "21 series of duration_ns over 12 publication(s); 2 change point(s): 2 regression, 0 improvement, " \
           "0 suspicious; 0 series too short to test." in " ".join(html.split())
    assert 'id="history-lake">the-lake<' in html and 'id="history-cap"' not in html


def test_the_tables_list_every_change_point_series_and_point(
        history: tuple[Path, list[str]], history_site: RenderResult) -> None:  # noqa: F811
    _, ids = history
    changes = _rows(history_site, "changes")
    assert [(r["set"], r["label"], r["publication"], r["publication_id"], r["points"]) for r in changes] == [
        ("basic", "regression", STEP_AT + 1, ids[STEP_AT], PUBLICATIONS),
        ("full", "regression", STEP_AT + 1, ids[STEP_AT], PUBLICATIONS)]
    for r in changes:
        assert r["kernel"].startswith(ATTENTION) and r["cell_id"] == DECODE
        assert r["change_pct"] == pytest.approx(7.0, abs=1.5) and r["p_value"] < 0.001
        assert r["after"] / r["before"] == pytest.approx(1 + r["change_pct"] / 100)
    series = _rows(history_site, "series")
    assert len(series) == SERIES and all(s["points"] == PUBLICATIONS for s in series)
    assert [s["status"] for s in series] == ["regression"] * 2 + ["no change point"] * (SERIES - 2)
    points = _rows(history_site, "points")
    assert len(points) == SERIES * PUBLICATIONS
    first = [p for p in points if p["kernel"] == series[0]["kernel"] and p["set"] == series[0]["set"]]
    assert [p["publication_id"] for p in first] == ids and [p["publication"] for p in first] == list(range(1, 13))
    assert first[0]["value"] == series[0]["first"] and first[-1]["value"] == series[0]["latest"]
    html = (history_site.campaign_site / PAGE).read_text(encoding="utf-8")
    assert html.count('<a href="#history-001">') == 2  # the change point and its series link to its chart


def test_without_a_lake_the_page_says_how_to_get_it(example_site: RenderResult) -> None:
    assert NAV[-1] == (PAGE, "History")
    html = (example_site.campaign_site / PAGE).read_text(encoding="utf-8")
    text = " ".join(html.split())
    assert "No data yet." in text and "publish_to_lake --campaign DIR --lake LAKE" in text
    assert "report_render --campaign DIR --out site --lake LAKE" in text
    assert "the lake must hold publications of this campaign" in text
    assert _charts(html) == [] and "plotly" not in html  # no chart: no plotly.js
    assert _rows(example_site, "changes") == [] and _rows(example_site, "series") == []
    summary = (example_site.campaign_site / "01-summary.html").read_text(encoding="utf-8")
    assert f'<a href="{PAGE}">History</a>' in summary


def test_a_lake_without_this_campaign_says_so(history: tuple[Path, list[str]],  # noqa: F811
                                              tmp_path: Path) -> None:
    lake, _ = history
    other = make_campaign(tmp_path / "other", edit=lambda doc: doc.update(campaign="other-campaign"))
    assert campaign_series(lake, other) == []
    out = run_cli("report_render", "--campaign", str(other), "--out", str(tmp_path / "site"), "--lake", str(lake),
                  ok=True)
    assert "08-history.html" in out.stdout
    text = " ".join((tmp_path / "site" / "other-campaign" / PAGE).read_text(encoding="utf-8").split())
    assert f"lake <code>{lake}</code> holds none of campaign <code>other-campaign</code>" in text
    assert f"render again with <code>--lake {lake}</code>" in text


def test_report_render_lake_on_the_cli(history: tuple[Path, list[str]], example_campaign: Path,  # noqa: F811
                                       tmp_path: Path) -> None:
    lake, ids = history
    out = run_cli("report_render", "--campaign", str(example_campaign), "--out", str(tmp_path / "site"),
                  "--lake", str(lake), "--format", "json", ok=True)
    assert any(p["page"].endswith(PAGE) for p in json.loads(out.stdout)["pages"])
    site = tmp_path / "site" / EXAMPLE.name
    changes = json.loads(read_download(site / "08-history.changes.json"))["rows"]
    assert [(r["label"], r["publication_id"]) for r in changes] == [("regression", ids[STEP_AT])] * 2
    # sol_pct was not recomputed when the fixture scaled durations: a flat series, no change point
    run_cli("report_render", "--campaign", str(example_campaign), "--out", str(tmp_path / "site"),
            "--lake", str(lake), "--history-metric", "sol_pct", ok=True)
    assert json.loads(read_download(site / "08-history.changes.json"))["rows"] == []
    assert "series of sol_pct over 12 publication(s); 0 change point(s)" in (site / PAGE).read_text()


def test_report_render_lake_errors_are_one_clear_line(history: tuple[Path, list[str]],  # noqa: F811
                                                      example_campaign: Path, tmp_path: Path) -> None:
    lake, _ = history
    base = ("report_render", "--campaign", str(example_campaign), "--out", str(tmp_path / "site"))
    for args, says in (
            (["--lake", str(tmp_path / "nowhere")], "no catalog.db there"),
            (["--lake", str(lake), "--history-metric", "nope"],
             "report_render --history-metric 'nope': not a numeric kernel column"),
            (["--history-metric", "sol_pct"], "give --lake LAKE too")):
        out = run_cli(*base, *args, ok=False)
        assert says in out.output and "Traceback" not in out.output, out.output
    assert not (tmp_path / "site").exists() and not (tmp_path / "nowhere").exists()  # nothing written or created
    with pytest.raises(PerfReportError):
        campaign_series(lake, example_campaign, "name")


def test_more_series_than_charts_says_so(history: tuple[Path, list[str]], example_campaign: Path,  # noqa: F811
                                         tmp_path: Path) -> None:
    lake, _ = history
    series = campaign_series(lake, example_campaign)
    many = [{**s, "cell_id": f"{s['cell_id']}-{n}"} for n in range(2) for s in series]  # 42 series
    site = report_render(example_campaign, tmp_path / "site", History("L", "duration_ns", many))
    html = (site.campaign_site / PAGE).read_text(encoding="utf-8")
    assert len(_charts(html)) == MAX_CHARTS
    assert f"Charts for the first {MAX_CHARTS} of {2 * SERIES} series" in html
    assert len(_rows(site, "series")) == 2 * SERIES
    first = [c[2]["title"]["text"] for c in _charts(html)[:4]]
    assert all(ATTENTION in t for t in first)  # the four regressions drawn first


def test_the_history_page_draws_in_chromium(browser: Any, history_site: RenderResult) -> None:  # noqa: F811
    visit = Visit(browser, history_site.campaign_site / PAGE)
    try:
        visit.check_offline_and_clean()
        drawn = visit.page.evaluate(DRAWN)
        assert len(drawn) == SERIES and all(c["svg"] and c["drawn"] == c["given"] for c in drawn)
        notes = visit.page.evaluate("() => Array.from(document.querySelectorAll('#history-001 .annotation-text'))"
                                    ".map(a => a.textContent)")
        assert len(notes) == 1 and notes[0].startswith("regression +")
        lines = visit.page.evaluate("() => document.querySelectorAll('#history-001 .shapelayer path').length")
        quiet = visit.page.evaluate("() => document.querySelectorAll('#history-003 .shapelayer path').length")
        assert lines == 1 and quiet == 0
        points = visit.page.evaluate("() => document.querySelectorAll('#history-001 .scatterlayer .trace')[0]"
                                     ".querySelectorAll('path.point').length")
        assert points == PUBLICATIONS
        visit.page.click('#table-changes a[href="#history-001"]')
        assert visit.page.evaluate("location.hash") == "#history-001"
        assert visit.errors == []
    finally:
        visit.page.close()
