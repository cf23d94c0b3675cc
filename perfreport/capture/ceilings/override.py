"""Raw microbenchmark record -> a sol-ceilings override (`hardware.<hw>.empirical`), validated before it is written.

Pure: no torch. Sustained values keep the existing names (`bf16_gemm_tflops`, `device_copy_tbps`); burst ones add
`_burst` before the unit (`bf16_gemm_burst_tflops`). Each entry's method says how it was measured and what clocks,
power and throttle reasons nvidia-smi saw meanwhile; `where` names the GPU, driver, torch and power limit.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import yaml

from perfreport.errors import ConfigError, InputError

_DIGITS = {"tflops": 1, "tops": 1, "tbps": 3}


def _median(rates: list[float]) -> float:
    return statistics.median(rates)


def _mhz(span: dict[str, float] | None, how: str) -> str:
    if not span:
        return "SM clock not sampled"
    if how == "max":
        return f"SM clock up to {span['max']:,.0f} MHz"
    return f"SM clock {span['min']:,.0f}-{span['max']:,.0f} MHz (median {span['median']:,.0f})"


def _state(summary: dict[str, Any] | None, how: str) -> str:
    """What nvidia-smi saw in a window: clocks, power against the limit, throttle reasons with their share."""
    if not summary or not summary["samples"]:
        return "no nvidia-smi samples in the window"
    parts = [_mhz(summary["sm_clock_mhz"], how)]
    power, limit = summary["power_w"], summary["power_limit_w"]
    if power:
        of = f" of a {limit:,.0f} W limit" if limit else ""
        parts.append(f"power up to {power['max']:,.0f} W{of}" if how == "max"
                     else f"power median {power['median']:,.0f} W{of}")
    total = sum(r["samples"] for r in summary["throttle_reasons"])
    if total:
        parts.append("throttle reasons " + ", ".join(
            f"{r['reasons']} in {100 * r['samples'] / total:.0f}%" for r in summary["throttle_reasons"]))
    return f"nvidia-smi every {{interval}} ms ({summary['samples']} samples): " + "; ".join(parts)


def _where(raw: dict[str, Any]) -> str:
    m = raw["machine"]
    limit = f"{m['power_limit_w']:,.0f} W power limit" if m.get("power_limit_w") else "power limit not read"
    return (f"{m['gpu']} ({m['sm_count']} SMs, {m['memory_gib']} GiB), driver {m['driver']}, torch {m['torch']} "
            f"(CUDA {m['cuda']}), {limit}")


def _entries(raw: dict[str, Any], record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    s, unit = raw["settings"], record["unit"]
    interval = str(s["smi_interval_ms"])
    head = f"perftunereport ceilings measure: {record['what']}"
    tail = "CUDA events, no profiler attached, clocks as found"
    sustained = record["sustained"]
    out = {f"{record['name']}_{unit}": {
        "value": round(_median(sustained["rates"]), _DIGITS[unit]),
        "method": (f"{head}; the median of {len(sustained['rates'])} slices of {s['slice_s']:g} s over "
                   f"{len(sustained['rates']) * s['slice_s']:g} s of back-to-back launches, {tail}; "
                   + _state(record.get("smi_sustained"), "span").replace("{interval}", interval)),
    }}
    burst = record.get("burst")
    if burst:
        out[f"{record['name']}_burst_{unit}"] = {
            "value": round(max(burst["rates"]), _DIGITS[unit]),
            "method": (f"{head}; the best of {len(burst['rates'])} single launches, each timed alone, after "
                       f"{s['idle_s']:g} s idle, {tail}; "
                       + _state(record.get("smi_burst"), "max").replace("{interval}", interval)),
        }
    return out


def override_from_raw(raw: dict[str, Any]) -> dict[str, Any]:
    """The override document: hardware.<hw>.empirical.<name> = {value, method, measured, where}, sorted by name."""
    if raw.get("schema_version") != 1 or not isinstance(raw.get("benchmarks"), list):
        raise InputError(f"ceilings raw record: expected schema_version 1 with a `benchmarks` list (the JSON that "
                         f"`perftunereport ceilings measure` writes), got schema_version "
                         f"{raw.get('schema_version')!r}. Re-run the measurement with this version.")
    empirical: dict[str, dict[str, Any]] = {}
    where = _where(raw)
    for record in raw["benchmarks"]:
        for name, entry in _entries(raw, record).items():
            empirical[name] = {**entry, "measured": raw["measured"], "where": where}
    return {"hardware": {raw["hardware"]: {"empirical": dict(sorted(empirical.items()))}}}


def override_text(doc: dict[str, Any]) -> str:
    """YAML text of an override, stable across runs (one entry per block, no line wrapping)."""
    header = "# Written by `perftunereport ceilings measure`; a sol-ceilings override (docs/ceilings.md).\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=10_000, allow_unicode=True)


def validate_override(text: str, target: Path) -> None:
    """Load the override text the way a campaign would (load_ceilings, strict) before it is written to target."""
    from perfreport.config.ceilings import load_ceilings

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=target.parent, prefix=".check-", delete=False) as fh:
        fh.write(text)
        check = Path(fh.name)
    try:
        load_ceilings(check, strict=True)
    except ConfigError as exc:
        raise ConfigError(f"{target} (not written)", exc.problems) from None
    finally:
        check.unlink(missing_ok=True)
