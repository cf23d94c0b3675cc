"""Lake writes under pressure: concurrent publishers, kill -9 mid-publish, same-cell conflicts, re-publish,
DuckDB reading pyiceberg's files, named catalogs from PYICEBERG_* variables, and relocation of a moved lake.

Publishers run as real processes (`python -m perfreport publish_to_lake`); $PERFREPORT_LAKE_TEST_HOOK makes a
writer stop at a named point (after reading the tables, before the catalog commit, inside it) and wait for a
`<point>.go` file, so the test can line writers up or SIGKILL one at an exact step.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import run_cli, write_config
from test_lake import DECODE, PREFILL, make_campaign

from perfreport.lake.commit import HOOK_ENV, REST_TRANSACTIONS, rest_payload
from perfreport.lake.history import lake_history
from perfreport.lake.iceberg import NAMESPACE, TABLES, load_tables, open_catalog
from perfreport.lake.query import lake_query
from perfreport.lake.writer import publish_to_lake

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
CAMPAIGN = "h200-decoder-layer"
TABLE_ROWS = "SELECT (SELECT count(*) FROM kernels) k, (SELECT count(*) FROM cells) c, " \
             "(SELECT count(*) FROM captures) s, (SELECT count(*) FROM publications) p"


def synthetic_campaign(dst: Path, cells: int, kernels: int) -> Path:
    """A campaign of `cells` cells, each holding `kernels` real H200 kernel rows (tests/golden) with its own
    durations (cell c, kernel j: 1000 * (c + 1) + j ns), written as imported ncu_kernels.json."""
    real = []
    for path in sorted(GOLDEN.glob("*/ncu_kernels.json")):
        data = json.loads(path.read_text())
        sources = {s["id"]: s for s in data["sources"]}
        real += [(k, sources[k["source"]]) for k in data["kernels"]]
    config: list[dict[str, Any]] = []
    for c in range(cells):
        cid = f"cell-{c:03d}"
        config.append({"id": cid, "context": {"workload": {"concurrency": 1 + c % 8}}})
        picked = [real[(c * kernels + j) % len(real)] for j in range(kernels)]
        rows = [{**k, "id": f"k{j:03d}", "duration_ns": float(1000 * (c + 1) + j)} for j, (k, _) in enumerate(picked)]
        sources = sorted({s["id"]: s for _, s in picked}.values(), key=lambda s: s["id"])
        out = dst / "cells" / cid
        out.mkdir(parents=True)
        (out / "ncu_kernels.json").write_text(json.dumps({
            "schema_version": 1, "campaign": dst.name, "cell_id": cid, "hardware": "h200_sm90",
            "ceilings_sources": ["sol-ceilings.yaml"], "sources": sources, "kernels": rows}))
    context = {"identity": {"model": "synthetic"}, "grounding": {"trials": 3}}
    return write_config(dst, campaign=dst.name, context=context, cells=config)


def start_publish(campaign: Path, lake: Path, who: str, hook: str | None = None, hooks: Path | None = None,
                  cells: list[str] | None = None) -> subprocess.Popen[str]:
    """Start `python -m perfreport publish_to_lake` in its own process, optionally paused at a hook point."""
    env = {k: v for k, v in os.environ.items() if k != HOOK_ENV}
    if hook is not None:
        env[HOOK_ENV] = f"{hook}:{hooks}"
    argv = [sys.executable, "-m", "perfreport", "publish_to_lake", "--campaign", str(campaign), "--lake", str(lake),
            "--who", who, *(a for c in cells or [] for a in ("--cell-id", c))]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=campaign.parent)


def wait_reached(hooks: Path, point: str, procs: list[subprocess.Popen[str]], timeout: float = 90) -> None:
    """Wait until every process paused at `point`; fail with the output of one that exited instead."""
    deadline = time.monotonic() + timeout
    while len(list(hooks.glob(f"{point}.*.reached"))) < len(procs):
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"publisher exited {p.returncode} before {point}:\n{p.communicate()[0]}")
        assert time.monotonic() < deadline, f"publishers did not reach {point}"
        time.sleep(0.05)


def finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    """Wait for every process; return (exit code, output) each."""
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    return [(p.returncode, out) for p, out in zip(procs, outputs, strict=True)]


def catalog_rows(lake: Path) -> list[tuple[str, str]]:
    """(table, metadata_location) as catalog.db holds them."""
    with sqlite3.connect(lake / "catalog.db") as con:
        return con.execute("SELECT table_name, metadata_location FROM iceberg_tables ORDER BY 1").fetchall()


def cell_publication_ids(lake: Path) -> dict[str, set[tuple[str, str]]]:
    """Per table, the distinct (cell_id, publication_id) pairs."""
    return {t: set(lake_query(lake, f"SELECT DISTINCT cell_id, publication_id FROM {t}").rows)
            for t in ("kernels", "cells", "captures")}


def test_four_publishers_of_25_cells_each_land_exactly_100_cells(tmp_path: Path) -> None:
    camp = synthetic_campaign(tmp_path / "synthetic", cells=100, kernels=4)
    lake, hooks = tmp_path / "lake", tmp_path / "hooks"
    hooks.mkdir()
    groups = [[f"cell-{c:03d}" for c in range(g, 100, 4)] for g in range(4)]  # interleaved: same partition
    procs = [start_publish(camp, lake, f"p{g}", "after-read", hooks, cells) for g, cells in enumerate(groups)]
    wait_reached(hooks, "after-read", procs)  # all four read the (fresh) lake before anyone commits
    (hooks / "after-read.go").touch()
    results = finish(procs)
    for code, out in results:
        assert code == 0, out
        assert "wrote 100 kernels, 25 cells, " in out and "one atomic commit of all tables" in out
    sources = sum(len(json.loads(p.read_text())["sources"]) for p in camp.glob("cells/*/ncu_kernels.json"))
    assert sources == 137  # cells whose 4 kernels straddle two captures have two
    assert lake_query(lake, TABLE_ROWS).rows == [(400, 100, sources, 4)]
    unique = lake_query(lake, "SELECT count(DISTINCT (campaign, cell_id, kernel_id)), count(DISTINCT (campaign, "
                              "cell_id)) FROM kernels").rows
    assert unique == [(400, 100)]
    ledger = lake_query(lake, "SELECT who, cells, publication_id FROM publications ORDER BY who").rows
    assert [(who, sorted(cells)) for who, cells, _ in ledger] == [(f"p{g}", groups[g]) for g in range(4)]
    owner = {cell: pub for _, cells, pub in ledger for cell in cells}
    for table, pairs in cell_publication_ids(lake).items():
        assert pairs == set(owner.items()), table
    durations = lake_query(lake, "SELECT cell_id, min(duration_ns), max(duration_ns) FROM kernels "
                                 "WHERE cell_id IN ('cell-000', 'cell-099') GROUP BY 1 ORDER BY 1").rows
    assert durations == [("cell-000", 1000.0, 1003.0), ("cell-099", 100000.0, 100003.0)]
    assert len(lake_history(lake, "kernels")) == 4  # one commit per publisher


def edited(camp: Path, dst: Path, old: str, new: str) -> Path:
    """A copy of the imported campaign whose config.yaml has `old` replaced by `new`: other rows, same cells."""
    shutil.copytree(camp, dst)
    config = dst / "config.yaml"
    assert old in config.read_text()
    config.write_text(config.read_text().replace(old, new))
    return dst


def test_same_cell_two_publishers_one_wins_the_other_gets_a_conflict(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / CAMPAIGN)
    lake, hooks = tmp_path / "lake", tmp_path / "hooks"
    hooks.mkdir()
    publish_to_lake(camp, lake=lake, who="first")
    # each writes other rows than the lake holds and than the other one (an identical publish writes nothing)
    theirs = {"alice": edited(camp, tmp_path / "alice" / CAMPAIGN, "cache: warm", "cache: cold"),
              "bob": edited(camp, tmp_path / "bob" / CAMPAIGN, "same_node: true", "same_node: false")}
    procs = [start_publish(theirs[who], lake, who, "after-read", hooks, [DECODE]) for who in ("alice", "bob")]
    wait_reached(hooks, "after-read", procs)  # both built on the same lake state
    (hooks / "after-read.go").touch()
    results = dict(zip(("alice", "bob"), finish(procs), strict=True))
    winners = [who for who, (code, _) in results.items() if code == 0]
    assert len(winners) == 1, results
    winner, loser = winners[0], ({"alice", "bob"} - set(winners)).pop()
    code, out = results[loser]
    assert code == 2 and "Traceback" not in out
    ledger = lake_query(lake, f"SELECT who, publication_id FROM publications WHERE who = '{winner}'").rows
    assert len(ledger) == 1
    snapshot = lake_history(lake, "publications")[-1].snapshot_id
    assert (f"conflict on {CAMPAIGN}/{DECODE}: another publish committed these cells while this one was running "
            f"(publication {ledger[0][1]} by '{winner}' at ") in out
    assert f"publications snapshot {snapshot}). Nothing was written by this publish" in out
    assert "run publish_to_lake again" in out
    assert lake_query(lake, TABLE_ROWS).rows == [(39, 2, 4, 2)]
    assert lake_query(lake, f"SELECT count(DISTINCT kernel_id) FROM kernels WHERE cell_id = '{DECODE}'").rows == [
        (21,)]
    assert lake_query(lake, "SELECT who FROM publications ORDER BY published_at").rows == [("first",), (winner,)]
    publish_to_lake(theirs[loser], lake=lake, who=loser, cell_ids=[DECODE])
    assert lake_query(lake, TABLE_ROWS).rows == [(39, 2, 4, 3)]  # a sequential re-publish simply replaces
    assert lake_query(lake, "SELECT who FROM publications ORDER BY published_at DESC LIMIT 1").rows == [(loser,)]


def test_two_identical_publishers_racing_write_one_publication_and_the_other_says_nothing_changed(
        tmp_path: Path) -> None:
    """The loser of the race re-reads the lake, finds its very rows committed by the winner: no conflict, no
    second publication, exit 0."""
    camp = make_campaign(tmp_path / CAMPAIGN)
    lake, hooks = tmp_path / "lake", tmp_path / "hooks"
    hooks.mkdir()
    publish_to_lake(edited(camp, tmp_path / "old" / CAMPAIGN, "cache: warm", "cache: cold"), lake=lake, who="old")
    procs = [start_publish(camp, lake, who, "after-read", hooks, [DECODE]) for who in ("alice", "bob")]
    wait_reached(hooks, "after-read", procs)  # both read the old rows: both set out to write
    (hooks / "after-read.go").touch()
    results = dict(zip(("alice", "bob"), finish(procs), strict=True))
    assert all(code == 0 and "Traceback" not in out for code, out in results.values()), results
    wrote = [who for who, (_, out) in results.items() if "committed: one atomic commit of all tables" in out]
    assert len(wrote) == 1, results
    winner, loser = wrote[0], ({"alice", "bob"} - set(wrote)).pop()
    (won,) = lake_query(lake, f"SELECT publication_id FROM publications WHERE who = '{winner}'").rows
    assert results[loser][1].splitlines()[0] == (
        f"campaign {CAMPAIGN}: nothing changed: publication {won[0]} already holds these rows (21 kernels, 1 cells, "
        f"2 captures) in lake {lake}; nothing written")
    assert lake_query(lake, "SELECT who FROM publications ORDER BY published_at").rows == [("old",), (winner,)]
    assert lake_query(lake, f"SELECT DISTINCT cache FROM kernels WHERE cell_id = '{DECODE}'").rows == [("warm",)]


@pytest.mark.parametrize("point", ["before-commit", "mid-commit"])
def test_kill_9_during_publish_leaves_the_old_cells_whole(point: str, tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / CAMPAIGN)
    lake, hooks = tmp_path / "lake", tmp_path / "hooks"
    hooks.mkdir()
    first = publish_to_lake(camp, lake=lake, who="first")
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("cache: warm", "cache: cold"))
    pointers = catalog_rows(lake)
    proc = start_publish(camp, lake, "killed", point, hooks)
    wait_reached(hooks, point, [proc])
    staged = set(lake.rglob("*.metadata.json")) - {Path(p.removeprefix("file://")) for _, p in pointers}
    if point == "mid-commit":  # the writer holds the catalog transaction open: readers still see the old lake
        assert lake_query(lake, "SELECT DISTINCT cache FROM kernels").rows == [("warm",)]
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert catalog_rows(lake) == pointers  # the catalog still points at the first publish's metadata
    assert len([p for p in staged if "00002-" in p.name]) == len(TABLES)  # the killed writer had written its new ones
    assert lake_query(lake, TABLE_ROWS).rows == [(39, 2, 4, 1)]
    for table in ("kernels", "cells"):
        assert lake_query(lake, f"SELECT DISTINCT cache FROM {table}").rows == [("warm",)], table
    for table, pairs in cell_publication_ids(lake).items():
        assert pairs == {(DECODE, first.publication_id), (PREFILL, first.publication_id)}, table
    assert [len(lake_history(lake, t)) for t in TABLES] == [1] * len(TABLES)
    again = publish_to_lake(camp, lake=lake, who="again")  # the next publish just works
    assert again.publication_id != first.publication_id
    assert lake_query(lake, TABLE_ROWS).rows == [(39, 2, 4, 2)]
    assert lake_query(lake, "SELECT DISTINCT k.cache, c.cache FROM kernels k JOIN cells c USING (cell_id)").rows == [
        ("cold", "cold")]
    for table, pairs in cell_publication_ids(lake).items():
        assert pairs == {(DECODE, again.publication_id), (PREFILL, again.publication_id)}, table


def test_republish_replaces_rows_in_one_commit_per_publish(tmp_path: Path) -> None:
    camp = synthetic_campaign(tmp_path / "synthetic", cells=3, kernels=5)
    lake = tmp_path / "lake"
    publish_to_lake(camp, lake=lake)
    cell = camp / "cells" / "cell-001" / "ncu_kernels.json"
    data = json.loads(cell.read_text())
    data["kernels"] = data["kernels"][:2]
    for k in data["kernels"]:
        k["duration_ns"] = 7.5
    cell.write_text(json.dumps(data))
    second = publish_to_lake(camp, lake=lake, cell_ids=["cell-001"])
    assert second.atomic and second.attempts == dict.fromkeys(TABLES, 1)
    rows = lake_query(lake, "SELECT cell_id, count(*), sum(duration_ns), min(publication_id) FROM kernels "
                            "GROUP BY 1 ORDER BY 1").rows
    assert [r[:3] for r in rows] == [("cell-000", 5, 5010.0), ("cell-001", 2, 15.0), ("cell-002", 5, 15010.0)]
    assert rows[1][3] == second.publication_id and rows[0][3] != second.publication_id
    assert lake_query(lake, "SELECT kernel_count FROM cells WHERE cell_id = 'cell-001'").rows == [(2,)]
    kernels = lake_history(lake, "kernels")
    assert len(kernels) == 2 and kernels[1].counts["total-records"] == 12
    # copy-on-write: the campaign's one data file (15 rows) is replaced by its 10 kept rows + the 2 new ones
    assert (kernels[1].counts["deleted-records"], kernels[1].counts["added-records"]) == (15, 12)


def duckdb_rows(table: Any, order: str) -> list[tuple[Any, ...]]:
    """Read the current snapshot's data files with DuckDB's read_parquet, independently of pyiceberg's scan."""
    files = [p.removeprefix("file://") for p in table.inspect.files().column("file_path").to_pylist()]
    con = duckdb.connect()
    try:
        return con.execute(f"SELECT * FROM read_parquet($1) ORDER BY {order}", [files]).fetchall()
    finally:
        con.close()


def test_duckdb_reads_the_same_rows_as_pyiceberg(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / CAMPAIGN)
    lake = tmp_path / "lake"
    publish_to_lake(camp, lake=lake)
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("cache: warm", "cache: cold"))
    publish_to_lake(camp, lake=lake, cell_ids=[DECODE])  # a replace: DuckDB must not see the deleted files
    tables = load_tables(open_catalog(lake), ["kernels", "cells", "captures", "publications"])
    orders = {"kernels": "cell_id, kernel_id", "cells": "cell_id", "captures": "cell_id, source_id",
              "publications": "published_at"}
    for name, order in orders.items():
        ours = lake_query(lake, f"SELECT * FROM {name} ORDER BY {order}")
        theirs = duckdb_rows(tables[name], order)
        assert len(theirs) == len(ours.rows) == {"kernels": 39, "cells": 2, "captures": 4, "publications": 2}[name]
        assert theirs == ours.rows, name
    gemm = duckdb_rows(tables["kernels"], "sol_pct DESC NULLS LAST")[0]
    cols = lake_query(lake, "SELECT * FROM kernels LIMIT 0").columns
    top = dict(zip(cols, gemm, strict=True))
    assert top["sol_ceiling_key"].startswith("h200_sm90.") and top["sol_pct"] == pytest.approx(
        lake_query(lake, "SELECT max(sol_pct) FROM kernels").rows[0][0])


def test_named_catalog_from_pyiceberg_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    camp = make_campaign(tmp_path / CAMPAIGN)
    (tmp_path / "wh").mkdir()
    monkeypatch.setenv("PYICEBERG_CATALOG__TEAM__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEAM__URI", f"sqlite:///{tmp_path / 'team.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEAM__WAREHOUSE", (tmp_path / "wh").as_uri())
    out = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", "catalog:team", ok=True)
    assert "to lake catalog:team (publication pub-" in out.output and "one atomic commit" in out.output
    monkeypatch.setenv("PERFREPORT_LAKE", "catalog:team")
    out = run_cli("lake", "query", "--format", "csv", "SELECT cell_id, count(*) n FROM kernels GROUP BY 1 ORDER BY 1",
                  ok=True)
    assert out.output.splitlines() == ["cell_id,n", f"{DECODE},21", f"{PREFILL},18"]
    rows = sqlite3.connect(tmp_path / "team.db").execute(
        "SELECT catalog_name, table_namespace, table_name FROM iceberg_tables ORDER BY 3").fetchall()
    assert rows == [("team", NAMESPACE, t) for t in sorted(TABLES)]
    assert list((tmp_path / "wh" / NAMESPACE / "kernels" / "data").iterdir())
    bad = run_cli("lake", "query", "--lake", "catalog:nope", "SELECT 1")
    assert bad.exit_code == 2 and "no catalog 'nope' configured. Set PYICEBERG_CATALOG__NOPE__URI" in bad.output


def test_relocate_a_copied_lake_then_query_time_travel_and_publish(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / CAMPAIGN)
    old = tmp_path / "old" / "lake"
    publish_to_lake(camp, lake=old)
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("cache: warm", "cache: cold"))
    publish_to_lake(camp, lake=old, cell_ids=[DECODE])
    sql = "SELECT cell_id, cache, count(*), sum(duration_ns) FROM kernels GROUP BY 1, 2 ORDER BY 1"
    before = lake_query(old, sql).rows
    first = lake_history(old, "kernels")[0].snapshot_id
    new = tmp_path / "new place" / "lake"  # a space: file URIs percent-encode it
    shutil.copytree(old, new)
    shutil.rmtree(old.parent)
    moved = run_cli("lake", "query", "--lake", str(new), "SELECT 1")
    assert moved.exit_code == 2 and f"absolute paths under '{old}'" in moved.output
    assert f"perftunereport lake relocate --lake {new}" in moved.output
    out = run_cli("lake", "relocate", "--lake", str(new), ok=True)
    assert out.output.splitlines()[0] == f"lake {new}: relocated from {old}"
    assert "  kernels: 3 snapshot(s), " in out.output
    assert lake_query(new, sql).rows == before
    assert lake_query(new, "SELECT DISTINCT cache FROM kernels", snapshot=first).rows == [("warm",)]
    tables = load_tables(open_catalog(new), ["kernels"])
    assert len(duckdb_rows(tables["kernels"], "cell_id")) == 39
    assert all(str(new) in f for f in (p.removeprefix("file://") for p in
                                       tables["kernels"].inspect.files().column("file_path").to_pylist()))
    again = run_cli("lake", "relocate", "--lake", str(new))
    assert again.exit_code == 0 and "already at its place" in again.output
    publish_to_lake(camp, lake=new)
    assert lake_query(new, TABLE_ROWS).rows == [(39, 2, 4, 3)]
    assert not (tmp_path / "old").exists()  # nothing was written back to the old place


class FakeResponse:
    def __init__(self, status: int, text: str = "") -> None:
        self.status_code, self.text = status, text


def test_rest_catalog_commits_all_tables_in_one_transactions_request(tmp_path: Path) -> None:
    from pyiceberg.catalog.rest import Endpoint, RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    from perfreport.lake import commit

    camp = make_campaign(tmp_path / CAMPAIGN)
    lake = tmp_path / "lake"
    publish_to_lake(camp, lake=lake)
    tables = load_tables(open_catalog(lake), commit.TABLES)
    pub = commit.Publish(CAMPAIGN, [DECODE], {n: tables[n].scan().to_arrow().slice(0, 1) for n in commit.TABLES},
                         "pub-x", "rest-user", datetime.now(UTC))
    txs = [commit._transaction(tables[n], n, pub) for n in commit.TABLES]
    body = rest_payload(txs)
    assert [c["identifier"] for c in body["table-changes"]] == [
        {"namespace": [NAMESPACE], "name": n} for n in TABLES]
    kernels = body["table-changes"][0]
    assert {r["type"] for r in kernels["requirements"]} == {"assert-ref-snapshot-id", "assert-table-uuid"}
    assert [u["action"] for u in kernels["updates"]][-2:] == ["add-snapshot", "set-snapshot-ref"]
    assert json.loads(kernels["updates"][-2]["snapshot"]["summary"][commit.MARK])["cells"] == [DECODE]

    posted: list[tuple[str, dict[str, Any]]] = []
    rest = RestCatalog.__new__(RestCatalog)
    rest.name, rest.properties, rest.uri = "team", {"uri": "http://rest.example:8181"}, "http://rest.example:8181"
    rest._supported_endpoints = {Endpoint.from_string(f"POST /v1/{{prefix}}/{REST_TRANSACTIONS}")}

    class Session:
        status = 204

        def post(self, url: str, data: bytes) -> FakeResponse:
            posted.append((url, json.loads(data)))
            return FakeResponse(self.status, "conflict: kernels changed")

    rest._session = Session()  # type: ignore[assignment]
    committer = commit.atomic_committer(rest)
    assert committer is commit._commit_rest
    committer(rest, txs)
    assert posted[0][0] == "http://rest.example:8181/v1/transactions/commit"
    assert posted[0][1] == body
    rest._session.status = 409  # type: ignore[attr-defined]
    with pytest.raises(CommitFailedException, match="conflict: kernels changed"):
        committer(rest, [commit._transaction(tables[n], n, pub) for n in commit.TABLES])
    rest._supported_endpoints = set()
    assert commit.atomic_committer(rest) is None


def test_catalog_without_multi_table_commit_commits_table_by_table(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from perfreport.lake import commit

    monkeypatch.setattr(commit, "atomic_committer", lambda catalog: None)
    camp = make_campaign(tmp_path / CAMPAIGN)
    lake = tmp_path / "lake"
    publish_to_lake(camp, lake=lake)
    out = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", str(lake), "--cell-id", DECODE, ok=True)
    assert "nothing changed: publication " in out.output  # the rows it holds: no catalog is asked to commit
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("cache: warm", "cache: cold"))
    out = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", str(lake), "--cell-id", DECODE, ok=True)
    assert "committed: one commit per table, the ledger last, attempt 1" in out.output
    assert lake_query(lake, TABLE_ROWS).rows == [(39, 2, 4, 2)]
    assert [len(lake_history(lake, t)) for t in TABLES] == [2] * len(TABLES)


def test_publish_adds_new_columns_to_an_older_lake_in_the_same_commit(tmp_path: Path) -> None:
    from perfreport.lake.iceberg import TABLE_PROPERTIES
    from perfreport.lake.rows import SCHEMAS

    camp = make_campaign(tmp_path / CAMPAIGN)
    lake = tmp_path / "lake"
    catalog = open_catalog(lake)
    for name, schema in SCHEMAS.items():  # an older lake: its tables lack a column today's rows carry
        missing = {"publications": "who", "cells": "description", "kernels": "family", "kernel_history": "family",
                   "trials": "n", "predictions": "basis"}
        older = schema.remove(schema.get_field_index(missing.get(name, "gpu")))
        with catalog.create_table_transaction(f"{NAMESPACE}.{name}", schema=older,
                                              properties=TABLE_PROPERTIES) as tx, tx.update_spec() as spec:
            spec.add_identity("campaign")
    publish_to_lake(camp, lake=lake, who="evolved")
    assert lake_query(lake, TABLE_ROWS).rows == [(39, 2, 4, 1)]
    assert lake_query(lake, "SELECT (SELECT min(who) FROM publications), (SELECT count(DISTINCT family) FROM "
                            "kernels), (SELECT count(gpu) FROM captures)").rows == [("evolved", 5, 4)]
    assert [len(lake_history(lake, t)) for t in TABLES] == [1] * len(TABLES)
