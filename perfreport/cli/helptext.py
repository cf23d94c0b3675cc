"""--help text that is never cut: whole first sentences in command lists, lines broken at spaces only.

click makes a verb's line in its group's list by cutting the docstring at the terminal's width and adding "..."
(`Import ncu exports into...`), and wraps help at hyphens and inside long words (`campaigns/h200-decoder-` then
`layer`, `--rep-` then `reader`), so a pasted example breaks. whole_help gives every command its first sentence as
its list line and a formatter that breaks lines at spaces only (a word longer than the column runs past it).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Iterable

import click

_SENTENCE_END = re.compile(r"(?<=[.!?])(?=\s|$)")
RAW = "\b"  # click's marker: the paragraph it starts is printed as written


def first_sentence(text: str) -> str:
    """The first sentence of a docstring's first paragraph, its lines joined (click's `\\b` markers dropped)."""
    paragraph = inspect.cleandoc(text).split("\n\n", 1)[0]
    joined = " ".join(" ".join(line for line in paragraph.splitlines() if line.strip() != RAW).split())
    end = _SENTENCE_END.search(joined)
    return joined[: end.start()] if end else joined


def wrap(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """click.formatting.wrap_text's paragraphs (blank-line separated, a `\\b` one as written, each keeping its first
    line's indent), filled to width breaking at spaces only."""
    paragraphs: list[tuple[int, bool, list[str]]] = []
    for block in re.split(r"\n[ \t]*\n", text.expandtabs()):
        lines = [line for line in block.splitlines() if line.strip()]
        if lines:
            raw = lines[0].strip() == RAW
            paragraphs.append((len(lines[0]) - len(lines[0].lstrip()), raw, lines[1:] if raw else lines))
    out = []
    for extra, raw, body in paragraphs:
        first, rest = initial_indent + " " * extra, subsequent_indent + " " * extra
        if raw:
            out.append("\n".join((first if i == 0 else rest) + line for i, line in enumerate(body)))
        else:
            out.append(textwrap.fill(" ".join(line.strip() for line in body), width, initial_indent=first,
                                     subsequent_indent=rest, break_on_hyphens=False, break_long_words=False))
    return "\n\n".join(out)


class WholeWordsFormatter(click.HelpFormatter):
    """click's help layout, with lines broken at spaces only (wrap)."""

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(wrap(text, self.width, indent, indent) + "\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = wrap(second, max(self.width - first_col - 2, 10)).splitlines() or [""]
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write(f"{'':>{first_col + self.current_indent}}{line}\n")


class WholeWordsContext(click.Context):
    """A context whose --help is laid out by WholeWordsFormatter."""

    formatter_class = WholeWordsFormatter


def whole_help(command: click.Command) -> None:
    """Give `command` and every command under it whole help: its first sentence as its line in its group's list
    (unless it names a short_help) and WholeWordsFormatter for its --help."""
    if command.short_help is None and command.help:
        command.short_help = first_sentence(command.help)
    command.context_class = WholeWordsContext
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            whole_help(sub)
