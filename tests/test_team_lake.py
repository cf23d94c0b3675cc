"""The team lake on real servers: `catalog:team`, a SQL catalog on PostgreSQL with its warehouse on an S3 server.

PostgreSQL is Debian's server (initdb + pg_ctl as the `postgres` user), the S3 endpoint SeaweedFS; both start once
per session on free loopback ports (tests/conftest.py) and every test gets its own database and bucket. Publishers
run as real processes, lined up at $PERFREPORT_LAKE_TEST_HOOK's `after-read` point so that they race for the commit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from conftest import TEAM_SECRET, TeamLake, free_port, run_cli
from test_lake import DECODE, PREFILL, make_campaign, unfill
from test_lake_concurrency import finish, start_publish, synthetic_campaign, wait_reached

from perfreport.lake.compare import lake_compare
from perfreport.lake.history import lake_history
from perfreport.lake.iceberg import NAMESPACE, TABLES

pytestmark = pytest.mark.team

TABLE_ROWS = "SELECT (SELECT count(*) FROM kernels) k, (SELECT count(*) FROM cells) c, " \
             "(SELECT count(*) FROM captures) s, (SELECT count(*) FROM publications) p"


def query(team: TeamLake, sql: str) -> list[dict[str, Any]]:
    """`lake query --format json` on the team catalog, parsed."""
    rows: list[dict[str, Any]] = json.loads(run_cli("lake", "query", "--lake", team.lake, "--format", "json", sql,
                                                    ok=True).output)
    return rows


def catalog_state(team: TeamLake) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the catalog's tables in PostgreSQL (none when the catalog was never created)."""
    engine = sqlalchemy.create_engine(team.uri)
    try:
        with engine.connect() as con:
            names = con.execute(sqlalchemy.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                                "ORDER BY 1")).scalars().all()
            return {n: [tuple(r) for r in con.execute(sqlalchemy.text(f"SELECT * FROM {n} ORDER BY 1, 2, 3"))]
                    for n in names}
    finally:
        engine.dispose()


def warehouse_files(team: TeamLake) -> dict[str, tuple[int, Any]]:
    """Every object under the warehouse prefix: key -> (size, modification time)."""
    from pyarrow import fs

    infos = team.s3.filesystem().get_file_info(fs.FileSelector(team.warehouse.removeprefix("s3://"),
                                                               recursive=True, allow_not_found=True))
    return {i.path: (i.size, i.mtime) for i in infos if i.type == fs.FileType.File}


def test_publish_query_history_compare_on_postgresql_and_s3(team_lake: TeamLake, tmp_path: Path) -> None:
    camp = synthetic_campaign(tmp_path / "team-sweep", cells=4, kernels=3)  # concurrency 1..4, all else equal
    out = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, "--who", "ana", ok=True)
    assert "wrote 12 kernels, 4 cells, " in out.output and "to lake catalog:team (publication pub-" in out.output
    assert "committed: one atomic commit of all tables, attempt 1" in out.output
    example = make_campaign(tmp_path / "h200-decoder-layer")
    run_cli("publish_to_lake", "--campaign", str(example), "--lake", team_lake.lake, "--who", "ben", ok=True)

    pointers = catalog_state(team_lake)["iceberg_tables"]  # where PostgreSQL says each table's metadata is
    prefix = f"{team_lake.warehouse}/{NAMESPACE}/"
    assert [(r[0], r[1], r[2]) for r in pointers] == [("team", NAMESPACE, t) for t in sorted(TABLES)]
    assert all(r[3].startswith(prefix + r[2] + "/metadata/") and r[3].endswith(".metadata.json") for r in pointers)
    files = warehouse_files(team_lake)
    bucket = team_lake.warehouse.removeprefix("s3://")
    data = sorted(k.removeprefix(f"{bucket}/{NAMESPACE}/kernels/data/").split("/")[0] for k in files
                  if "/kernels/data/" in k)
    assert data == ["campaign=h200-decoder-layer", "campaign=team-sweep"]  # one Parquet file per campaign

    sources = sum(len(json.loads(p.read_text())["sources"]) for p in camp.glob("cells/*/ncu_kernels.json"))
    assert query(team_lake, TABLE_ROWS) == [{"k": 51, "c": 6, "s": 4 + sources, "p": 2}]
    per_cell = query(team_lake, "SELECT campaign, cell_id, count(*) n, sum(duration_ns) d FROM kernels "
                                "GROUP BY 1, 2 ORDER BY 1, 2")
    assert [(r["campaign"], r["cell_id"], r["n"]) for r in per_cell] == [
        ("h200-decoder-layer", DECODE, 21), ("h200-decoder-layer", PREFILL, 18),
        *(("team-sweep", f"cell-{c:03d}", 3) for c in range(4))]
    assert [r["d"] for r in per_cell[2:]] == [3 * 1000 * (c + 1) + 3 for c in range(4)]  # 1000(c+1) + 0, 1, 2
    assert query(team_lake, "SELECT who FROM publications ORDER BY published_at") == [{"who": "ana"}, {"who": "ben"}]

    first = lake_history(team_lake.lake, "kernels")
    assert [(c.operation, c.counts["total-records"]) for c in first] == [("append", 12), ("append", 51)]
    snapshot = first[0].snapshot_id
    cell = camp / "cells" / "cell-002" / "ncu_kernels.json"
    doc = json.loads(cell.read_text())
    doc["kernels"] = doc["kernels"][:1]
    cell.write_text(json.dumps(doc))
    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, "--cell-id", "cell-002", ok=True)
    history = lake_history(team_lake.lake, "kernels")
    assert [(c.operation, c.counts["total-records"]) for c in history] == [
        ("append", 12), ("append", 51), ("overwrite+append", 49)]  # the replace's two snapshots, one commit
    assert history[2].counts["deleted-records"] == 12 and history[2].folded
    shown = run_cli("lake", "history", "--lake", team_lake.lake, "--table", "kernels", ok=True).output
    assert all(str(c.snapshot_id) in shown for c in history)
    assert query(team_lake, "SELECT count(*) n FROM kernels WHERE cell_id = 'cell-002'") == [{"n": 1}]
    at_first = run_cli("lake", "query", "--lake", team_lake.lake, "--snapshot", str(snapshot), "--format", "csv",
                       "SELECT count(*) n, count(DISTINCT campaign) c FROM kernels", ok=True)
    assert at_first.output.splitlines() == ["n,c", "12,1"]  # time travel to the first publish

    compared = lake_compare(team_lake.lake, "duration_ns", campaign="team-sweep", vary="workload.concurrency")
    assert compared.not_comparable == [] and len(compared.groups) == 1
    group = compared.groups[0]
    assert [(cell, value) for _, cell, value in group.cells] == [(f"cell-{c:03d}", c + 1) for c in range(4)]
    assert group.columns[3:] == [f"concurrency={c}" for c in range(1, 5)]
    # each cell's kernels are its own picks of real kernels, so a function shows in the cells that picked it
    by_kernel = {row[:3]: row[3:] for row in group.rows}
    assert sum(v is not None for row in by_kernel.values() for v in row) == 3 + 3 + 1 + 3  # cell-002 has 1 now
    assert {v for row in by_kernel.values() for v in row if v is not None} == {
        1000.0, 1001.0, 1002.0, 2000.0, 2001.0, 2002.0, 3000.0, 4000.0, 4001.0, 4002.0}
    shown = run_cli("lake", "compare", "--lake", team_lake.lake, "--metric", "duration_ns", "--campaign", "team-sweep",
                    "--vary", "workload.concurrency", ok=True).output  # the verb prints what lake_compare returns
    assert all(f"team-sweep/cell-{c:03d}" in shown for c in range(4)) and "concurrency=4" in shown


def test_fsspec_s3_file_io_reads_what_pyarrow_wrote(team_lake: TeamLake, tmp_path: Path) -> None:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.io.fsspec import FsspecFileIO

    camp = make_campaign(tmp_path / "h200-decoder-layer")
    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, ok=True)
    catalog = load_catalog("team", **team_lake.properties(), **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    kernels = catalog.load_table(f"{NAMESPACE}.kernels")
    assert isinstance(kernels.io, FsspecFileIO)  # s3fs, from the [team] extra
    rows = kernels.scan(selected_fields=("cell_id",)).to_arrow().column("cell_id").to_pylist()
    assert (rows.count(DECODE), rows.count(PREFILL)) == (21, 18)


def scaled(campaign: Path, dst: Path, factor: float) -> Path:
    """A copy of campaign (same id, same cells) whose kernel durations are multiplied by factor."""
    shutil.copytree(campaign, dst)
    for path in dst.glob("cells/*/ncu_kernels.json"):
        doc = json.loads(path.read_text())
        for k in doc["kernels"]:
            k["duration_ns"] *= factor
        path.write_text(json.dumps(doc))
    return dst


def race(team: TeamLake, tmp_path: Path, publishers: list[tuple[str, Path]]) -> dict[str, tuple[int, str]]:
    """Start one publisher process per (who, campaign), release them together once all read the catalog."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    procs = [start_publish(camp, team.lake, who, "after-read", hooks) for who, camp in publishers]
    wait_reached(hooks, "after-read", procs)
    (hooks / "after-read.go").touch()
    return dict(zip((who for who, _ in publishers), finish(procs), strict=True))


def attempt(output: str) -> int:
    """The commit attempt a publish's summary reports."""
    return int(output.split("committed: one atomic commit of all tables, attempt ")[1].split()[0])


def test_four_processes_publish_four_campaigns_into_one_catalog_each_whole(team_lake: TeamLake,
                                                                          tmp_path: Path) -> None:
    camps = [synthetic_campaign(tmp_path / f"team-{g}", cells=5, kernels=4) for g in "abcd"]
    results = race(team_lake, tmp_path, [(f"p{g}", c) for g, c in zip("abcd", camps, strict=True)])
    for code, out in results.values():
        assert code == 0 and "wrote 20 kernels, 5 cells, " in out, out
    # all four read the same (empty) catalog: the first commit won, each other one lost the race, re-read the
    # tables, found other campaigns only and committed on top; none was lost
    attempts = sorted(attempt(out) for _, out in results.values())
    assert attempts.count(1) == 1 and min(attempts[1:]) >= 2
    ledger = {r["who"]: r for r in query(team_lake, "SELECT who, campaign, publication_id, kernel_rows FROM "
                                                    "publications")}
    assert sorted(ledger) == ["pa", "pb", "pc", "pd"]
    for g in "abcd":
        pub = ledger[f"p{g}"]
        assert (pub["campaign"], pub["kernel_rows"]) == (f"team-{g}", 20)
        for table, rows in (("kernels", 20), ("cells", 5)):
            got = query(team_lake, f"SELECT count(*) n, count(DISTINCT cell_id) cells, min(publication_id) lo, "
                                   f"max(publication_id) hi FROM {table} WHERE campaign = 'team-{g}'")
            assert got == [{"n": rows, "cells": 5, "lo": pub["publication_id"], "hi": pub["publication_id"]}], table
    assert query(team_lake, TABLE_ROWS)[0]["k"] == 80
    commits = lake_history(team_lake.lake, "publications")
    assert [c.counts["total-records"] for c in commits] == [1, 2, 3, 4]  # one commit per publisher, none lost


def test_same_cells_from_two_of_four_processes_one_is_refused_whole(team_lake: TeamLake, tmp_path: Path) -> None:
    a = synthetic_campaign(tmp_path / "team-a", cells=3, kernels=4)
    a_again = scaled(a, tmp_path / "again" / "team-a", 10.0)  # the same campaign and cells, other durations
    b = synthetic_campaign(tmp_path / "team-b", cells=3, kernels=4)
    c = synthetic_campaign(tmp_path / "team-c", cells=3, kernels=4)
    results = race(team_lake, tmp_path, [("alice", a), ("dave", a_again), ("bob", b), ("carol", c)])
    assert results["bob"][0] == 0 and results["carol"][0] == 0, results
    winners = [who for who in ("alice", "dave") if results[who][0] == 0]
    assert len(winners) == 1, results
    winner, loser = winners[0], ({"alice", "dave"} - set(winners)).pop()
    code, out = results[loser]
    assert code == 2 and "Traceback" not in out
    won = query(team_lake, f"SELECT publication_id FROM publications WHERE who = '{winner}'")[0]["publication_id"]
    assert "conflict on team-a/cell-000, team-a/cell-001, team-a/cell-002: another publish committed these cells " \
           f"while this one was running (publication {won} by '{winner}' at " in out
    assert "Nothing was written by this publish; the lake keeps the other one." in out
    assert sorted(r["who"] for r in query(team_lake, "SELECT who FROM publications")) == sorted(
        ["bob", "carol", winner])
    factor = 10.0 if winner == "dave" else 1.0  # team-a is the winner's rows only, in every table
    assert query(team_lake, "SELECT count(*) n, sum(duration_ns) d, min(publication_id) lo, max(publication_id) hi "
                            "FROM kernels WHERE campaign = 'team-a'") == [
        {"n": 12, "d": factor * sum(4 * 1000 * (c + 1) + 6 for c in range(3)), "lo": won, "hi": won}]
    for table in ("cells", "captures"):
        assert query(team_lake, f"SELECT DISTINCT publication_id FROM {table} WHERE campaign = 'team-a'") == [
            {"publication_id": won}], table
    assert query(team_lake, TABLE_ROWS)[0] == {"k": 36, "c": 9, "s": query(team_lake, "SELECT count(*) n FROM "
                                                                                      "captures")[0]["n"], "p": 3}


def test_strict_refusal_leaves_catalog_and_warehouse_unchanged(team_lake: TeamLake, tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / "h200-decoder-layer", unfill)  # the example with its n/a fields emptied
    fresh = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, "--strict")
    assert fresh.exit_code == 2 and "Nothing was written" in fresh.output and "Traceback" not in fresh.output
    assert catalog_state(team_lake) == {} and warehouse_files(team_lake) == {}  # not even the catalog's tables

    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, "--who", "first", ok=True)
    catalog, files = catalog_state(team_lake), warehouse_files(team_lake)
    assert len(catalog["iceberg_tables"]) == len(TABLES) and len(files) > 12
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("cache: warm", "cache: cold"))
    refused = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, "--strict")
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert f"  - context.serving.max_num_seqs: missing (cell(s) {PREFILL}, {DECODE})" in refused.output
    assert catalog_state(team_lake) == catalog  # every catalog row, byte for byte
    assert warehouse_files(team_lake) == files  # every object, same size and time
    assert query(team_lake, "SELECT DISTINCT cache, publication_id FROM kernels") == query(
        team_lake, "SELECT DISTINCT cache, publication_id FROM cells")
    assert query(team_lake, "SELECT DISTINCT cache FROM kernels") == [{"cache": "warm"}]


def test_unreachable_catalog_storage_or_driver_is_one_message_without_traceback(
        team_lake: TeamLake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    camp = make_campaign(tmp_path / "h200-decoder-layer")
    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, ok=True)
    down = f"127.0.0.1:{free_port()}"
    cases = {
        ("URI", team_lake.uri.replace(TEAM_SECRET, "wrong-pw")):
            ["cannot use the catalog database postgresql+psycopg2://iceberg:***@127.0.0.1:",
             'password authentication failed for user "iceberg"', "PYICEBERG_CATALOG__TEAM__URI"],
        ("URI", f"postgresql+psycopg2://iceberg:x@{down}/lake"):
            [f"cannot use the catalog database postgresql+psycopg2://iceberg:***@{down}/lake", "Connection refused",
             "Check that the server is up"],
        ("URI", team_lake.uri.replace("psycopg2", "pg8000")):
            ["catalog 'team' (type sql) needs a package that is not installed (No module named 'pg8000')",
             "pip install 'perfreport[team]'"],
        ("S3__SECRET_ACCESS_KEY", "wrong-key"):
            ["the object store did not serve 's3://", "ACCESS_DENIED", "s3.secret-access-key"],
        ("S3__ENDPOINT", f"http://{down}"):
            ["the object store did not serve 's3://", "check that the endpoint is up"],
    }
    for (key, value), expected in cases.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__TEAM__{key}", value)
        for verb in (["lake", "query", "--lake", team_lake.lake, "SELECT count(*) FROM kernels"],
                     ["publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake]):
            got = run_cli(*verb)
            assert got.exit_code == 2 and isinstance(got.exception, SystemExit), (key, value, got.output)
            for part in expected:
                assert part in got.output, (key, value, got.output)
            assert "wrong-pw" not in got.output and "Traceback" not in got.output
        monkeypatch.setenv(f"PYICEBERG_CATALOG__TEAM__{key}", team_lake.properties()[
            key.lower().replace("__", ".").replace("_", "-")])
    assert query(team_lake, TABLE_ROWS) == [{"k": 39, "c": 2, "s": 4, "p": 1}]  # nothing reached the lake


@pytest.mark.parametrize("days", [8, -3])
def test_a_publish_from_a_wrong_clock_is_refused_by_the_catalog_servers_clock(
        team_lake: TeamLake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days: int) -> None:
    """Issue 29, item 6: PostgreSQL's now() is the lake's clock; a host days off it publishes nothing."""
    from datetime import UTC, datetime, timedelta

    from perfreport.lake import writer

    camp = synthetic_campaign(tmp_path / "clock", cells=1, kernels=2)
    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, ok=True)
    before, objects = catalog_state(team_lake), warehouse_files(team_lake)
    real = datetime

    class Off(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
            return real.now(tz or UTC) + timedelta(days=days)

    monkeypatch.setattr(writer, "datetime", Off)
    out = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, ok=False).output
    (line,) = [x for x in out.splitlines() if x.startswith("Error:")]
    gap = f"{abs(days) * 24:,}"
    assert f"{'ahead of' if days > 0 else 'behind'} the lake's catalog server" in line
    assert f", {gap}.0 h " in line and "PostgreSQL now()" in line and "within 10 min" in line
    assert "nothing was written" in line and "Traceback" not in out
    assert catalog_state(team_lake) == before and warehouse_files(team_lake) == objects
    monkeypatch.setattr(writer, "datetime", real)  # the right clock publishes again
    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", team_lake.lake, ok=True)
