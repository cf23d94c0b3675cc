"""Issue classes of the cell files and what reads them: concurrent writers, source ids, file modes, ids, integer
bounds, printed names, empty cells, the query verbs' sandbox (docs/reliability.md)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from perfreport.config.campaign import load_campaign
from perfreport.errors import ConfigError, IdError, PerfReportError
from perfreport.files import write_text_atomic
from perfreport.ids import check_id
from perfreport.ncu.importer import import_ncu
from perfreport.timeshare import import_samples
from tests.conftest import run_cli, write_config

DATA = Path(__file__).parent / "data"
RAW = DATA / "h200_oracle" / "oracle_basic-raw.csv"
SAMPLES = DATA / "samples" / "zymtrace_like_gpu_kernels.csv"
CELL = "c1"


def _cell_file(camp: Path, name: str = "ncu_kernels.json") -> Path:
    return camp / "cells" / CELL / name


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- 1. concurrent writers of one cell ------------------------------------------------------------------------------
def _import_one(args: tuple[str, str, str, Any]) -> None:
    camp, path, kind, barrier = args
    barrier.wait(timeout=60)
    if kind == "ncu":
        import_ncu(Path(camp), CELL, Path(path))
    else:
        import_samples(Path(camp), CELL, Path(path))


@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_importers_into_one_cell_lose_no_source(tmp_path: Path, writers: int) -> None:
    camp = write_config(tmp_path / "camp")
    inputs = camp / "captures"
    inputs.mkdir()
    for i in range(writers):
        shutil.copy(RAW, inputs / f"raw{i}.csv")
        shutil.copy(SAMPLES, inputs / f"samples{i}.csv")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(writers) as pool:
        for _ in range(20):
            shutil.rmtree(camp / "cells", ignore_errors=True)
            for kind, stem in (("ncu", "raw"), ("samples", "samples")):  # all start together, at a barrier
                pool.map(_import_one, [(str(camp), str(inputs / f"{stem}{i}.csv"), kind, _BARRIERS[writers])
                                       for i in range(writers)])
            ncu = json.loads(_cell_file(camp).read_text())
            assert [s["id"] for s in ncu["sources"]] == [f"captures/raw{i}.csv" for i in range(writers)]
            assert {k["source"] for k in ncu["kernels"]} == {s["id"] for s in ncu["sources"]}
            assert [k["id"] for k in ncu["kernels"]] == [f"k{i:03d}" for i in range(len(ncu["kernels"]))]
            samples = json.loads(_cell_file(camp, "kernel_samples.json").read_text())
            assert [s["id"] for s in samples["sources"]] == [f"captures/samples{i}.csv" for i in range(writers)]


_BARRIERS: dict[int, Any] = {}


@pytest.fixture(autouse=True, scope="module")
def _barriers() -> Any:
    manager = multiprocessing.get_context("fork").Manager()
    _BARRIERS.update({n: manager.Barrier(n) for n in (2, 4)})
    yield
    manager.shutdown()


# -- 10. source ids unique within a cell ----------------------------------------------------------------------------
def test_same_file_name_in_two_campaign_folders_gives_two_sources(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp")
    for run in ("run-a", "run-b"):
        (camp / run).mkdir()
        shutil.copy(RAW, camp / run / "layer.csv")
        run_cli("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle", str(camp / run / "layer.csv"),
                ok=True)
    data = json.loads(_cell_file(camp).read_text())
    assert [s["id"] for s in data["sources"]] == ["run-a/layer.csv", "run-b/layer.csv"]
    per_source = {s["id"]: sum(k["source"] == s["id"] for k in data["kernels"]) for s in data["sources"]}
    assert per_source["run-a/layer.csv"] == per_source["run-b/layer.csv"] > 0
    # the same file again replaces only itself
    run_cli("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle", str(camp / "run-a" / "layer.csv"),
            ok=True)
    assert json.loads(_cell_file(camp).read_text()) == data


def test_other_file_of_the_same_name_outside_the_campaign_is_refused_unless_replace(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp")
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    shutil.copy(RAW, tmp_path / "a" / "layer.csv")
    other = RAW.read_text().replace("python3.12", "python3.13")
    (tmp_path / "b" / "layer.csv").write_text(other)
    run_cli("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle", str(tmp_path / "a" / "layer.csv"),
            ok=True)
    before = _cell_file(camp).read_bytes()
    code, out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle",
                        str(tmp_path / "b" / "layer.csv"), ok=False)
    assert code == 2 and "Traceback" not in out
    assert f"'{tmp_path / 'b' / 'layer.csv'}': the cell already holds a source 'layer.csv' with other content" in out
    assert "--replace" in out and "Nothing was written" in out
    assert _cell_file(camp).read_bytes() == before
    run_cli("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle", str(tmp_path / "b" / "layer.csv"),
            "--replace", ok=True)
    data = json.loads(_cell_file(camp).read_text())
    assert [s["id"] for s in data["sources"]] == ["layer.csv"] and data["sources"][0]["sha256"] != json.loads(
        before)["sources"][0]["sha256"]
    # time shares follow the same rule
    (tmp_path / "b" / "s.csv").write_text(SAMPLES.read_text())
    (tmp_path / "a" / "s.csv").write_text(SAMPLES.read_text().replace("\n", "\n", 1) + "\n")
    run_cli("import_samples", "--campaign", str(camp), "--cell-id", CELL, str(tmp_path / "a" / "s.csv"), ok=True)
    code, out = run_cli("import_samples", "--campaign", str(camp), "--cell-id", CELL, str(tmp_path / "b" / "s.csv"),
                        ok=False)
    assert code == 2 and "already holds a source 's.csv' with other content" in out


# -- 11. files honour the umask -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_get_the_mode_the_umask_gives(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "page.html", "<p>x</p>")
        camp = write_config(tmp_path / "camp")
        import_ncu(camp, CELL, RAW)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "page.html").stat().st_mode) == mode
    assert stat.S_IMODE(_cell_file(camp).stat().st_mode) == mode


def test_rendered_site_pages_are_world_readable_under_umask_022(example_campaign: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        run_cli("report_render", "--campaign", str(example_campaign), "--out", str(tmp_path / "site"), ok=True)
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "site").rglob("*") if p.is_file()]
    assert len(files) > 10
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {"0o644"}


# -- 12. ids with a trailing newline ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["decode\n", "decode\r", "a b", "x/y", ".hidden", "decode\n\n"])
def test_ids_with_a_trailing_newline_or_path_characters_are_refused(bad: str) -> None:
    with pytest.raises(IdError) as info:
        check_id("cell", bad)
    assert repr(bad) in info.value.format_message()


def test_config_and_schema_patterns_refuse_a_trailing_newline(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp", campaign="camp\n")
    with pytest.raises(ConfigError) as info:
        load_campaign(camp)
    assert any(p.startswith("campaign: expected an id") for p in info.value.problems), info.value.problems
    from perfreport.config.validate import check

    assert check({"bundle_id": "b1\n"}, "inference_perfbench_v1")[0].startswith("bundle_id: expected a string "
                                                                                 "matching")
    from perfreport.capture.k8s.manifests import _LABEL_VALUE_RE  # the k8s label rule is anchored the same way
    assert _LABEL_VALUE_RE.fullmatch("cap1\n") is None


# -- 5. integers the warehouse cannot hold -----------------------------------------------------------------------------
def test_config_integers_are_bounded_to_what_the_warehouse_stores(tmp_path: Path) -> None:
    doc = yaml.safe_load((write_config(tmp_path / "camp") / "config.yaml").read_text())
    doc["context"] = {"parallelism": {"tp": 3_000_000_000}, "workload": {"isl": 2**31}}
    (tmp_path / "camp" / "config.yaml").write_text(yaml.safe_dump(doc))
    code, out = run_cli("query", "--campaign", str(tmp_path / "camp"), "select 1", ok=False)
    assert code == 2 and "Traceback" not in out
    assert "context.parallelism.tp: expected int from 1 to 2147483647, got 3000000000" in out
    assert "context.workload.isl: expected int from 1 to 2147483647, got 2147483648" in out
    doc["context"]["parallelism"]["tp"] = 2**31 - 1
    doc["context"]["workload"]["isl"] = 8
    (tmp_path / "camp" / "config.yaml").write_text(yaml.safe_dump(doc))
    code, out = run_cli("query", "--campaign", str(tmp_path / "camp"), "select tp from cells", "--json", ok=True)
    assert json.loads(out) == [{"tp": 2**31 - 1}]


def test_json_integers_beyond_64_bits_fail_validation() -> None:
    from perfreport.config.validate import check

    problems = check({"schema_version": 1, "kernels": 10**20}, "ncu_kernels")
    assert "kernels: expected array, got 100000000000000000000" in problems
    problems = check({"launch_skip": 10**20}, "capture_receipt")
    assert "launch_skip: expected integer within 64 bits (from -2^63 to 2^63-1), got 100000000000000000000" in problems
    assert not any(p.startswith("launch_skip") for p in check({"launch_skip": 2**63 - 1}, "capture_receipt"))


# -- 6. names print as text ---------------------------------------------------------------------------------------
MARKUP_NAME = "void ker[/]nel<[bold]x[/bold]>::run[abi:cxx11](:smile:)"


def _renamed_cell(tmp_path: Path, name: str) -> Path:
    camp = write_config(tmp_path / "camp")
    raw = RAW.read_text()
    original = raw.splitlines()[2].split('","')[4]  # the Kernel Name column of the first launch
    (tmp_path / "named.csv").write_text(raw.replace(original, name.replace('"', '""')))
    return camp


def test_kernel_names_print_verbatim_never_as_markup(tmp_path: Path) -> None:
    camp = _renamed_cell(tmp_path, MARKUP_NAME)
    code, out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle",
                        str(tmp_path / "named.csv"), ok=True)
    assert "Traceback" not in out
    data = json.loads(_cell_file(camp).read_text())
    assert MARKUP_NAME in {k["name"] for k in data["kernels"]}
    code, out = run_cli("query", "--campaign", str(camp),
                        f"select name from ncu_kernels where name = '{MARKUP_NAME}'", ok=True)
    assert MARKUP_NAME in out


def test_control_characters_in_names_are_printed_escaped(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp")
    import_ncu(camp, CELL, RAW)
    code, out = run_cli("query", "--campaign", str(camp), "select 'a\x1b[31mred' || chr(10) || 'b' AS name", ok=True)
    assert "a\\x1b[31mred\\nb" in out and "\x1b" not in out


# -- 9. an empty or malformed cell file ----------------------------------------------------------------------------
@pytest.mark.parametrize(("content", "says"), [
    ("", "no JSON object (0 bytes or whitespace)"),
    ('{"schema_version": 1, "sources": [], "kernels": null}', "sources or kernels null or missing"),
    ('{"schema_version": 1}', "sources or kernels null or missing"),
])
def test_empty_or_null_cell_is_an_error_naming_the_file(example_campaign: Path, tmp_path: Path, content: str,
                                                       says: str) -> None:
    camp = tmp_path / "camp"
    shutil.copytree(example_campaign, camp)
    site = tmp_path / "site"
    run_cli("report_render", "--campaign", str(camp), "--out", str(site), ok=True)
    before = _snapshot(site)
    cell = camp / "cells" / "decode-b16-kv2048" / "ncu_kernels.json"
    cell.write_text(content)
    for args in (("report_render", "--campaign", str(camp), "--out", str(site)),
                 ("query", "--campaign", str(camp), "select count(*) from ncu_kernels")):
        code, out = run_cli(*args, ok=False)
        assert code == 2 and "Traceback" not in out
        assert f"'{cell}': {says}" in out and "import the cell's sources again" in out
    assert _snapshot(site) == before
    # the importer refuses to merge into it, naming it too
    code, out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "decode-b16-kv2048", "--bundle",
                        str(RAW), ok=False)
    assert code == 2 and str(cell) in out and "Traceback" not in out


# -- 13. the query verbs' sandbox ---------------------------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO '{victim}'",
    "SELECT * FROM read_text('{victim}')",
    "SELECT * FROM read_csv('{victim}')",
    "SELECT * FROM glob('{folder}/*')",
    "ATTACH '{folder}/x.duckdb' AS x",
    "INSTALL httpfs",
    "SET enable_external_access = true",
])
def test_query_verbs_refuse_file_system_extensions_and_settings(tmp_path: Path, sql: str) -> None:
    camp = write_config(tmp_path / "camp")
    import_ncu(camp, CELL, RAW)
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"PAR1 keep me")
    statement = sql.format(victim=victim, folder=tmp_path)
    code, out = run_cli("query", "--campaign", str(camp), statement, ok=False)
    assert code == 2 and "Traceback" not in out
    assert out.startswith("Error: refused: ") and "open DuckDB yourself" in out, out
    assert victim.read_bytes() == b"PAR1 keep me"
    assert not (tmp_path / "x.duckdb").exists()
    # the tables themselves still answer
    code, out = run_cli("query", "--campaign", str(camp), "select count(*) AS n from ncu_kernels", "--json", ok=True)
    assert json.loads(out)[0]["n"] > 0


def test_lake_query_is_sandboxed_too(example_campaign: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    run_cli("publish_to_lake", "--campaign", str(example_campaign), "--lake", str(lake), ok=True)
    before = _snapshot(lake)
    data = sorted(p for p in lake.rglob("*.parquet"))[0]
    code, out = run_cli("lake", "query", "--lake", str(lake), f"COPY (SELECT 1 AS x) TO '{data}' (FORMAT parquet)",
                        ok=False)
    assert code == 2 and "refused: " in out and "Traceback" not in out
    assert _snapshot(lake) == before
    with pytest.raises(PerfReportError):
        from perfreport.lake.query import lake_query
        lake_query(lake, "SELECT * FROM read_text('/etc/hostname')")


# -- 14. bounds every importer holds: gzip expansion, kernel-name length ----------------------------------------------
def test_gzip_bombs_are_refused_by_the_csv_and_trace_importers(tmp_path: Path) -> None:
    import gzip

    camp = write_config(tmp_path / "camp")
    csv_bomb = tmp_path / "bomb-raw.csv.gz"
    csv_bomb.write_bytes(gzip.compress(RAW.read_bytes()[:2000] + b"0" * (80 << 20), 9))  # one 80 MiB line
    trace_bomb = tmp_path / "bomb.json.gz"
    trace_bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (80 << 20) + b"]}", 9))
    for args in (("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle", str(csv_bomb)),
                 ("import_torch_trace", "--campaign", str(camp), "--cell-id", CELL, str(trace_bomb))):
        code, out = run_cli(*args, ok=False)
        assert code == 2 and "Traceback" not in out
        assert "expands past 67,108,864 bytes" in out and "gzip bomb" in out and args[-1] in out
    assert not (camp / "cells").exists() or not any((camp / "cells").rglob("*.json"))


def test_a_kernel_name_past_the_bound_is_refused_by_csv_and_time_share_importers(tmp_path: Path) -> None:
    from perfreport.kernels.identity import MAX_NAME_CHARS

    camp = _renamed_cell(tmp_path, "k" * (MAX_NAME_CHARS + 1))
    code, out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", CELL, "--bundle",
                        str(tmp_path / "named.csv"), ok=False)
    assert code == 2 and "a kernel name of 65,537 characters (at most 65,536 are read" in out
    assert "named.csv" in out and "Traceback" not in out and not _cell_file(camp).exists()
    samples = tmp_path / "long.csv"
    samples.write_text("kernel,samples\n" + "k" * (MAX_NAME_CHARS + 1) + ",5\nother,3\n")
    code, out = run_cli("import_samples", "--campaign", str(camp), "--cell-id", CELL, str(samples), ok=False)
    assert code == 2 and "a kernel name of 65,537 characters" in out and "long.csv" in out
