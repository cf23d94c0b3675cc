"""Error types: every user mistake becomes one of these, printed without a traceback, exit code non-zero."""

from __future__ import annotations

import click


def terminal_text(text: str, keep_newlines: bool = True) -> str:
    """Text safe to print: every control and format character escaped (`\\x1b`, `\\u202e`), line breaks too unless
    kept (a table cell keeps none), so data (a kernel or file name) never moves the cursor, sets the clipboard
    (OSC 52), reorders a line or splits a row."""
    if text.isprintable():
        return text
    kept = "\n" if keep_newlines else ""
    return "".join(c if c.isprintable() or c in kept else c.encode("unicode_escape").decode("ascii") for c in text)


class PerfReportError(click.ClickException):
    """Base error: message says what, where, expected vs got, and how to fix it."""

    exit_code = 2

    def format_message(self) -> str:
        return terminal_text(self.message)


class InputError(PerfReportError):
    """An input file (capture, CSV, report, config) cannot be used as given."""


class ConfigError(PerfReportError):
    """A campaign config or ceilings file is invalid; the message lists every problem with its path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s):\n{lines}")


class EmptyCaptureError(InputError):
    """A capture that profiled no kernel (e.g. `--kernel-name` matched nothing)."""


class IdError(PerfReportError):
    """A campaign, cell or bundle id that cannot safely become a path."""


class PublishConflictError(PerfReportError):
    """Another publisher committed rows for the same (campaign, cell) while this publish was running."""
