"""One CLI grammar: `--format table|csv|json` on every verb that prints rows (the old `--json` a hidden alias),
CSV as RFC 4180 with formula-looking text defused, footers that name real options, and tables that fit the
terminal's width (COLUMNS) with every digit of a number kept."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import EXAMPLE, run_cli
from rich.cells import cell_len
from rich.table import Table

from perfreport.cli.main import cli
from perfreport.cli.options import PIPE_WIDTH, format_option
from perfreport.cli.output import print_table, terminal_width
from perfreport.lake.writer import publish_to_lake

ROWS_VERBS = {"import_ncu", "import_rocprof", "import_nsys", "import_torch_trace", "import_samples", "query",
              "report_render",
              "value_view", "lake query", "lake history", "lake compare", "lake regressions", "lake predictions",
              "capture plan",
              "capture preflight",
              "capture diagnose", "capture k8s plan", "ceilings measure"}
BOX = "┃│┏┡└┗━─"
TORCH_TRACE = "captures/decode/torch_trace.json.gz"
SQL = "SELECT cell_id, function, duration_ns, sol_pct FROM ncu_kernels ORDER BY duration_ns DESC, function"


def _commands() -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, path: str) -> None:
        out[path] = cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}".strip())
    walk(cli, "")
    return out


def _options(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}


@pytest.fixture(scope="module")
def lake(example_campaign: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("formats") / "lake"
    publish_to_lake(example_campaign, lake=where, who="formats")
    return where


def test_every_verb_that_prints_rows_takes_format_and_the_hidden_json() -> None:
    commands = _commands()
    with_format = {path for path, cmd in commands.items() if "--format" in _options(cmd)}
    assert with_format == ROWS_VERBS
    for path in ROWS_VERBS:
        fmt = next(p for p in commands[path].params if p.name == "fmt")
        legacy = next(p for p in commands[path].params if p.name == "legacy_json")
        assert isinstance(fmt.type, click.Choice) and list(fmt.type.choices) == ["table", "csv", "json"], path
        assert isinstance(legacy, click.Option) and legacy.hidden and legacy.opts == ["--json"], path


def test_query_and_lake_query_print_csv(example_campaign: Path, lake: Path) -> None:
    out = run_cli("query", "--campaign", str(example_campaign), "--format", "csv", SQL, ok=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["cell_id", "function", "duration_ns", "sol_pct"] and len(rows) > 20
    assert rows[1][0] == "prefill-b8-s1024" and float(rows[1][2]) > 1e6  # every digit, no "1.21 ms"
    as_json = json.loads(run_cli("query", "--campaign", str(example_campaign), "--format", "json", SQL, ok=True).stdout)
    assert [[r["cell_id"], r["function"], repr(r["duration_ns"])] for r in as_json] == [r[:3] for r in rows[1:]]
    sql = "SELECT campaign, cell_id, function, sol_pct FROM kernels ORDER BY cell_id, kernel_id"
    out = run_cli("lake", "query", "--lake", str(lake), "--format", "csv", sql, ok=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["campaign", "cell_id", "function", "sol_pct"] and len(rows) == 43  # 42 kernels, 3 cells
    assert {r[0] for r in rows[1:]} == {"h200-decoder-layer"}


def test_json_is_the_old_spelling_of_format_json(example_campaign: Path) -> None:
    new = run_cli("query", "--campaign", str(example_campaign), "--format", "json", SQL, ok=True).stdout
    old = run_cli("query", "--campaign", str(example_campaign), "--json", SQL, ok=True).stdout
    assert old == new and isinstance(json.loads(old), list)
    both = run_cli("query", "--campaign", str(example_campaign), "--json", "--format", "json", SQL, ok=True).stdout
    assert both == new
    bad = run_cli("query", "--campaign", str(example_campaign), "--json", "--format", "csv", SQL)
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "--json is the old spelling of --format json, and --format csv was given too" in bad.output


def test_csv_quotes_as_rfc4180_and_defuses_formulas(example_campaign: Path) -> None:
    sql = ("SELECT '=HYPERLINK(\"http://x\")' AS f, '@SUM(A1)' AS at, 'a,b \"c\"' || chr(10) || 'd' AS q, "
           "-1.5 AS n, '-1.5' AS t, NULL AS z, [1, 2] AS l, true AS b, 1e300 AS big")
    out = run_cli("query", "--campaign", str(example_campaign), "--format", "csv", sql, ok=True).stdout
    header, row = list(csv.reader(io.StringIO(out)))
    assert header == ["f", "at", "q", "n", "t", "z", "l", "b", "big"]
    assert row == ["'=HYPERLINK(\"http://x\")", "'@SUM(A1)", "a,b \"c\"\nd", "-1.5", "-1.5", "", "[1, 2]", "true",
                   "1e+300"]
    assert '"a,b ""c""\nd"' in out  # quoted, quotes doubled: RFC 4180


def test_every_row_verb_prints_one_json_document(example_campaign: Path, lake: Path, tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    shutil.copytree(example_campaign, camp)
    runs = [("import_torch_trace", "--campaign", str(camp), "--cell-id", "decode-b16-kv2048", str(camp / TORCH_TRACE)),
            ("value_view", "--campaign", str(camp)), ("lake", "history", "--lake", str(lake)),
            ("lake", "compare", "--lake", str(lake), "--metric", "sol_pct"),
            ("report_render", "--campaign", str(camp), "--out", str(tmp_path / "site"))]
    for args in runs:
        doc = json.loads(run_cli(*args, "--format", "json", ok=True).stdout)
        assert doc, args
        rows = list(csv.reader(io.StringIO(run_cli(*args, "--format", "csv", ok=True).stdout)))
        assert rows and len({len(r) for r in rows}) == 1, args  # a header, rows of its length
    assert run_cli("capture", "diagnose", "--format", "csv", f"{EXAMPLE}/captures/decode/layer_full.ncu-rep.gz",
                   ok=True).stdout.startswith("code,message,evidence\nok,")
    plan = run_cli("capture", "plan", "--format", "csv", "--kernel-name", "regex:nvjet", ok=True).stdout
    assert plan.startswith("kind,name,detail,text\n") and "command,attach,capture,ncu --mode attach" in plan


def _footer_options(out: str) -> set[str]:
    """The options named in the footer: from its first line (`N row(s)`, `N more column(s)`) to the end."""
    lines = out.splitlines()
    first = min(i for i, line in enumerate(lines) if re.match(r"\d+ (row|more column)\(s\)", line))
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", "\n".join(lines[first:])))


@pytest.mark.parametrize("verb", ["query", "lake query"])
def test_footers_name_only_options_the_verb_has(verb: str, example_campaign: Path, lake: Path) -> None:
    where = ["--campaign", str(example_campaign)] if verb == "query" else ["--lake", str(lake)]
    table = "ncu_kernels" if verb == "query" else "kernels"
    for columns in ("200", "80"):  # at 80 the footer also names the columns that did not fit
        out = run_cli(*verb.split(), *where, f"SELECT * FROM {table}", env={"COLUMNS": columns}, ok=True).stdout
        named = _footer_options(out)
        assert "--format" in named and named <= _options(_commands()[verb]), (verb, columns, named)


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("width", [80, 200])
def test_tables_fit_the_terminal_width(width: int, example_campaign: Path, lake: Path, tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    shutil.copytree(example_campaign, camp)
    env = {"COLUMNS": str(width)}
    whole = [
        ("query", "--campaign", str(camp), SQL), ("query", "--campaign", str(camp), "SELECT * FROM kernel_join"),
        ("lake", "query", "--lake", str(lake), "SELECT * FROM kernels"), ("lake", "history", "--lake", str(lake)),
        ("import_ncu", "--campaign", str(camp), "--cell-id", "decode-b16-kv2048", "--bundle",
         str(camp / "captures/decode/layer_full.ncu-rep.gz")),
        ("import_torch_trace", "--campaign", str(camp), "--cell-id", "decode-b16-kv2048",
         str(camp / "captures/decode/torch_trace.json.gz")),
        ("report_render", "--campaign", str(camp), "--out", str(tmp_path / "site")),
    ]
    for args in whole:
        out = run_cli(*args, env=env, ok=True).stdout
        assert any(line[:1] in BOX or line.startswith("─") for line in out.splitlines()), args
        too_wide = [line for line in _lines(out) if cell_len(line) > width]
        assert too_wide == [], (args, too_wide)
    # value_view's tables fit; its three closing lines are sentences, one line each (the terminal wraps them)
    out = run_cli("value_view", "--campaign", str(camp), env=env, ok=True).stdout
    table = [line for line in out.splitlines() if line[:1] in BOX]
    assert table and max(cell_len(line) for line in table) <= width


def test_narrow_tables_keep_every_digit(example_campaign: Path) -> None:
    args = ("query", "--campaign", str(example_campaign), SQL)
    wide = run_cli(*args, env={"COLUMNS": "200"}, ok=True).stdout
    narrow = run_cli(*args, env={"COLUMNS": "60"}, ok=True).stdout
    numbers = re.findall(r"(?<=\s)\d[\d.e+-]*(?=\s)", wide)
    assert len(numbers) > 20 and re.findall(r"(?<=\s)\d[\d.e+-]*(?=\s)", narrow) == numbers
    assert max(cell_len(line) for line in narrow.splitlines()) <= 60


def test_width_is_columns_else_a_wide_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "93")
    assert terminal_width() == 93
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() == PIPE_WIDTH  # pytest captures stdout: not a terminal
    monkeypatch.setenv("COLUMNS", "wide")
    assert terminal_width() == PIPE_WIDTH


def test_the_columns_left_out_footer_names_format_only_on_a_verb_that_has_it() -> None:
    def wide() -> Table:
        table = Table()
        for i in range(12):
            table.add_column(f"n{i}", justify="right")
        table.add_row(*[str(123456 + i) for i in range(12)])
        return table

    @click.command()
    def bare() -> None:
        print_table(wide())

    @click.command()
    @format_option(csv="rows", json="a document")
    def rows(fmt: str) -> None:
        print_table(wide())

    out = CliRunner().invoke(bare, env={"COLUMNS": "40"}).stdout
    assert "7 more column(s) do not fit in 40 columns: n5, n6" in " ".join(out.split()) and "--format" not in out
    assert "123456 123457 123458 123459 123460" in out  # the columns shown keep every digit
    assert max(cell_len(line) for line in out.splitlines()) <= 40
    out = CliRunner().invoke(rows, env={"COLUMNS": "40"}).stdout
    assert "(--format csv or --format json prints them all; COLUMNS sets the width)" in " ".join(out.split())
