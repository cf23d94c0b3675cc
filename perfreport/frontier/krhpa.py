"""The K/R/H/P/A rubric: how strong a candidate and its baseline are, and whether a speedup is a VERDICT.

Each letter is an integer 1..4 per side, higher = stronger (docs/frontier.md):
K kernel source and maturity, R rigor (how this side was tuned and measured), H hardware path,
P production representativeness, A availability / adoption.

The fair-baseline clause: a speedup is a VERDICT only against a baseline at H and R at least the candidate's and
P = 4 (what production runs). A speedup over a weaker baseline (a tensor-core candidate against generic Triton
while production runs a vendor tensor-core library) is a DRAFT, never a VERDICT. Everything here is pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from perfreport.config.campaign import Campaign
from perfreport.config.context import context_value_problem
from perfreport.warehouse.gather import campaign_trial_samples, e2e_metric, higher_is_better
from perfreport.warehouse.stats import FASTER, MIN_TRIALS, SLOWER, Comparison, compare

LEVELS = (1, 2, 3, 4)
# letter -> (meaning, names of levels 1..4)
LETTERS: dict[str, tuple[str, tuple[str, str, str, str]]] = {
    "K": ("kernel source and maturity", (
        "reference / prototype (eager composite ops, first hand-written cut)",
        "generic generated (Triton, torch.compile default configs)",
        "specialised open source (FlashAttention, FlashInfer, a CUTLASS/CuTe instance)",
        "vendor production library (cuBLAS/cuBLASLt, cuDNN)")),
    "R": ("rigor: how this side was tuned and measured", (
        "default config, one run",
        "default config, repeated warm runs",
        "tuned for these shapes, >= 3 trials",
        "tuned, measured in the production harness (CUDA graphs, same node)")),
    "H": ("hardware path", (
        "SIMT only (CUDA cores, scalar loads)",
        "vectorised / async memory (128-bit loads, cp.async), no tensor cores",
        "tensor cores via mma/wmma (the sm80 path)",
        "the architecture's full path (sm90 wgmma + TMA, warp-specialised)")),
    "P": ("production representativeness", (
        "microbenchmark or toy shapes",
        "same op, other shapes or dtype than production",
        "production shapes and dtype, outside the serving engine",
        "what production runs for these shapes")),
    "A": ("availability / adoption", (
        "local experiment",
        "reproducible branch or PR",
        "merged upstream or released behind a flag",
        "default in a released engine or library")),
}
SIDES = ("candidate", "baseline")
BLOCK_KEYS = ("candidate", "baseline", "speedup", "evidence", "cells")
CELLS_KEYS = ("candidate", "baseline", "metric")  # krhpa.cells: the cells whose trials test the speedup
SIDE_KEYS = ("name", *LETTERS)
PRODUCTION_P = 4
FAIRNESS = {
    "H": "the baseline takes a weaker hardware path than the candidate (e.g. generic Triton against a tensor-core "
         "candidate while production runs a vendor tensor-core library)",
    "R": "the baseline was tuned or measured less rigorously than the candidate",
}
NAME_EXAMPLE = {
    "candidate": "the kernel under test, e.g. 'cuBLASLt FP8 e4m3 GEMM (torch._scaled_mm)'",
    "baseline": "the production-representative kernel or library, e.g. 'cuBLASLt bf16 nvjet GEMM (torch.matmul)'",
}


def _show(v: Any) -> str:
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    return "null (empty)" if v is None else repr(v)


def is_level(v: Any) -> bool:
    """True for an integer 1..4 (a YAML `true` is not a level)."""
    return isinstance(v, int) and not isinstance(v, bool) and v in LEVELS


def _side_problems(side: str, node: Any) -> list[str]:
    path = f"krhpa.{side}"
    if node is None:
        return [f"{path}: missing; add `{side}: {{name: ..., K: 1..4, R: 1..4, H: 1..4, P: 1..4, A: 1..4}}`"]
    if not isinstance(node, Mapping):
        return [f"{path}: expected a mapping with keys {', '.join(SIDE_KEYS)}, got {_show(node)}"]
    problems = []
    name = node.get("name")
    if not isinstance(name, str) or not name.strip():
        got = "missing" if name is None else f"expected a non-empty string, got {_show(name)}"
        problems.append(f"{path}.name: {got}; name {NAME_EXAMPLE[side]}")
    for letter, (meaning, _) in LETTERS.items():
        value = node.get(letter)
        if value is None:
            problems.append(f"{path}.{letter}: missing; expected integer 1..4 ({meaning})")
        elif not is_level(value):
            problems.append(f"{path}.{letter}: expected integer 1..4, got {_show(value)}")
    problems += [f"{path}.{key}: unknown key; known keys: {', '.join(SIDE_KEYS)}"
                 for key in node if key not in SIDE_KEYS]
    return problems


def block_problems(block: Any) -> list[str]:
    """Return every defect of a krhpa block, each starting with its path (`krhpa.candidate.H: ...`)."""
    if not isinstance(block, Mapping):
        return [f"krhpa: expected a mapping with keys {', '.join(BLOCK_KEYS)}, got {_show(block)}"]
    problems = [p for side in SIDES for p in _side_problems(side, block.get(side))]
    speedup = block.get("speedup")
    if speedup is not None and not _is_speedup(speedup):
        problems.append(f"krhpa.speedup: expected a number > 0 (baseline time / candidate time on the same "
                        f"shapes), got {_show(speedup)}")
    evidence = block.get("evidence")
    if evidence is not None and not (isinstance(evidence, str) and evidence.strip()) and not (
            isinstance(evidence, list) and all(isinstance(e, str) and e.strip() for e in evidence)):
        problems.append(f"krhpa.evidence: expected a path or text, or a list of them, got {_show(evidence)}")
    cells = block.get("cells")
    if cells is not None:
        if not isinstance(cells, Mapping):
            problems.append(f"krhpa.cells: expected a mapping {{candidate: CELL_ID, baseline: CELL_ID}}, got "
                            f"{_show(cells)}")
        else:
            problems += [f"krhpa.cells.{k}: expected a cell id of config.yaml, got {_show(cells.get(k))}"
                         for k in SIDES if not (isinstance(cells.get(k), str) and cells.get(k))]
            metric = cells.get("metric")
            if metric is not None and not (isinstance(metric, str) and metric.strip()):
                problems.append(f"krhpa.cells.metric: expected the name of a repeated number both cells measured "
                                f"(e.g. layer_tpot_ms), got {_show(metric)}")
            problems += [f"krhpa.cells.{k}: unknown key; known keys: {', '.join(CELLS_KEYS)}"
                         for k in cells if k not in CELLS_KEYS]
    problems += [f"krhpa.{key}: unknown key; known keys: {', '.join(BLOCK_KEYS)}"
                 for key in block if key not in BLOCK_KEYS]
    return problems


def _is_speedup(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _outcome(cand: Mapping[str, Any], base: Mapping[str, Any], speedup: float) -> str:
    if speedup > 1:
        return f"the candidate beats the baseline: {speedup:.2f}x"
    if cand["H"] < base["H"] and base["P"] == PRODUCTION_P:
        return (f"the candidate, at lower H ({cand['H']} < {base['H']}) than the production baseline, does not "
                f"beat it: {speedup:.2f}x")
    return f"the candidate does not beat the baseline: {speedup:.2f}x"


def krhpa_verdict(block: Mapping[str, Any] | None, trials: Comparison | None = None
                  ) -> tuple[str | None, list[str]]:
    """Label a candidate-vs-baseline claim VERDICT or DRAFT (None without a block), with every reason.

    VERDICT needs a well-formed block, a speedup (typed, or measured by the trials), a fair baseline (H and R at
    least the candidate's, P = 4) and trials that show it: `trials` compares the baseline's repeated measurements
    (before) with the candidate's (after) and must say faster or slower, the way the speedup says. Any other case
    is a DRAFT; the reasons say which rule failed and what the speedup shows.
    """
    if block is None:
        return None, ["no krhpa block: no candidate-vs-baseline claim to label"]
    problems = block_problems(block)
    if problems:
        return "DRAFT", [f"the krhpa block has {len(problems)} problem(s): " + "; ".join(problems)]
    cand, base, speedup = block["candidate"], block["baseline"], block.get("speedup")
    if speedup is None and trials is not None and trials.ratio:
        speedup = 1 / trials.ratio if trials.lower_is_better else trials.ratio  # measured: baseline / candidate time
    unfair = [f"baseline {k}={base[k]} < candidate {k}={cand[k]}: {FAIRNESS[k]}" for k in ("H", "R")
              if base[k] < cand[k]]
    if base["P"] < PRODUCTION_P:
        unfair.append(f"baseline P={base['P']} < {PRODUCTION_P}: {base['name']!r} is not what production runs; "
                      f"measure against the production-representative kernel or library")
    reasons = list(unfair)
    if speedup is None:
        reasons.append("no measured speedup: add `speedup:` (baseline time / candidate time on the same shapes)")
    else:
        reasons.append(_outcome(cand, base, float(speedup)))
    shown = _significance(trials, speedup)
    reasons.append(shown[1])
    if unfair or speedup is None or not shown[0]:
        return "DRAFT", reasons
    fair = (f"fair baseline: {base['name']!r} at H={base['H']} >= {cand['H']}, R={base['R']} >= {cand['R']}, "
            f"P={base['P']}")
    return "VERDICT", [fair, *reasons]


NO_TRIALS = ("no trials test the speedup: name the measured cells (`cells: {candidate: CELL_ID, baseline: CELL_ID}`, "
             f"each with >= {MIN_TRIALS} trials); a VERDICT needs a significant difference (Mann-Whitney U)")


def _significance(trials: Comparison | None, speedup: float | None) -> tuple[bool, str]:
    """Whether the trials show the speedup (a significant difference the way it points), and the reason line."""
    if trials is None:
        return False, NO_TRIALS
    line = f"trials (candidate / baseline): {trials.text()}"
    if trials.verdict not in (FASTER, SLOWER):
        return False, f"{line}; no VERDICT without a significant difference"
    if speedup is not None and (trials.verdict == FASTER) != (float(speedup) > 1):
        return False, f"{line}; contradicts the speedup {float(speedup):.2f}x: re-measure or correct `speedup:`"
    return True, line


def level_text(value: Any, letter: str) -> str:
    """Show a rubric value as `3 · tensor cores via mma/wmma (the sm80 path)`, or what is wrong with it."""
    if value is None:
        return "— (missing)"
    if not is_level(value):
        return f"{value!r} (not an integer 1..4)"
    return f"{value} · {LETTERS[letter][1][value - 1]}"


def rubric_rows(block: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The rubric as rows: names first, then each letter with its meaning and both sides as `level · name`."""
    if block is None:
        return []
    sides: dict[str, Mapping[str, Any]] = {}
    for s in SIDES:
        node = block.get(s)
        sides[s] = node if isinstance(node, Mapping) else {}
    rows = [{"letter": "name", "meaning": "what each side is",
             **{s: sides[s].get("name") for s in SIDES}}]
    rows += [{"letter": letter, "meaning": meaning, **{s: level_text(sides[s].get(letter), letter) for s in SIDES}}
             for letter, (meaning, _) in LETTERS.items()]
    speedup = block.get("speedup")
    shown = "not measured" if speedup is None else f"{speedup:.2f}x" if _is_speedup(speedup) else repr(speedup)
    rows.append({"letter": "speedup", "meaning": "baseline time / candidate time (measured, same shapes)",
                 "candidate": shown, "baseline": "1.00x (reference)"})
    return rows


KRHPA_RIGOR = "L4"  # the sol_rigor whose roofline claims need a krhpa block


def krhpa_problems(campaign: Campaign) -> list[str]:
    """Return the krhpa block's problems: required at sol_rigor L4, and well-formed wherever it is given."""
    block = campaign.krhpa
    if block is None:
        if campaign.sol_rigor != KRHPA_RIGOR:
            return []
        return [f"krhpa: missing; sol_rigor {KRHPA_RIGOR} renders an {KRHPA_RIGOR} ncu roofline, whose speedup "
                f"claims need the rubric: add `krhpa: {{candidate: {{name: ..., K: 1..4, R: 1..4, H: 1..4, "
                f"P: 1..4, A: 1..4}}, baseline: {{...}}, speedup: ...}}` to config.yaml (docs/frontier.md)"]
    problems = block_problems(block)
    cells = block.get("cells")
    if isinstance(cells, Mapping):
        ids = [c.id for c in campaign.cells]
        problems += [f"krhpa.cells.{k}: {cells[k]!r} is no cell of config.yaml; known cells: {', '.join(ids)}"
                     for k in SIDES if isinstance(cells.get(k), str) and cells[k] and cells[k] not in ids]
    for side in SIDES:
        node = block.get(side)
        name = node.get("name") if isinstance(node, Mapping) else None
        if isinstance(name, str) and name.strip() and (why := context_value_problem("name", name)):
            problems.append(f"krhpa.{side}.name: {why}")
    return problems


def krhpa_trials(campaign: Campaign) -> Comparison | None:
    """The block's cells compared over their trials (baseline before, candidate after) on `cells.metric`, else the
    first latency-like number both measured, else their trials' kernel time; None without cells or shared trials."""
    block = campaign.krhpa
    cells = block.get("cells") if isinstance(block, Mapping) else None
    if not isinstance(cells, Mapping):
        return None
    samples = campaign_trial_samples(campaign)
    base, cand = samples.get(str(cells.get("baseline")), {}), samples.get(str(cells.get("candidate")), {})
    metric = cells.get("metric") or e2e_metric(set(base) & set(cand))
    if metric not in base or metric not in cand:
        return None
    return compare(base[metric], cand[metric], lower_is_better=not higher_is_better(str(metric)))


def krhpa_label(campaign: Campaign) -> tuple[str | None, list[str]]:
    """Return the lake's krhpa label and reasons: krhpa_verdict over the block's cells' trials, a DRAFT whenever the
    gate found a problem."""
    label, reasons = krhpa_verdict(campaign.krhpa, krhpa_trials(campaign) if campaign.krhpa else None)
    problems = krhpa_problems(campaign)
    if label is not None and problems:
        return "DRAFT", [f"the krhpa block has {len(problems)} problem(s): " + "; ".join(problems)]
    return label, reasons
