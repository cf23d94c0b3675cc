"""ceilings_measure: run the benchmarks, then write the raw record, the validated override and the samples."""


from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfreport.capture.ceilings.override import override_from_raw, override_text, validate_override
from perfreport.files import write_json_atomic, write_text_atomic
from perfreport.progress import Progress

RAW_FILE = "ceilings_raw.json"
OVERRIDE_FILE = "ceilings_override.yaml"


@dataclass(frozen=True)
class MeasureResult:
    """Where the outputs went, the hardware key, and the measured values by empirical name."""

    raw_path: Path
    override_path: Path
    hardware: str
    values: dict[str, float]
    skipped: list[dict[str, str]]


def ceilings_measure(out_dir: Path, *, hardware: str | None = None, seconds: float = 8.0,
                     dtypes: list[str] | None = None, progress: Progress = lambda _: None) -> MeasureResult:
    """Measure on this host's GPU 0, write the raw record and the override (validated first) into out_dir."""
    from perfreport.capture.ceilings.bench import DTYPES, check_dtypes, measure_ceilings
    from perfreport.config.ceilings import load_ceilings

    chosen = check_dtypes(list(dtypes) if dtypes is not None else list(DTYPES))
    raw = measure_ceilings(out_dir, hardware=hardware, seconds=seconds, dtypes=chosen,
                           ceilings=load_ceilings(), progress=progress)
    text = override_text(override_from_raw(raw))
    raw_path, override_path = out_dir / RAW_FILE, out_dir / OVERRIDE_FILE
    write_json_atomic(raw_path, raw)
    validate_override(text, override_path)
    write_text_atomic(override_path, text)
    empirical = override_from_raw(raw)["hardware"][raw["hardware"]]["empirical"]
    return MeasureResult(raw_path, override_path, raw["hardware"], {k: v["value"] for k, v in empirical.items()},
                         raw["skipped"])
