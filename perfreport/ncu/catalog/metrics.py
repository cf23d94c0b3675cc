"""Load metrics.yaml: the map from our normalized names to raw ncu metric names."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from perfreport.ncu.catalog.chips import load_chip_maps
from perfreport.yamlio import SAFE_LOADER


@dataclass(frozen=True)
class FlopTerm:
    """One executed-instruction rate and the FLOPs each instruction stands for."""

    metric: str
    weight: float

    @property
    def counts(self) -> tuple[str, ...]:
        """Plain instruction counts that stand for the rate x cycles where an export holds them instead: the smsp__
        `.sum` and its sm__ twin (the NERSC roofline recipe's names), both summed over the whole GPU."""
        plain = self.metric.removesuffix(".per_cycle_elapsed")
        return (plain, "sm__" + plain.removeprefix("smsp__")) if plain != self.metric else ()

    @property
    def derived(self) -> str | None:
        """ncu's weighted twin of the rate (`derived__<counter>_x<weight>` = rate x weight), which full sets of newer
        ncu versions keep for the half-precision counters where the plain rate may be absent."""
        base = self.metric.removesuffix(".sum.per_cycle_elapsed")
        return f"derived__{base}_x{self.weight:g}" if base != self.metric and self.weight > 1 else None


@dataclass(frozen=True)
class Catalog:
    """Raw metric names grouped by the derivation that uses them."""

    scalars: dict[str, str]
    block_limits: dict[str, str]
    tensor_flops: tuple[str, ...]  # every chip's tensor-path counters (chips.yaml), read when the export has them
    tensor_peak_per_cycle: tuple[str, ...]  # and their dense per-cycle peaks
    cuda_core_flops: dict[str, tuple[FlopTerm, ...]]
    cuda_core_peak_per_cycle: dict[str, str]
    cuda_core_peak_flops_per_inst: dict[str, float]
    warp_stalls: dict[str, str]  # reason -> metric
    text: dict[str, str]
    implausible: dict[str, float]  # limits no GPU's value can pass (min_duration_ns, max_tflops, max_pct_of_ceiling)
    rep_units: dict[str, str]  # ncu_report's unit of each numeric metric above (for the byte reader)

    def resolve(self, refs: tuple[str, ...]) -> list[str]:
        """The ncu metric names behind metrics.yaml references ("scalars.duration_ns", or a whole group such as
        "tensor_flops"), in order, each once; an unknown reference is a KeyError (row.py names only real ones)."""
        groups: dict[str, dict[str, str]] = {
            "scalars": self.scalars, "block_limits": self.block_limits,
            "tensor_flops": {str(i): m for i, m in enumerate(self.tensor_flops)},
            "tensor_peak_per_cycle": {str(i): m for i, m in enumerate(self.tensor_peak_per_cycle)},
            "warp_stalls": self.warp_stalls,
            "cuda_core_peak_per_cycle": self.cuda_core_peak_per_cycle,
            "cuda_core_flops": {f"{k}.{i}": t.metric for k, terms in self.cuda_core_flops.items()
                                for i, t in enumerate(terms)},
        }
        names: list[str] = []
        for ref in refs:
            group, _, item = ref.partition(".")
            found = [groups[group][item]] if item else list(groups[group].values())
            names += [n for n in found if n not in names]
        return names

    def needed(self) -> list[str]:
        """Every raw metric the derivation reads, sorted (what a reader must extract)."""
        names: set[str] = set()
        for group in (self.scalars, self.block_limits, self.cuda_core_peak_per_cycle, self.warp_stalls, self.text):
            names.update(group.values())
        names.update(self.tensor_flops, self.tensor_peak_per_cycle)
        for terms in self.cuda_core_flops.values():
            names.update(m for t in terms for m in (t.metric, *t.counts, *([t.derived] if t.derived else [])))
        return sorted(names)


@lru_cache(maxsize=1)
def metrics_yaml() -> dict[str, Any]:
    """Parse the packaged metrics.yaml once (load_catalog and catalog/sets.py read their parts of it)."""
    text = resources.files("perfreport.ncu.catalog").joinpath("metrics.yaml").read_text(encoding="utf-8")
    raw: dict[str, Any] = yaml.load(text, Loader=SAFE_LOADER)
    return raw


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """Load the packaged metrics.yaml once."""
    raw = metrics_yaml()
    maps = list(load_chip_maps().chips.values())
    stalls = {r: f"{raw['warp_stall_prefix']}{r}{raw['warp_stall_suffix']}" for r in raw["warp_stall_reasons"]}
    return Catalog(
        scalars=dict(raw["scalars"]),
        block_limits=dict(raw["block_limits"]),
        tensor_flops=tuple(dict.fromkeys(p.flops for m in maps for p in m.paths.values())),
        tensor_peak_per_cycle=tuple(dict.fromkeys(p.peak for m in maps for p in m.paths.values())),
        cuda_core_flops={
            k: tuple(FlopTerm(str(t["metric"]), float(t["weight"])) for t in v)
            for k, v in raw["cuda_core_flops"].items()
        },
        cuda_core_peak_per_cycle=dict(raw["cuda_core_peak_per_cycle"]),
        cuda_core_peak_flops_per_inst={str(k): float(v) for k, v in raw["cuda_core_peak_flops_per_inst"].items()},
        warp_stalls=stalls,
        text=dict(raw["text"]),
        implausible={str(k): float(v) for k, v in raw["implausible"].items()},
        rep_units={str(k): str(v) for k, v in raw["rep_units"].items()},
    )
