"""Every example of every `--help` runs as written against the shipped example campaign.

Each `Example:` line and each indented example block under it is collected from the rendered help of every command
(the click command tree of perfreport.cli.main:cli), split with shlex and run in a folder holding a copy of
campaigns/h200-decoder-layer as `make demo` leaves it (every capture imported) and a lake published from it at
./lake, plus tests/data (the fixtures some examples read). `perftunereport` lines run in-process; `cp` lines run as
written. What cannot exist here stands in as the test doubles the suite already has: tests/data/fake_ncu (`ncu`,
`nvidia-smi`) and tests/data/fake_kubectl (`kubectl`) lead PATH, and DOUBLES names each value of an example that
is swapped for a double. NOT_RUN lists the few lines that cannot run here at all, each with why; it only shrinks:
every line in it must still be an example of some --help.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import EXAMPLE, copy_example

from perfreport.cli.main import cli
from perfreport.lake.writer import publish_to_lake

ROOT = Path(__file__).resolve().parents[1]
FAKE_NCU = ROOT / "tests" / "data" / "fake_ncu"
FAKE_KUBECTL = ROOT / "tests" / "data" / "fake_kubectl"

# value in an example -> (why it cannot be used here, what stands in for it)
DOUBLES: dict[str, tuple[str, Callable[[], str]]] = {
    "/usr/local/cuda/bin/ncu": ("no Nsight Compute here: the fake ncu replays real H200 ncu output",
                                lambda: str(FAKE_NCU / "ncu")),
    "4242": ("no target process 4242 here: the test's own process stands in", lambda: str(os.getpid())),
}

# example line -> why it is not run here
NOT_RUN: dict[str, str] = {
    "perftunereport harness gemm --shape m=16,n=4096,k=4096 --dtype bf16 --warmup 10 --iters 100":
        "runs a GEMM: needs torch with CUDA and a GPU (the [gpu] extra, on the GPU host)",
    "perftunereport ceilings measure --out ceilings-h200 --seconds 8":
        "measures the GPU's ceilings: needs torch with CUDA and a GPU (the [gpu] extra, on the GPU host)",
    "ncu --mode launch --target-processes all -- python3 -m vllm.entrypoints.openai.api_server ... &":
        "starts a vLLM server on a GPU under ncu; the fake ncu answers the `capture release` below it as that server",
}

SHELL = ("cp",)  # programs an example line may run besides perftunereport (run as written, in the example folder)


def _commands() -> Iterator[tuple[str, click.Command, click.Context]]:
    """Every command and group with its context, help rendered unwrapped (one paragraph, one line). Each context
    carries its command's context_settings, as a real run does: click caches a command's help option from the first
    context that asks, and docs/cli.md is rendered later in the same session."""
    wide = {"terminal_width": 10_000, "max_content_width": 10_000}

    def walk(cmd: click.Command, ctx: click.Context) -> Iterator[tuple[str, click.Command, click.Context]]:
        yield ctx.command_path, cmd, ctx
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, click.Context(sub, info_name=name, parent=ctx, **sub.context_settings, **wide))
    yield from walk(cli, click.Context(cli, info_name="perftunereport", **cli.context_settings, **wide))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def examples_in(help_text: str) -> list[list[str]]:
    """The example blocks of one --help: the text after `Example...:` on its line, then the lines indented deeper
    below it (a `\\b` block); a line ending in a backslash goes on with the next, as in a shell."""
    lines = help_text.split("\nOptions:")[0].splitlines()
    blocks, i = [], 0
    while i < len(lines):
        found = re.search(r"\bExample[^:]*:\s*(.*)$", lines[i])
        i += 1
        if not found:
            continue
        raw = [found[1]] if found[1] else []
        level = _indent(lines[i - 1])
        while i < len(lines) and lines[i].strip() and _indent(lines[i]) > level:
            raw.append(lines[i].strip())
            i += 1
        block: list[str] = []
        for line in raw:
            if block and block[-1].endswith("\\"):
                block[-1] = block[-1][:-1].rstrip() + " " + line
            else:
                block.append(line)
        blocks.append(block)
    return blocks


def _all_examples() -> list[tuple[str, list[str]]]:
    out = []
    for path, cmd, ctx in _commands():
        out += [(path, block) for block in examples_in(cmd.get_help(ctx))]
    return out


EXAMPLES = _all_examples()


def test_every_command_has_an_example_and_every_line_is_runnable_or_listed() -> None:
    with_examples = {path for path, _ in EXAMPLES}
    leaves = {path for path, cmd, _ in _commands() if not isinstance(cmd, click.Group)}
    assert leaves - with_examples == set()
    for path, block in EXAMPLES:
        for line in block:
            program = shlex.split(line)[0]
            assert program == "perftunereport" or program in SHELL or line in NOT_RUN, (
                f"{path}: example line {line!r} runs {program!r}: the test runs perftunereport and {SHELL}; list it "
                f"in NOT_RUN with why it cannot run here")


def test_skip_and_double_lists_only_shrink() -> None:
    """Each line NOT_RUN skips and each value DOUBLES swaps is still in some example: fixed ones leave the lists."""
    lines = {line for _, block in EXAMPLES for line in block}
    assert set(NOT_RUN) <= lines, set(NOT_RUN) - lines
    tokens = {token for line in lines for token in shlex.split(line)}
    assert set(DOUBLES) <= tokens, set(DOUBLES) - tokens
    assert len(NOT_RUN) <= 3 and all(len(why) > 20 for why in NOT_RUN.values())


def test_examples_include_the_csv_of_both_query_verbs() -> None:
    lines = [line for _, block in EXAMPLES for line in block]
    assert any(line.startswith("perftunereport query ") and "--format csv" in line for line in lines)
    assert any(line.startswith("perftunereport lake query ") and "--format csv" in line for line in lines)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(folder, pristine copy): the example campaign imported and a lake published at folder/lake. The lake holds
    absolute paths, so each example runs in the same folder, restored from the copy first."""
    base = tmp_path_factory.mktemp("examples")
    work = base / "work"
    camp = copy_example(work / "campaigns" / EXAMPLE.name)
    publish_to_lake(camp, lake=work / "lake", who="examples")
    (work / "tests").mkdir()
    (work / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    pristine = base / "pristine"
    shutil.copytree(work, pristine, symlinks=True)
    yield work, pristine


def _argv(line: str) -> list[str]:
    return [DOUBLES[t][1]() if t in DOUBLES else t for t in shlex.split(line)]


# the blocks with something to run here; a block of NOT_RUN lines only is held by the test above, not run
RUNNABLE = [(i, p, block) for i, (p, block) in enumerate(EXAMPLES) if not all(line in NOT_RUN for line in block)]


@pytest.mark.parametrize(("path", "block"), [(p, b) for _, p, b in RUNNABLE],
                         ids=[f"{p.removeprefix('perftunereport').strip() or 'cli'}-{i}" for i, p, _ in RUNNABLE])
def test_help_example_runs_as_written(path: str, block: list[str], workspace: tuple[Path, Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    work, pristine = workspace
    shutil.rmtree(work)
    shutil.copytree(pristine, work, symlinks=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{FAKE_NCU}{os.pathsep}{FAKE_KUBECTL}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_LINE_DELAY_S", "0")
    monkeypatch.setenv("FAKE_NCU_MAX_S", "20")
    monkeypatch.setenv("FAKE_KUBECTL_STATE", str(work.parent / "fake_kubectl_state"))
    monkeypatch.delenv("PERFREPORT_LAKE", raising=False)
    ran = 0
    for line in block:
        if line in NOT_RUN:
            continue
        argv = _argv(line)
        if argv[0] != "perftunereport":
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, f"{path}: `{line}` exited {done.returncode}\n{done.stdout}{done.stderr}"
            continue
        result = CliRunner().invoke(cli, argv[1:])
        assert result.exit_code == 0, (f"{path}: `{line}` exited {result.exit_code}, expected 0; fix the example "
                                       f"in its --help\n{result.output}\n{result.exception!r}")
        assert result.stdout.strip(), f"{path}: `{line}` printed nothing"
        ran += 1
    assert ran, f"{path}: no perftunereport line of {block} ran"
