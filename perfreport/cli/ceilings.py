"""The `ceilings` verbs: measure achievable ceilings on the GPU host and write them as a sol-ceilings override."""

from __future__ import annotations

from pathlib import Path

import click

from perfreport.cli.options import format_option
from perfreport.errors import terminal_text


@click.group(name="ceilings")
def ceilings_group() -> None:
    """Speed-of-light ceilings (sol-ceilings.yaml, docs/ceilings.md)."""


@ceilings_group.command(name="measure")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Folder for ceilings_raw.json, ceilings_override.yaml and nvidia-smi.csv. "
                   "Example: --out ceilings-h200")
@click.option("--hardware", default=None,
              help="Hardware key of sol-ceilings.yaml (default: from the GPU name and compute capability, "
                   "'NVIDIA H200' -> h200_sm90). Example: --hardware h100_sm90")
@click.option("--seconds", type=float, default=8.0, show_default=True,
              help="Length of each sustained back-to-back run, in seconds. Example: --seconds 10")
@click.option("--dtypes", default="bf16,fp16,tf32,fp8,int8", show_default=True,
              help="GEMM dtypes, comma-separated; one the GPU lacks is skipped and recorded. "
                   "Example: --dtypes bf16,fp8")
@format_option(csv="one row per measured ceiling (hardware, name, value)",
               json="the hardware key, the values, what was skipped and the files written")
def ceilings_measure_cmd(out_dir: Path, hardware: str | None, seconds: float, dtypes: str, fmt: str) -> None:
    """Measure dense GEMM per dtype (burst and sustained), HBM copy and L2-resident copy on GPU 0.

    Writes the raw samples and an override with value, method, date and machine per ceiling, validated as a
    ceilings override; copy its entries into sol-ceilings.yaml or point a campaign's ceilings_override at it.
    Needs torch with CUDA; nvidia-smi samples clocks, power and throttle reasons beside each benchmark.

    \b
    Example:
      perftunereport ceilings measure --out ceilings-h200 --seconds 8
    """
    from perfreport.capture.ceilings.measure import ceilings_measure
    from perfreport.cli.output import emit

    result = ceilings_measure(out_dir, hardware=hardware, seconds=seconds,
                              dtypes=[d.strip() for d in dtypes.split(",") if d.strip()],
                              progress=lambda m: click.echo(terminal_text(m), err=True))
    if fmt != "json":  # the JSON document carries them
        for skip in result.skipped:
            click.echo(f"skipped {skip['name']}: {skip['reason']}", err=True)

    def table() -> None:
        for name, value in result.values.items():
            click.echo(f"{result.hardware}.empirical.{name}: {value}")
        click.echo(f"wrote {result.raw_path} and {result.override_path}")

    emit(fmt, table, lambda: (("hardware", "name", "value"), [(result.hardware, *nv) for nv in result.values.items()]),
         lambda: {"hardware": result.hardware, "values": result.values, "skipped": result.skipped,
                  "raw_path": str(result.raw_path), "override_path": str(result.override_path)}, indent=2)
