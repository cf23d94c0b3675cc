"""report_render on a long site (issue 32, point 5): forked workers write the same bytes as one process, progress
on stderr (pages done / total), the timing split at the end, one download per table, a bad worker count refused.

Real data: 60 cells of real H200 kernel rows (tests/golden, via test_lake_concurrency.synthetic_campaign): 128 pages.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from conftest import run_cli
from test_lake_concurrency import synthetic_campaign

from perfreport.site.render import JOBS_ENV, report_render


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def long_campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_campaign(tmp_path_factory.mktemp("long") / "long-campaign", cells=60, kernels=6)


def test_workers_write_the_bytes_one_process_writes(long_campaign: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOBS_ENV, "1")
    one = report_render(long_campaign, tmp_path / "one")
    monkeypatch.setenv(JOBS_ENV, "3")
    three = report_render(long_campaign, tmp_path / "three")
    assert (one.jobs, three.jobs) == (1, 3)
    assert _tree(tmp_path / "one") == _tree(tmp_path / "three")
    assert len(three.pages) == 8 + 60 + 60 + len([p for p, _ in three.pages if p.name.startswith("compare-")])
    assert [(p.name, n) for p, n in three.pages] == [(p.name, n) for p, n in one.pages]  # sizes and page order
    assert three.downloads == one.downloads
    assert set(three.seconds) == {"gather", "build", "html", "downloads", "write", "wall"}
    assert all(v >= 0 for v in three.seconds.values()) and three.seconds["wall"] >= three.seconds["gather"]


def test_a_long_render_shows_progress_and_its_timing_split(long_campaign: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOBS_ENV, "2")
    out = run_cli("report_render", "--campaign", str(long_campaign), "--out", str(tmp_path / "site"), ok=True)
    done = [tuple(map(int, m)) for m in re.findall(r"^report_render: (\d+)/(\d+) pages$", out.stderr, re.M)]
    total = len([p for p in (tmp_path / "site" / "long-campaign").iterdir() if p.suffix == ".html"])
    assert len(done) >= 5 and {t for _, t in done} == {total} and done[-1][0] == total
    assert [d for d, _ in done] == sorted(d for d, _ in done)
    timing = re.search(r"rendered in ([\d.]+) s: gather ([\d.]+) s, build ([\d.]+) s, html ([\d.]+) s, downloads "
                       r"([\d.]+) s, write ([\d.]+) s; build to write summed over 2 worker processes", out.stdout)
    assert timing, out.stdout
    assert "kernel-*.html x 60" in out.stdout and "cell-*.html x 60" in out.stdout  # folded, not 120 rows


def test_a_short_render_is_quiet_and_in_one_process(long_campaign: Path, example_campaign: Path,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JOBS_ENV, raising=False)
    out = run_cli("report_render", "--campaign", str(example_campaign), "--out", str(tmp_path / "site"), ok=True)
    assert "report_render:" not in out.stderr and "rendered in " in out.stdout
    assert report_render(example_campaign, tmp_path / "again").jobs == 1  # fewer pages than starting a worker costs


@pytest.mark.parametrize("value", ["two", "0"])
def test_a_bad_worker_count_is_one_clear_line(long_campaign: Path, tmp_path: Path, value: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOBS_ENV, value)
    out = run_cli("report_render", "--campaign", str(long_campaign), "--out", str(tmp_path / "site"))
    assert out.exit_code == 2 and f"{JOBS_ENV}={value!r}" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "site").exists()  # refused before anything was written
