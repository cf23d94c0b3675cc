"""Generated docs stay fresh (cog) and every --help example names what the example campaign really holds.

README.md's tour output, docs/cli.md and docs/capture.md's code tables are `[[[cog ...]]]` blocks generated from the
code; `make docs` regenerates them. The --help examples must use the cell ids, campaign path and files of
campaigns/h200-decoder-layer (or fixtures under tests/data), so a user can paste them.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml
from cogapp import Cog

from perfreport.capture.diagnose.log import CODE_HELP, CODES
from perfreport.capture.plan.policy import RULES, check_policy
from perfreport.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ("README.md", "docs/cli.md", "docs/capture.md")
REGENERATE = ".venv/bin/cog -r README.md docs/cli.md docs/capture.md"
CAMPAIGN = "campaigns/h200-decoder-layer"


def _stale(paths: list[Path]) -> str | None:
    """None when every cog block's output matches its code, else what is stale and the command that fixes it."""
    out, err = io.StringIO(), io.StringIO()
    cog = Cog()
    cog.set_output(stdout=out, stderr=err)
    rc = cog.main(["cog", "--check", "--diff", *map(str, paths)])
    if rc == 0:
        return None
    return (f"generated docs are stale (cog exit {rc}); regenerate with `{REGENERATE}` (or `make docs`) and review "
            f"the diff:\n{out.getvalue()}{err.getvalue()}")


def test_generated_docs_are_fresh() -> None:
    problem = _stale([ROOT / p for p in GENERATED])
    assert problem is None, problem


def test_freshness_check_fails_on_a_stale_copy_and_names_the_fix(tmp_path: Path) -> None:
    text = (ROOT / "docs/capture.md").read_text(encoding="utf-8")
    copy = tmp_path / "capture.md"
    copy.write_text(text, encoding="utf-8")
    assert _stale([copy]) is None
    assert "| `oom` |" in text
    copy.write_text(text.replace("| `oom` |", "| `out-of-memory` |", 1), encoding="utf-8")
    problem = _stale([copy])
    assert problem is not None
    assert f"regenerate with `{REGENERATE}`" in problem
    assert str(copy) in problem and "`out-of-memory`" in problem and "cog exit 5" in problem


def test_readme_tour_shows_the_real_import_with_repository_paths() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"wrote {CAMPAIGN}/cells/decode-b16-kv2048/ncu_kernels.json\nnext lever (campaign): " in readme
    source = "captures/decode/layer_full.ncu-rep.gz"  # a capture inside the campaign is known by its path there
    assert f"h200-decoder-layer / decode-b16-kv2048 ← {source} [ncu-rep, set full]\n" in readme
    assert "/tmp" not in readme and str(ROOT) not in readme


def test_cli_reference_lists_every_command() -> None:
    text = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## `(perftunereport[^`]*)`$", text, flags=re.M)
    assert headings == [path for path, _ in _commands()]
    assert {"perftunereport import_ncu", "perftunereport capture k8s run", "perftunereport lake relocate"} <= set(
        headings)


def test_diagnosis_code_table_covers_every_code() -> None:
    assert list(CODE_HELP) == list(CODES)
    assert all(says and meaning and fix for says, meaning, fix in CODE_HELP.values())
    text = (ROOT / "docs/capture.md").read_text(encoding="utf-8")
    for code in CODES:
        says, meaning, fix = CODE_HELP[code]
        assert f"| `{code}` | {says} | {meaning} | {fix} |" in text


def test_every_policy_rule_has_a_row_whose_example_fires_it() -> None:
    for code, level, _, spec in RULES:
        assert (code, level) in {(f.code, f.level) for f in check_policy(spec)}, (code, level)
    source = (ROOT / "perfreport/capture/plan/policy.py").read_text(encoding="utf-8")
    in_code = set(re.findall(r'Finding\("([a-z-]+)"', source))
    assert in_code == {code for code, *_ in RULES}
    assert {(c, lv) for c, lv, *_ in RULES} >= {("ncu-launch-cost", "warn"), ("ncu-launch-cost", "info")}


# --- --help examples --------------------------------------------------------------------------------------------

def _commands() -> Iterator[tuple[str, click.Command]]:
    """Every command and group of the CLI with its full path, in docs/cli.md's order."""
    def walk(cmd: click.Command, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
        yield ctx.command_path, cmd
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, click.Context(sub, info_name=name, parent=ctx))
    yield from walk(cli, click.Context(cli, info_name="perftunereport"))


def _campaign() -> tuple[str, set[str]]:
    raw = yaml.safe_load((ROOT / CAMPAIGN / "config.yaml").read_text(encoding="utf-8"))
    return raw["campaign"], {cell["id"] for cell in raw["cells"]}


def _example_values(cmd: click.Command) -> list[tuple[str, str]]:
    """(flag, value) for every --cell-id / --campaign / repository path in the command's and options' examples."""
    found: list[tuple[str, str]] = []
    texts: list[tuple[str | None, str]] = [(None, cmd.help or "")]
    texts += [(p.opts[0], p.help or "") for p in cmd.params if isinstance(p, click.Option)]
    for own, text in texts:
        _, sep, example = text.partition("Example")
        if not sep:
            continue
        example = re.sub(r"^[^:]*:\s*", "", example)
        if own in ("--cell-id", "--campaign") and not example.startswith("--"):
            found.append((own, example.split()[0]))
        found += [(m[1], m[2]) for m in re.finditer(r"(--cell-id|--campaign)[ =]([^\s\\]+)", example)]
        found += [("path", m[0]) for m in re.finditer(r"(?<![\w/])(?:campaigns|tests)/\S*\.[\w.-]+", example)]
    return found


def _problems(cmd: click.Command, values: list[tuple[str, str]]) -> list[str]:
    """What in the examples does not exist in the example campaign (or the repository)."""
    campaign_id, cells = _campaign()
    option = next((p for p in cmd.params if isinstance(p, click.Option) and "--campaign" in p.opts), None)
    by_path = option is None or isinstance(option.type, click.Path)
    out = []
    for flag, value in values:
        if flag == "--cell-id" and value not in cells:
            out.append(f"--cell-id {value}: not a cell of {CAMPAIGN} ({', '.join(sorted(cells))})")
        elif flag == "--campaign" and by_path and not (ROOT / value / "config.yaml").is_file():
            out.append(f"--campaign {value}: no config.yaml there; use {CAMPAIGN}")
        elif flag == "--campaign" and not by_path and value != campaign_id:
            out.append(f"--campaign {value}: not the campaign id {campaign_id}")
        elif flag == "path" and not (ROOT / value).exists():
            out.append(f"{value}: no such file in the repository")
    return out


def test_help_examples_use_the_example_campaign() -> None:
    problems, seen = [], set()
    for path, cmd in _commands():
        values = _example_values(cmd)
        seen.update((path, flag) for flag, _ in values)
        problems += [f"{path}: {p}" for p in _problems(cmd, values)]
    assert problems == []
    for verb in ("import_ncu", "import_nsys", "import_torch_trace", "import_samples", "publish_to_lake"):
        assert (f"perftunereport {verb}", "--cell-id") in seen, verb
    for verb in ("import_ncu", "query", "report_render", "value_view", "lake compare"):
        assert (f"perftunereport {verb}", "--campaign") in seen, verb
    assert ("perftunereport capture diagnose", "path") in seen


@pytest.mark.parametrize(("help_text", "expected"), [
    ("Example: perftunereport import_ncu --campaign campaigns/x --cell-id c1 --bundle b",
     ["--campaign campaigns/x: no config.yaml there; use campaigns/h200-decoder-layer",
      "--cell-id c1: not a cell of campaigns/h200-decoder-layer (decode-b16-kv2048, prefill-b8-s1024, "
      "prefill-b8-s1024-attach)"]),
    ("Example: perftunereport import_ncu --campaign campaigns/h200-decoder-layer --cell-id prefill-b8-s1024 "
     "--bundle campaigns/h200-decoder-layer/captures/decode/layer_full.ncu-rep",
     ["campaigns/h200-decoder-layer/captures/decode/layer_full.ncu-rep: no such file in the repository"]),
    ("Example: perftunereport import_ncu --campaign campaigns/h200-decoder-layer --cell-id decode-b16-kv2048", []),
])
def test_help_example_check_catches_a_wrong_example(help_text: str, expected: list[str]) -> None:
    import_ncu = cli.commands["import_ncu"]
    fake = click.Command("import_ncu", help=help_text, params=list(import_ncu.params))
    assert _problems(fake, _example_values(fake)) == expected


def test_lake_compare_campaign_example_is_the_campaign_id() -> None:
    compare = cli.commands["lake"]
    assert isinstance(compare, click.Group)
    cmd = compare.commands["compare"]
    assert ("--campaign", "h200-decoder-layer") in _example_values(cmd)
    assert _problems(cmd, [("--campaign", CAMPAIGN)]) == [f"--campaign {CAMPAIGN}: not the campaign id "
                                                          f"h200-decoder-layer"]
