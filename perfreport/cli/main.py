"""Thin click layer: each verb parses options, calls ONE library function, prints a summary."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from perfreport import __version__
from perfreport.cli.helptext import whole_help
from perfreport.cli.options import format_option
from perfreport.errors import PerfReportError, terminal_text
from perfreport.kernels import MISMATCH_CHOICES

_OS_FIXES = {
    errno.ENOSPC: "the disk holding it is full: free space there, or write elsewhere (--out, --lake), then run the "
                  "command again",
    errno.EFBIG: "the file would pass the largest file this system allows (ulimit -f, or the file system's own "
                 "limit): raise the limit, or write on a file system that allows it, then run the command again",
    errno.EDQUOT: "the disk quota is used up: free space, or write elsewhere (--out, --lake), then run it again",
    errno.EROFS: "that file system is read-only: write elsewhere (--out, --lake) or remount it read-write",
    errno.EACCES: "no permission there: fix the permissions (ls -ld the folder) or write elsewhere",
    errno.EPERM: "the operation is not permitted there: fix the permissions or write elsewhere",
    errno.ENOTDIR: "part of that path is a file where a folder is needed: pass a folder, or move the file away",
    errno.EEXIST: "a file stands where a folder is needed: pass another path, or move the file away",
    errno.EISDIR: "that is a folder where a file is expected: pass a file",
    errno.ENOENT: "no such file or folder: check the path",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) and run it again",
}


def os_error_message(exc: OSError, verb: str) -> str:
    """The one message for an operating-system error that reached the CLI: what failed, on which file, the fix."""
    where = " -> ".join(repr(os.fsdecode(f)) for f in (exc.filename, exc.filename2) if f is not None)
    code = errno.errorcode.get(exc.errno or 0, "")
    what = exc.strerror or str(exc)
    fix = _OS_FIXES.get(exc.errno or 0, "fix the cause above and run the command again")
    return (f"{verb}: {what}{f' ({code})' if code else ''}{f' on {where}' if where else ''}: {fix}. Files are "
            f"written whole (a temporary file, then a rename): what was there before is left as it was.")


class AliasedGroup(click.Group):
    """Accept dashed spellings of underscore verbs (``import-ncu`` for ``import_ncu``); word OS errors once."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # a closed pipe (| head): click's own quiet exit
                raise
            verb = " ".join(filter(None, (ctx.command_path, ctx.invoked_subcommand)))
            raise PerfReportError(os_error_message(exc, verb)) from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or super().get_command(ctx, cmd_name.replace("-", "_"))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        _, cmd, rest = super().resolve_command(ctx, args)
        return (cmd.name if cmd else None), cmd, rest


@click.group(cls=AliasedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perftunereport")
def cli() -> None:
    """perftunereport: per-kernel GPU hardware-counter evidence, from ncu capture to a data lake.

    \b
    Example:
      perftunereport import_ncu --campaign campaigns/h200-decoder-layer \\
          --cell-id prefill-b8-s1024 --bundle campaigns/h200-decoder-layer/captures/prefill/layer_full.ncu-rep.gz
    """


_REPLACE_HELP = ("A file outside the campaign folder is known by its name: let it replace the cell's source of that "
                 "name and other content (a new version of it). A file inside the campaign is known by its path there.")


@cli.command(name="import_ncu")
@click.option("--campaign", "campaign_dir", required=True, type=click.Path(path_type=Path),
              help="Campaign folder holding config.yaml. Example: campaigns/h200-decoder-layer")
@click.option("--cell-id", required=True, help="Cell id from config.yaml cells[]. Example: prefill-b8-s1024")
@click.option("--bundle", "bundle_paths", required=True, multiple=True, type=click.Path(path_type=Path),
              help="A .ncu-rep (or .ncu-rep.gz), an ncu CSV (--page raw or --page details), or an "
                   "evidence-bundle folder with ncu-profiles/; repeat it to import several in one go. The per-metric "
                   "CSVs of one run (NERSC's recipe: one `ncu --csv --metrics M` file per metric) given together, "
                   "or in one folder of a bundle, merge into one source by launch ID. "
                   "Example: --bundle campaigns/h200-decoder-layer/captures/decode/layer_full.ncu-rep.gz")
@click.option("--strict", is_flag=True, help="Turn warnings (unknown config keys, unmeasured fields) into errors.")
@format_option(csv="one row per kernel imported (duration_ns, sol_pct, ... unformatted)",
               json="the written ncu_kernels.json path, the sources, the kernel count, the warnings, the next lever")
@click.option("--rep-reader", type=click.Choice(["auto", "ncu_report"]), default="auto", show_default=True,
              envvar="PERFREPORT_REP_READER",
              help="How a .ncu-rep is read: auto reads the report's bytes directly (held equal to ncu_report by "
                   "the tests; ncu_report takes over for a layout it does not know); ncu_report always uses "
                   "NVIDIA's module (10-100x slower). Env: PERFREPORT_REP_READER. Example: --rep-reader ncu_report")
@click.option("--replace", is_flag=True, help=_REPLACE_HELP)
@click.option("--hardware-mismatch", "hardware_mismatch", type=click.Choice(MISMATCH_CHOICES), default="refuse",
              show_default=True, help="A capture from another GPU than the campaign's `hardware`: refuse it, or "
              "import it with %SoL left null and a warning.")
def import_ncu_cmd(campaign_dir: Path, cell_id: str, bundle_paths: tuple[Path, ...], strict: bool, fmt: str,
                   rep_reader: str, replace: bool, hardware_mismatch: str) -> None:
    """Import ncu exports into campaigns/<c>/cells/<id>/ncu_kernels.json.

    \b
    Example:
      perftunereport import_ncu --campaign campaigns/h200-decoder-layer \\
          --cell-id decode-b16-kv2048 --bundle campaigns/h200-decoder-layer/captures/decode/layer_full.ncu-rep.gz
    """
    from perfreport.cli.printing import print_import_summary
    from perfreport.frontier.candidates import campaign_next_lever
    from perfreport.ncu.importer import import_ncu

    result = import_ncu(campaign_dir, cell_id, list(bundle_paths), strict=strict,
                        progress=lambda m: click.echo(terminal_text(m), err=True), rep_reader=rep_reader,
                        replace=replace, hardware_mismatch=hardware_mismatch)
    print_import_summary(result, fmt, next_lever=campaign_next_lever(campaign_dir))


@cli.command(name="import_rocprof")
@click.option("--campaign", "campaign_dir", required=True, type=click.Path(path_type=Path),
              help="Campaign folder holding config.yaml; with `hardware: from-capture` its kernels are scored "
                   "against the workload's own GPU (perfreport/rocprof/chips.yaml). "
                   "Example: campaigns/h200-decoder-layer")
@click.option("--cell-id", required=True, help="Cell id from config.yaml cells[]. Example: decode-b16-kv2048")
@click.argument("workload_dir", type=click.Path(path_type=Path))
@click.option("--strict", is_flag=True, help="Turn warnings (unknown config keys, rounded timestamps, counters of "
              "mixed passes) into errors.")
@format_option(csv="one row per kernel imported (duration_ns, sol_pct, ... unformatted)",
               json="the written ncu_kernels.json path, the sources, the kernel count, the warnings, the next lever")
@click.option("--replace", is_flag=True, help=_REPLACE_HELP)
@click.option("--hardware-mismatch", "hardware_mismatch", type=click.Choice(MISMATCH_CHOICES), default="refuse",
              show_default=True, help="A workload from another GPU than the campaign's `hardware`: refuse it, or "
              "import it with %SoL left null and a warning.")
@click.option("--device", type=click.IntRange(min=0), default=0, show_default=True,
              help="The roofline.csv row (device) whose measured roofs score the kernels, as rocprof-compute's "
                   "default 0. Example: --device 1")
def import_rocprof_cmd(campaign_dir: Path, cell_id: str, workload_dir: Path, strict: bool, fmt: str, replace: bool,
                       hardware_mismatch: str, device: int) -> None:
    """Import a rocprof-compute workload folder (AMD Instinct) into cells/<id>/ncu_kernels.json.

    WORKLOAD_DIR is one `rocprof-compute profile` output folder, workloads/<name>/<gpu>/, holding sysinfo.csv
    and pmc_perf.csv (roofline.csv, timestamps.csv and perfmon/ when present). docs/rocprof.md says what is read.
    An AMD campaign is `perftunereport campaign init DIR --hardware from-capture`; into the NVIDIA example
    campaign, as below, the workload imports with %SoL null.

    \b
    Example:
      perftunereport import_rocprof --campaign campaigns/h200-decoder-layer --cell-id decode-b16-kv2048 \\
          --hardware-mismatch warn tests/data/rocprof/MI200
    """
    from perfreport.cli.printing import print_import_summary
    from perfreport.frontier.candidates import campaign_next_lever
    from perfreport.rocprof.importer import import_rocprof

    result = import_rocprof(campaign_dir, cell_id, workload_dir, strict=strict,
                            progress=lambda m: click.echo(terminal_text(m), err=True), replace=replace,
                            hardware_mismatch=hardware_mismatch, device=device)
    print_import_summary(result, fmt, next_lever=campaign_next_lever(campaign_dir))


def _timeshare_options(fn: Callable[..., None]) -> Callable[..., None]:
    fn = format_option(csv="one row per kernel imported, by share", json="the written file, the sources, the kernel "
                                                                          "count and the warnings")(fn)
    fn = click.option("--trial", type=click.IntRange(min=1), default=None, metavar="N",
                      help="Which repetition of the cell's measurement this file is (1 for the first): the warehouse "
                           "gives each kernel's n, mean, median, min and 95% CI over the cell's trials. A cell's "
                           "`trials:` in config.yaml numbers its files the same way. Example: --trial 3")(fn)
    fn = click.option("--replace", is_flag=True, help=_REPLACE_HELP)(fn)
    fn = click.option("--cell-id", required=True, help="Cell id from config.yaml. Example: decode-b16-kv2048")(fn)
    fn = click.option("--campaign", "campaign_dir", required=True, type=click.Path(path_type=Path),
                      help="Campaign folder. Example: campaigns/h200-decoder-layer")(fn)
    return fn


@cli.command(name="import_nsys")
@_timeshare_options
@click.argument("path", type=click.Path(path_type=Path))
def import_nsys_cmd(campaign_dir: Path, cell_id: str, path: Path, replace: bool, trial: int | None, fmt: str) -> None:
    """Import kernel durations from nsys into cells/<id>/kernel_times.json.

    PATH is `nsys stats --report cuda_gpu_kern_sum --format csv` output (older: gpukernsum) or an
    `nsys export --type sqlite` file.

    \b
    Example:
      perftunereport import_nsys --campaign campaigns/h200-decoder-layer --cell-id decode-b16-kv2048 \\
          tests/data/nsys/dotllm_rtx4090_nsys2024.6.2_cuda_gpu_kern_sum.csv
    """
    from perfreport.cli.printing import print_timeshare_summary
    from perfreport.timeshare import import_nsys

    print_timeshare_summary(import_nsys(campaign_dir, cell_id, path, replace=replace, trial=trial), fmt)


@cli.command(name="import_torch_trace")
@_timeshare_options
@click.argument("path", type=click.Path(path_type=Path))
def import_torch_trace_cmd(campaign_dir: Path, cell_id: str, path: Path, replace: bool, trial: int | None,
                           fmt: str) -> None:
    """Import kernel durations from a PyTorch profiler Chrome trace (.json or .json.gz).

    \b
    Example:
      perftunereport import_torch_trace --campaign campaigns/h200-decoder-layer --cell-id decode-b16-kv2048 \\
          campaigns/h200-decoder-layer/captures/decode/torch_trace.json.gz
    """
    from perfreport.cli.printing import print_timeshare_summary
    from perfreport.timeshare import import_torch_trace

    print_timeshare_summary(import_torch_trace(campaign_dir, cell_id, path, replace=replace, trial=trial), fmt)


@cli.command(name="import_samples")
@_timeshare_options
@click.option("--sample-type", default=None, metavar="TYPE[/UNIT]",
              help="Which sample type of a pprof profile to count (default: the profile's default_sample_type, "
                   "else its last). An error lists the types present. Example: --sample-type samples/count")
@click.argument("path", type=click.Path(path_type=Path))
def import_samples_cmd(campaign_dir: Path, cell_id: str, path: Path, replace: bool, trial: int | None, fmt: str,
                       sample_type: str | None) -> None:
    """Import a continuous profiler's samples: pprof, folded stacks, or per-kernel CSV/JSON.

    PATH is a pprof profile (profile.proto, .pb.gz), folded stacks (`frame;...;leaf COUNT` lines) or a
    per-kernel CSV (kernel,samples[,share_pct]) or JSON export. A stack sample counts for the CUDA-kernel
    frame of its stack: the leaf-most frame naming a kernel of the cell's ncu_kernels.json or
    kernel_times.json, else one marked `[GPU Kernel] NAME`, else the leaf under a CUDA launch call; samples
    with none are left out and reported (docs/timeshare.md).

    \b
    Example:
      perftunereport import_samples --campaign campaigns/h200-decoder-layer --cell-id prefill-b8-s1024 \\
          tests/data/samples/parca_like_gpu_kernels.pb.gz
    """
    from perfreport.cli.printing import print_timeshare_summary
    from perfreport.timeshare import import_samples

    print_timeshare_summary(import_samples(campaign_dir, cell_id, path, replace=replace, sample_type=sample_type,
                                           trial=trial), fmt)


@cli.command(name="import_step_budget")
@click.option("--bundle", "bundle_dir", required=True, type=click.Path(path_type=Path),
              help="Evidence bundle whose inference_perfbench_v1.json gets `step_budget` (page 3). "
                   "Example: experiments/artifacts/inference-perf-bench/h200-decode")
@click.option("--step-regex", default=r"^ProfilerStep#\d+$", show_default=True,
              help="user_annotation names that mark one step (without any: steps between cuda*Synchronize calls).")
@click.argument("path", type=click.Path(path_type=Path))
def import_step_budget_cmd(bundle_dir: Path, step_regex: str, path: Path) -> None:
    """GPU-busy vs host gap per step, from a PyTorch profiler trace, into the bundle (page 3 of the site).

    \b
    Example:
      perftunereport bundle init --id h200-decode
      perftunereport import_step_budget --bundle experiments/artifacts/inference-perf-bench/h200-decode \\
          campaigns/h200-decoder-layer/captures/decode/torch_trace.json.gz
    """
    from perfreport.cli.printing import print_step_budget
    from perfreport.timeshare.step_budget import import_step_budget

    target, budget = import_step_budget(bundle_dir, path, step_regex)
    print_step_budget(budget, target)


@cli.command(name="query")
@click.option("--campaign", "campaign_dir", required=True, type=click.Path(path_type=Path),
              help="Campaign folder whose cells are loaded into DuckDB.")
@format_option(csv="a header and one line per row", json="a list of row objects (JSON columns as JSON)")
@click.argument("sql")
def query_cmd(campaign_dir: Path, fmt: str, sql: str) -> None:
    """Run SQL over a campaign's tables and views (ncu_kernels, kernel_times, kernel_samples, kernel_join).

    \b
    Example:
      perftunereport query --campaign campaigns/h200-decoder-layer \\
          "SELECT cell_id, function, amdahl_bound_pct FROM kernel_join ORDER BY 3 DESC LIMIT 5"
      perftunereport query --campaign campaigns/h200-decoder-layer --format csv \\
          "SELECT cell_id, function, duration_ns, sol_pct FROM ncu_kernels ORDER BY duration_ns DESC"
    """
    from perfreport.cli.printing import print_query_result
    from perfreport.warehouse.db import query

    print_query_result(query(campaign_dir, sql), fmt)


@cli.command(name="report_render")
@click.option("--campaign", "campaign_dir", required=True, type=click.Path(path_type=Path),
              help="Campaign folder to render. Example: campaigns/h200-decoder-layer")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("site"), show_default=True,
              help="Site root; the campaign goes to <out>/<campaign>/ and <out>/index.html lists campaigns.")
@click.option("--lake", default=None,
              help="Lake folder or catalog:NAME whose publications of this campaign page 08 (History) draws, each "
                   "kernel series with its change points. Read only when given: PERFREPORT_LAKE is not read here, "
                   "so the site never depends on the environment. Example: --lake lake")
@click.option("--history-metric", default=None,
              help="Numeric kernels column page 08 draws (with --lake; default duration_ns). "
                   "Example: --history-metric sol_pct")
@format_option(csv="one row per page written (page, bytes)", json="the site, the index, the pages and the downloads")
def report_render_cmd(campaign_dir: Path, out_dir: Path, lake: str | None, history_metric: str | None,
                      fmt: str) -> None:
    """Render the static offline campaign site (pages 01-08, per-cell pages, comparisons).

    With --lake, page 08 (History) draws each kernel's metric over the lake's publications of this campaign with
    its change points (those of `lake regressions`); without it, the page says how to get them.

    \b
    Example:
      perftunereport report_render --campaign campaigns/h200-decoder-layer --out site
      perftunereport report_render --campaign campaigns/h200-decoder-layer --out site --lake lake
    """
    from perfreport.cli.printing import print_render_summary, render_progress
    from perfreport.site.history_page import History
    from perfreport.site.render import report_render

    history = None
    if lake is not None:
        from perfreport.config.campaign import load_campaign
        from perfreport.lake.predictions import as_dicts, lake_predictions
        from perfreport.lake.regressions import campaign_series

        metric = history_metric or "duration_ns"
        ledger = as_dicts(lake_predictions(lake, campaign=load_campaign(campaign_dir).id, missing_ok=True))
        history = History(lake, metric, campaign_series(lake, campaign_dir, metric), ledger["predictions"])
    elif history_metric is not None:
        raise click.UsageError("--history-metric chooses what page 08 draws from a lake: give --lake LAKE too. "
                               "Example: --lake lake --history-metric sol_pct")
    print_render_summary(report_render(campaign_dir, out_dir, history, progress=render_progress()), fmt)


@cli.group()
def campaign() -> None:
    """Campaign folders: config.yaml with the measurement context and cells."""


@campaign.command(name="init")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--id", "campaign_id", default=None, help="Campaign id (default: the folder name).")
@click.option("--hardware", default="h200_sm90", show_default=True,
              help="Ceiling token from sol-ceilings.yaml. Example: h100_sm90")
def campaign_init_cmd(directory: Path, campaign_id: str | None, hardware: str) -> None:
    """Scaffold DIRECTORY/config.yaml. Example: perftunereport campaign init campaigns/my-run"""
    from perfreport.config.campaign import campaign_init

    path = campaign_init(directory, campaign_id=campaign_id, hardware=hardware)
    click.echo(f"wrote {path}")


@campaign.command(name="validate")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--strict", is_flag=True, help="Unknown keys become errors.")
def campaign_validate_cmd(directory: Path, strict: bool) -> None:
    """Validate DIRECTORY/config.yaml as a whole file.

    Example: perftunereport campaign validate campaigns/h200-decoder-layer
    """
    from perfreport.config.campaign import load_campaign

    cfg = load_campaign(directory, strict=strict)
    for w in cfg.warnings:
        click.echo(terminal_text(f"warning: {w}"), err=True)
    click.echo(f"{directory}/config.yaml: ok ({len(cfg.cells)} cells, hardware {cfg.hardware})")


@cli.group()
def bundle() -> None:
    """Evidence bundles under experiments/artifacts/inference-perf-bench/<id>/."""


@bundle.command(name="init")
@click.option("--id", "bundle_id", required=True, help="Bundle id. Example: 2026-12-02-h200-llama8b-decode")
@click.option("--root", type=click.Path(path_type=Path), default=Path("."), show_default=True,
              help="Folder under which experiments/artifacts/inference-perf-bench/ is created.")
def bundle_init_cmd(bundle_id: str, root: Path) -> None:
    """Scaffold an evidence bundle. Example: perftunereport bundle init --id h200-decode-bs16"""
    from perfreport.bundle.layout import bundle_init

    path = bundle_init(root, bundle_id)
    click.echo(f"created {path}")


@cli.command(name="demo")
@click.option("--campaign", "campaign_dir", type=click.Path(path_type=Path),
              default=Path("campaigns/h200-decoder-layer"), show_default=True,
              help="Campaign whose cells list their captures under `captures:`.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("site"), show_default=True,
              help="Site root for the rendered campaign.")
def demo_cmd(campaign_dir: Path, out_dir: Path) -> None:
    """Import every capture of a campaign, print the kernel tables, render its site (the README's `make demo`).

    Example: perftunereport demo --campaign campaigns/h200-decoder-layer --out site
    """
    from perfreport.cli.printing import (
        print_cell_steps,
        print_import_summary,
        print_render_summary,
        print_timeshare_summary,
        render_progress,
    )
    from perfreport.frontier.candidates import campaign_next_lever
    from perfreport.kernels.cells import ImportResult
    from perfreport.site.render import report_render
    from perfreport.timeshare.step_budget import CellSteps
    from perfreport.warehouse.campaign_import import import_campaign

    for result in import_campaign(campaign_dir):
        if isinstance(result, ImportResult):
            print_import_summary(result)
        elif isinstance(result, CellSteps):
            print_cell_steps(result)
        else:
            print_timeshare_summary(result)
    click.echo(f"next lever (campaign): {campaign_next_lever(campaign_dir)}")
    print_render_summary(report_render(campaign_dir, out_dir, progress=render_progress()))


@cli.command(name="value_view")
@click.option("--campaign", "campaign_dir", required=True, type=click.Path(path_type=Path),
              help="Campaign folder holding config.yaml and levers.yaml. Example: campaigns/h200-decoder-layer")
@format_option(csv="one row per kernel, by measured time saved (the one ranking, every kernel)",
               json="the whole view, levers ranked (perfreport/config/schemas/value_view.schema.json)")
@click.option("--handoff", "handoff", type=click.Path(path_type=Path), default=None,
              help="Rewrite only the `## Frontier` section of this HANDOFF.md (created when absent). "
                   "Example: --handoff experiments/artifacts/inference-perf-bench/h200-decode/HANDOFF.md")
@click.option("--strict", is_flag=True, help="Unknown keys in config.yaml or levers.yaml become errors.")
@click.option("--lake", default=None,
              help="Read the lake's prediction ledger: each open lever whose expected unlock a later measurement "
                   "settled is shown won or refuted with its evidence (lake predictions). Example: --lake lake")
@click.option("--settle", is_flag=True, help="With --lake: write those outcomes into levers.yaml (status, evidence, "
                                             "why_lost), keeping the rest of the file.")
def value_view_cmd(campaign_dir: Path, fmt: str, handoff: Path | None, strict: bool, lake: str | None,
                   settle: bool) -> None:
    """Rank the campaign's kernels by measured time saved and its levers.yaml estimates; name the next lever.

    \b
    Example:
      perftunereport value_view --campaign campaigns/h200-decoder-layer --handoff HANDOFF.md
      perftunereport value_view --campaign campaigns/h200-decoder-layer --lake lake --settle
    """
    from perfreport.cli.printing import print_value_view
    from perfreport.frontier.value_view import update_handoff, value_view

    if settle and lake is None:
        raise click.UsageError("--settle writes what the lake's prediction ledger settled: give --lake LAKE too. "
                               "Example: --lake lake --settle")
    if lake is not None:
        settle_from_lake(campaign_dir, lake, settle)

    view = value_view(campaign_dir, strict=strict)
    if handoff is not None:
        click.echo(f"updated the Frontier section of {update_handoff(handoff, view)}", err=True)
    print_value_view(view, fmt)


def settle_from_lake(campaign_dir: Path, lake: str, write: bool) -> None:
    """Each open lever the ledger settled: one line (stderr), and with write its status, evidence and why_lost."""
    from perfreport.config.campaign import load_campaign
    from perfreport.frontier.levers import load_levers, settle_lever
    from perfreport.lake.predictions import as_dicts, lake_predictions

    campaign = load_campaign(campaign_dir)
    levers = load_levers(campaign)
    open_ids = {lv.id for lv in levers.levers if lv.status == "open"} if levers else set()
    rows = [r for r in as_dicts(lake_predictions(lake, campaign=campaign.id))["predictions"]
            if r["kind"] == "expected unlock" and r["lever"] in open_ids and r["outcome"]]
    for r in rows:
        status = r["outcome"].split(":", 1)[0]
        evidence = [f"lake {lake}: publication {r['settled_by']} (perftunereport lake predictions)"]
        why = (f"{r['outcome']}; predicted {r['predicted_pct']:.2f}% of the cell's time, realized end to end "
               f"{r['realized_e2e_pct']:.2f}%" if r["realized_e2e_pct"] is not None else r["outcome"])
        line = f"lever {r['lever']}: {status} ({r['outcome']})"
        if write and status in ("won", "refuted"):
            path = settle_lever(campaign, r["lever"], status, evidence, why if status == "refuted" else None)
            line += f"; wrote it into {path}"
        click.echo(terminal_text(line), err=True)
    if not rows:
        click.echo(f"no open lever of {campaign.id} settled in lake {lake} yet", err=True)


@cli.command(name="publish_to_lake")
@click.option("--campaign", "campaign_dir", required=True, type=click.Path(path_type=Path),
              help="Campaign folder whose imported cells are published. Example: campaigns/h200-decoder-layer")
@click.option("--lake", default=None, envvar="PERFREPORT_LAKE", show_envvar=True,
              help="Lake folder (catalog.db + warehouse/), or catalog:NAME for a pyiceberg catalog configured in "
                   ".pyiceberg.yaml or PYICEBERG_CATALOG__NAME__* (REST, SQL on PostgreSQL); env PERFREPORT_LAKE, "
                   "default ./lake. Example: --lake lake")
@click.option("--strict", is_flag=True, help="Any gate problem (missing context, unmeasured %SoL, a missing or "
                                             "malformed krhpa block) fails; nothing is written.")
@click.option("--dry-run", is_flag=True, help="Run the gate and print what would be written; write nothing.")
@click.option("--who", default=None, help="Publisher recorded in the ledger (default: env USER). Example: --who ana")
@click.option("--cell-id", "cell_ids", multiple=True,
              help="Publish only this cell (repeatable; default: every cell). Example: --cell-id decode-b16-kv2048")
def publish_to_lake_cmd(campaign_dir: Path, lake: str | None, strict: bool, dry_run: bool, who: str | None,
                        cell_ids: tuple[str, ...]) -> None:
    """Publish a campaign's kernels, cells and captures to the Iceberg lake in one commit.

    Re-publishing a cell replaces its rows; re-publishing rows the lake already holds writes nothing (no second
    publication).

    \b
    Example:
      perftunereport publish_to_lake --campaign campaigns/h200-decoder-layer --lake lake --dry-run
    """
    from perfreport.lake.writer import publish_summary, publish_to_lake

    click.echo(publish_summary(publish_to_lake(campaign_dir, lake=lake, strict=strict, dry_run=dry_run, who=who,
                                               cell_ids=list(cell_ids) or None)))


def _register_groups() -> None:
    from perfreport.cli.capture import capture_group, harness_cmd
    from perfreport.cli.ceilings import ceilings_group
    from perfreport.cli.lake import lake_group

    cli.add_command(capture_group)
    cli.add_command(ceilings_group)
    cli.add_command(harness_cmd)
    cli.add_command(lake_group)
    whole_help(cli)  # --help never cuts a sentence ("...") nor a word (at a hyphen, at the width)


_register_groups()


def main() -> None:
    """Entry point for `python -m perfreport`."""
    cli()
