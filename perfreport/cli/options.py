"""Options every verb that prints rows shares, defined once: `--format table|csv|json` (and `--json`, its old
spelling, kept hidden so scripts written against it keep working)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

FORMATS = ("table", "csv", "json")
PIPE_WIDTH = 200  # a table into a file or a pipe, COLUMNS unset: wide, so a log or a grep sees whole rows
F = TypeVar("F", bound=Callable[..., Any])


def format_help(csv: str, json: str) -> str:
    """The --format help of one verb: what its CSV rows and its JSON document hold."""
    return (f"table: for people, fitted to the terminal (COLUMNS; {PIPE_WIDTH} columns into a file or a pipe); "
            f"csv: {csv}, every value in full; json: {json}. Example: --format csv")


def format_option(csv: str, json: str) -> Callable[[F], F]:
    """Add `--format table|csv|json` (passed to the command as `fmt`) and the hidden `--json` (= --format json).

    csv and json say what this verb's rows and document hold; they go into its --help."""
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            if kwargs.pop("legacy_json"):
                fmt = kwargs["fmt"]
                given = click.get_current_context().get_parameter_source("fmt") == ParameterSource.COMMANDLINE
                if given and fmt != "json":
                    raise click.UsageError(f"--json is the old spelling of --format json, and --format {fmt} was "
                                           f"given too: pass one of them (--format {fmt}, or --format json).")
                kwargs["fmt"] = "json"
            return fn(*args, **kwargs)

        wrapped = click.option("--json", "legacy_json", is_flag=True, hidden=True,
                               help="Deprecated: the old spelling of --format json.")(command)
        return click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                            help=format_help(csv, json))(wrapped)  # type: ignore[return-value]

    return decorate
