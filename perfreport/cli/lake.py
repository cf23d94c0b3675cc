"""The `lake` verbs: query, history, compare and relocate the Iceberg lake that publish_to_lake writes."""

from __future__ import annotations

import click

from perfreport.cli.options import format_option


@click.group(name="lake")
def lake_group() -> None:
    """The Iceberg lake written by publish_to_lake (docs/lake.md)."""


@lake_group.command(name="query")
@click.option("--lake", default=None, envvar="PERFREPORT_LAKE", show_envvar=True,
              help="Lake folder or catalog:NAME; env PERFREPORT_LAKE, default ./lake. Example: --lake lake")
@format_option(csv="a header and one line per row", json="a list of row objects")
@click.option("--snapshot", type=int, default=None,
              help="Read the tables as of this snapshot id (see `lake history`). Example: --snapshot 74478703265")
@click.argument("sql")
def lake_query_cmd(lake: str | None, fmt: str, snapshot: int | None, sql: str) -> None:
    """Run DuckDB SQL over the lake tables kernels, cells, captures, publications (current snapshots).

    \b
    Example:
      perftunereport lake query --lake lake \\
          "SELECT cell_id, kernel_id, sol_pct FROM kernels WHERE family = 'gemm' ORDER BY sol_pct DESC"
      perftunereport lake query --lake lake --format csv "SELECT campaign, cell_id, function, sol_pct FROM kernels"
    """
    from perfreport.cli.printing import print_query_result
    from perfreport.lake.query import lake_query

    print_query_result(lake_query(lake, sql, snapshot=snapshot), fmt)


@lake_group.command(name="history")
@click.option("--lake", default=None, envvar="PERFREPORT_LAKE", show_envvar=True,
              help="Lake folder or catalog:NAME; env PERFREPORT_LAKE, default ./lake. Example: --lake lake")
@click.option("--table", default="kernels", show_default=True, help="Lake table. Example: --table cells")
@format_option(csv="one row per commit (counts as a JSON object)", json="a list of commit objects")
def lake_history_cmd(lake: str | None, table: str, fmt: str) -> None:
    """List a table's commits (snapshot, parent, time, operation, record counts), oldest first.

    Example: perftunereport lake history --lake lake --table kernels
    """
    from perfreport.cli.printing import print_history
    from perfreport.lake.history import lake_history

    print_history(lake_history(lake, table), fmt)


@lake_group.command(name="compare")
@click.option("--lake", default=None, envvar="PERFREPORT_LAKE", show_envvar=True,
              help="Lake folder or catalog:NAME; env PERFREPORT_LAKE, default ./lake. Example: --lake lake")
@click.option("--metric", required=True, help="Numeric kernels column. Example: --metric sol_pct")
@click.option("--campaign", default=None, help="Only this campaign's cells. Example: --campaign h200-decoder-layer")
@click.option("--vary", default="workload.concurrency", show_default=True,
              help="The one descriptor field allowed to differ, as section.field (its one spelling, as in "
                   "config.yaml's context). Example: --vary workload.concurrency")
@format_option(csv="one row per kernel and cell of every comparable group (the cells not comparable go to stderr)",
               json="the groups with their rows, and the cells not comparable")
def lake_compare_cmd(lake: str | None, metric: str, campaign: str | None, vary: str, fmt: str) -> None:
    """Compare a metric per kernel across cells that differ only in --vary.

    Kernels pair by identity (instantiation and launch configuration), whichever section set captured them; a cell
    that captured a kernel in several sets gives its largest set's row (full before basic), and a note says so.

    Example: perftunereport lake compare --lake lake --metric sol_pct --vary workload.concurrency
    """
    from perfreport.cli.printing import print_compare
    from perfreport.lake.compare import lake_compare

    print_compare(lake_compare(lake, metric, campaign=campaign, vary=vary), fmt)


@lake_group.command(name="regressions")
@click.option("--lake", default=None, envvar="PERFREPORT_LAKE", show_envvar=True,
              help="Lake folder or catalog:NAME; env PERFREPORT_LAKE, default ./lake. Example: --lake lake")
@click.option("--metric", default=None,
              help="Numeric kernels column whose series are tested (default duration_ns); with --trials, a regular "
                   "expression over the repeated numbers' names (default all). Example: --metric sol_pct")
@click.option("--kernel", default=None, help="Only kernels whose label or name matches this regular expression. "
                                             "Example: --kernel 'nvjet|gemm'")
@click.option("--since", default=None, help="Only publications at or after this ISO date or time. "
                                            "Example: --since 2026-12-01")
@click.option("--trials", "trials", is_flag=True,
              help="Test the cells' trials instead (the trials table: end-to-end results, kernel time, each kernel's "
                   "time per launch): one series per repeated number of one work on one chip, its cells in "
                   "publication order, each cell's trials in order, so a before/after pair is one series.")
@format_option(csv="one row per change point (and per series too short to test)",
               json="the metric, the number of series read and every row")
def lake_regressions_cmd(lake: str | None, metric: str | None, kernel: str | None, since: str | None, trials: bool,
                         fmt: str) -> None:
    """Change points of a kernel metric over the lake's publications, labelled regression, improvement,
    suspicious (only the latest publication shows it) or insufficient data.

    A series is one kernel of one cell descriptor across publications (kernel_history keeps every publication);
    with --trials, one repeated number of one work on one chip across its cells' trials.

    \b
    Example:
      perftunereport lake regressions --lake lake --metric duration_ns --kernel nvjet
      perftunereport lake regressions --lake lake --trials --metric tpot
    """
    from perfreport.cli.printing import print_regressions
    from perfreport.lake.regressions import lake_regressions, trial_regressions

    if trials:
        if kernel is not None:
            raise click.UsageError("--kernel picks kernel series; with --trials give a pattern of the repeated "
                                   "numbers' names as --metric instead. Example: --trials --metric 'time per launch'")
        print_regressions(trial_regressions(lake, metric, since=since), fmt)
    else:
        print_regressions(lake_regressions(lake, metric or "duration_ns", kernel=kernel, since=since), fmt)


@lake_group.command(name="predictions")
@click.option("--lake", default=None, envvar="PERFREPORT_LAKE", show_envvar=True,
              help="Lake folder or catalog:NAME; env PERFREPORT_LAKE, default ./lake. Example: --lake lake")
@click.option("--campaign", default=None,
              help="Only this campaign's predictions. Example: --campaign h200-decoder-layer")
@format_option(csv="one row per prediction with its outcome (the per-kind summary goes to stderr)",
               json="every prediction with its outcome, and the error per kind and chip")
def lake_predictions_cmd(lake: str | None, campaign: str | None, fmt: str) -> None:
    """The prediction ledger: each publish's next-lever predictions (Amdahl bound, ncu rule estimate, a lever's
    expected unlock) against what a later measurement of the same work on the same chip, on another stack,
    realized (kernel, GPU and end to end), with the error per kind and chip across the lake.

    \b
    Example:
      perftunereport lake predictions --lake lake --campaign h200-decoder-layer

    Every publish_to_lake records its predictions; the README's tour settles them on campaigns/h100-decode-compile
    (its eager cell published, then its compiled cell).
    """
    from perfreport.cli.printing import print_predictions
    from perfreport.lake.predictions import lake_predictions

    print_predictions(lake_predictions(lake, campaign=campaign), fmt)


@lake_group.command(name="relocate")
@click.option("--lake", required=True, help="The lake folder at its NEW place. Example: --lake /data/lakes/h200")
@click.option("--from", "old", default=None,
              help="The folder the lake was moved from (default: read from catalog.db). Example: --from /old/lake")
def lake_relocate_cmd(lake: str, old: str | None) -> None:
    """Rewrite the lake's absolute Iceberg paths after its folder was moved or copied (docs/lake.md).

    \b
    Example:
      cp -r lake lake-moved
      perftunereport lake relocate --lake lake-moved
    """
    from perfreport.lake.relocate import lake_relocate, relocate_summary

    click.echo(relocate_summary(lake_relocate(lake, old)))
