"""nvidia-smi beside a benchmark: sample clocks, power and throttle reasons to a CSV, then summarize a time window.

The sampler is `nvidia-smi --query-gpu=... -lms N` writing CSV lines to a file; each line's timestamp is the host's
local time, turned into epoch seconds with the host's UTC offset (recorded in the raw output, so a summary computed
again on another machine gives the same numbers).
"""

from __future__ import annotations

import datetime
import shutil
import statistics
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfreport.errors import InputError

# The query's field order is the CSV's column order; `nounits` leaves bare numbers.
FIELDS = ("timestamp", "clocks.sm", "clocks.mem", "power.draw", "power.limit", "temperature.gpu",
          "clocks_throttle_reasons.active", "utilization.gpu")
INFO_FIELDS = ("name", "driver_version", "power.limit", "power.max_limit", "clocks.max.sm", "memory.total")
_TS_FORMAT = "%Y/%m/%d %H:%M:%S.%f"

# clocks_throttle_reasons bits as nvidia-smi -q names them.
THROTTLE_BITS = {
    0x1: "GPU idle", 0x2: "applications clocks setting", 0x4: "SW power cap", 0x8: "HW slowdown",
    0x10: "sync boost", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown", 0x80: "HW power brake slowdown",
    0x100: "display clock setting",
}


@dataclass(frozen=True)
class Sample:
    """One nvidia-smi line: epoch seconds, SM/memory clock (MHz), power draw/limit (W), temperature, reasons."""

    t: float
    sm_mhz: float | None
    mem_mhz: float | None
    power_w: float | None
    power_limit_w: float | None
    temp_c: float | None
    reasons: str | None
    util_pct: float | None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # '[N/A]', '[Not Supported]'


def parse_samples(text: str, utc_offset_s: int) -> list[Sample]:
    """Parse the sampler's CSV (no header, no units); lines that are not samples (errors, blanks) are skipped."""
    tz = datetime.timezone(datetime.timedelta(seconds=utc_offset_s))
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(FIELDS):
            continue
        try:
            stamp = datetime.datetime.strptime(cells[0], _TS_FORMAT).replace(tzinfo=tz).timestamp()
        except ValueError:
            continue
        reasons = cells[6] if cells[6].startswith("0x") else None
        sm, mem, power, limit, temp = (_number(c) for c in cells[1:6])
        out.append(Sample(stamp, sm, mem, power, limit, temp, reasons, _number(cells[7])))
    return out


def reason_names(mask: str) -> str:
    """'0x0000000000000004' -> '0x4 (SW power cap)'; 0 -> '0x0 (none)'."""
    value = int(mask, 16)
    names = [name for bit, name in THROTTLE_BITS.items() if value & bit] or ["none"]
    return f"{value:#x} ({', '.join(names)})"


def _span(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1), "max": round(max(values), 1)}


def summarize(samples: Iterable[Sample], t0: float, t1: float, margin_s: float = 0.0) -> dict[str, Any]:
    """Clocks, power, temperature and throttle reasons of the samples taken in [t0 - margin, t1 + margin]."""
    window = [s for s in samples if t0 - margin_s <= s.t <= t1 + margin_s]
    reasons = Counter(reason_names(s.reasons) for s in window if s.reasons is not None)
    limits = sorted({s.power_limit_w for s in window if s.power_limit_w is not None})
    return {
        "samples": len(window),
        "sm_clock_mhz": _span([s.sm_mhz for s in window if s.sm_mhz is not None]),
        "mem_clock_mhz": _span([s.mem_mhz for s in window if s.mem_mhz is not None]),
        "power_w": _span([s.power_w for s in window if s.power_w is not None]),
        "power_limit_w": limits[-1] if limits else None,
        "temperature_c": _span([s.temp_c for s in window if s.temp_c is not None]),
        "throttle_reasons": [{"reasons": r, "samples": n}
                             for r, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0]))],
    }


def smi_path() -> str | None:
    """The nvidia-smi executable, or None when the host has none (then no samples are recorded)."""
    return shutil.which("nvidia-smi")


def gpu_info(gpu: str) -> dict[str, str]:
    """name, driver, power limits, max SM clock and memory of one GPU (index or UUID), as nvidia-smi prints them."""
    exe = smi_path()
    if exe is None:
        return {}
    cmd = [exe, f"--query-gpu={','.join(INFO_FIELDS)}", "--format=csv,noheader,nounits", "-i", gpu]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    cells = [c.strip() for c in done.stdout.strip().splitlines()[0].split(",")] if done.stdout.strip() else []
    if done.returncode != 0 or len(cells) != len(INFO_FIELDS):
        return {}
    return dict(zip(INFO_FIELDS, cells, strict=True))


class Sampler:
    """`nvidia-smi ... -lms interval` running beside the benchmarks, its CSV written to path."""

    def __init__(self, path: Path, gpu: str, interval_ms: int) -> None:
        self.path = path
        self.gpu = gpu
        self.interval_ms = interval_ms
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Sampler:
        exe = smi_path()
        if exe is None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [exe, f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits", "-i", self.gpu,
               "-lms", str(self.interval_ms)]
        try:
            with self.path.open("wb") as fh:
                self._proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise InputError(f"nvidia-smi sampler: cannot start {cmd[0]} ({exc}); expected the NVIDIA driver's "
                             "nvidia-smi on the GPU host. Fix the driver install, or take it off PATH to measure "
                             "without clock and power samples.") from exc
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def samples(self, utc_offset_s: int) -> list[Sample]:
        """What the sampler wrote so far, parsed."""
        if not self.path.is_file():
            return []
        return parse_samples(self.path.read_text(encoding="utf-8", errors="replace"), utc_offset_s)
