"""--help is never cut: every verb's line in its group's list is its docstring's first sentence whole (click's own
ends in "..." at the terminal's width), and every option's help and docstring paragraph comes out word for word,
lines broken at spaces only (never at a hyphen of `campaigns/h200-decoder-layer` or `--rep-reader`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from perfreport.cli.helptext import first_sentence, wrap
from perfreport.cli.main import cli

WIDTHS = (60, 80, 120)


def commands(cmd: click.Command = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from commands(sub, (*path, name))


def shown(path: tuple[str, ...], width: int) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=width)
    assert result.exit_code == 0, result.output
    return result.output


def listed(help_text: str) -> dict[str, str]:
    """The Commands section of a group's --help: name -> its line(s), joined."""
    entries: dict[str, str] = {}
    name = None
    section = help_text.split("\nCommands:\n", 1)[1]
    for line in section.splitlines():
        entry = re.match(r"^  (\S+)(?:\s{2,}(.*))?$", line)
        if entry:
            name = entry.group(1)
            entries[name] = entry.group(2) or ""
        elif line.strip() and name is not None:
            entries[name] += " " + line.strip()
    return entries


def words(text: str) -> str:
    return " ".join(w for w in text.split() if w != "\b")


GROUPS = [(p, c) for p, c in commands() if isinstance(c, click.Group)]
ALL = [(p, c) for p, c in commands() if c.add_help_option]  # `harness --help` is its runner's (argparse)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("path", "group"), GROUPS, ids=[" ".join(p) or "perftunereport" for p, _ in GROUPS])
def test_every_command_list_shows_whole_first_sentences(path: tuple[str, ...], group: click.Group,
                                                        width: int) -> None:
    entries = listed(shown(path, width))
    assert sorted(entries) == sorted(group.commands)
    for name, text in entries.items():
        sub = group.commands[name]
        assert not text.endswith("..."), f"{' '.join((*path, name))}: cut at the width: {text!r}"
        assert text == first_sentence(sub.help or ""), name
        assert text.endswith((".", ")")), f"{' '.join((*path, name))}: not a whole sentence: {text!r}"


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=[" ".join(p) or "perftunereport" for p, _ in ALL])
def test_every_option_help_and_docstring_comes_out_whole(path: tuple[str, ...], cmd: click.Command) -> None:
    for limit in (10, 45):
        assert not cmd.get_short_help_str(limit).endswith("..."), path
    for width in WIDTHS:
        out = shown(path, width)
        flat = words(out)
        assert words(cmd.help or "") in flat, (path, width)
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden and param.help:
                assert words(param.help) in flat, f"{' '.join(path)} {param.opts[0]} at width {width}: cut"
        for line in out.splitlines():
            assert not re.search(r"\w-$", line), f"{' '.join(path)} at width {width}: broken at a hyphen: {line!r}"


def test_first_sentence_and_wrap_keep_words_whole() -> None:
    assert first_sentence("Import ncu exports into\n    campaigns/<c>/cells/<id>/ncu_kernels.json.\n\n    More.") == (
        "Import ncu exports into campaigns/<c>/cells/<id>/ncu_kernels.json.")
    assert first_sentence("Trace (.json or .json.gz). Then more.") == "Trace (.json or .json.gz)."
    assert wrap("Example: --bundle campaigns/h200-decoder-layer/captures/x.ncu-rep.gz [required]", 20).splitlines() \
        == ["Example: --bundle", "campaigns/h200-decoder-layer/captures/x.ncu-rep.gz", "[required]"]
    raw = "Intro text here.\n\n\b\nExample:\n  perftunereport lake compare --vary workload.concurrency"
    assert wrap(raw, 12, "  ", "  ") == (
        "  Intro text\n  here.\n\n  Example:\n    perftunereport lake compare --vary workload.concurrency")
