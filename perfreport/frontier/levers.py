"""levers.yaml: a campaign's grind frontier, validated as a whole file and valued against the warehouse.

A lever names the kernels it works on by pattern (ncu `--kernel-name` semantics, kernel_identity.name_matches),
its expected unlock (direction and the rough fraction of those kernels' time it removes), its cost, the gate that
proves or refutes it and its status. Its value is the end-to-end time it would give back, bounded by Amdahl:
per matched kernel, min(fraction x time share, bound), where the bound is the kernel's Amdahl bound from the
warehouse (time share x distance to its roof) or, for a lever that moves the roof (fewer FLOPs or bytes, a
cheaper dtype), the time share itself. Score = value x ease of its cost (frontier.EASE); open levers rank by it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from perfreport.config import validate
from perfreport.config.campaign import Campaign
from perfreport.errors import ConfigError, InputError
from perfreport.frontier.candidates import EASE
from perfreport.kernels.identity import name_matches
from perfreport.yamlio import error_place

LEVERS_NAME = "levers.yaml"
SCHEMA_FILE = "levers.schema.json"
SCHEMA_VERSION = 1
STATUS_ORDER = ("open", "won", "banked", "refuted")


@dataclass(frozen=True)
class LeverSpec:
    """One lever of levers.yaml, validated."""

    id: str
    lever: str
    kernel: str
    cells: tuple[str, ...] | None
    direction: str
    fraction: float
    moves_roof: bool
    cost: str
    gate: str
    status: str
    evidence: tuple[str, ...] = ()
    why_lost: str | None = None
    why: str | None = None


@dataclass
class LeversFile:
    """A loaded levers.yaml: its levers in file order, the documented speed-of-light wall, warnings."""

    path: Path
    levers: list[LeverSpec]
    sol_wall: dict[str, Any] | None
    warnings: list[str]


@dataclass(frozen=True)
class ValuedLever:
    """A lever valued in its best cell: matched kernel functions, share, Amdahl bound, value and score (%)."""

    spec: LeverSpec
    cell_id: str | None
    matched: tuple[str, ...]
    share_pct: float | None
    bound_pct: float | None
    value_pct: float | None
    score: float | None
    basis: str

    def as_row(self) -> dict[str, Any]:
        """Return the lever as a flat table row."""
        s = self.spec
        return {"id": s.id, "lever": s.lever, "status": s.status, "kernel": s.kernel, "cell_id": self.cell_id,
                "matched": list(self.matched), "direction": s.direction, "fraction": s.fraction,
                "moves_roof": s.moves_roof, "share_pct": self.share_pct, "bound_pct": self.bound_pct,
                "value_pct": self.value_pct, "cost": s.cost, "score": self.score, "basis": self.basis,
                "gate": s.gate, "evidence": list(s.evidence), "why_lost": s.why_lost, "why": s.why}


def load_schema() -> dict[str, Any]:
    """Return the shipped JSON Schema of levers.yaml."""
    return validate.load_schema(SCHEMA_FILE)


def _show(v: Any) -> str:
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    text = "null (empty)" if v is None else repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _file_order(data: Any, parts: Sequence[Any]) -> list[int]:
    """Sort key of a path: list indexes and each key's position in its mapping, so problems follow the file."""
    out, node = [], data
    for part in parts:
        if isinstance(node, list) and isinstance(part, int):
            out.append(part)
            node = node[part] if part < len(node) else None
        elif isinstance(node, Mapping):
            keys = list(node)
            out.append(keys.index(part) if part in node else len(keys))
            node = node.get(part)
        else:
            out.append(0)
            node = None
    return out


def _describe(problem: validate.Problem) -> tuple[list[Any], str, bool]:
    """Return (path, message, is an unknown key) in levers.yaml's words; the message starts with the path."""
    parts, where = list(problem.parts), problem.path
    if problem.keyword == "required":
        return parts, f"{where}: required key is missing", False
    if problem.keyword in ("additionalProperties", "false"):
        known = list(problem.node.get("properties", {}))
        close = difflib.get_close_matches(str(parts[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "known keys here: " + ", ".join(known)
        return parts, f"{where}: unknown key; {hint}", True
    expected = problem.node.get("description")
    if not expected:
        return parts, f"{where}: {problem.message}", False
    return parts, f"{where}: expected {expected}, got {_show(problem.got)}", False


def _rank(problem: validate.Problem) -> int:
    required = list(problem.node.get("required", ())) if problem.keyword == "required" else []
    return required.index(problem.parts[-1]) if problem.parts and problem.parts[-1] in required else 0


def _extra_problems(data: Mapping[str, Any], cell_ids: Sequence[str]) -> list[str]:
    """Checks a schema cannot make: unique ids, known cells, valid regex patterns."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    levers = data.get("levers")
    for i, lever in enumerate(levers if isinstance(levers, list) else []):
        if not isinstance(lever, Mapping):
            continue
        lid = lever.get("id")
        if isinstance(lid, str) and lid in seen:
            problems.append(f"levers[{i}].id: duplicate lever id {lid!r} (also levers[{seen[lid]}].id); rename one")
        elif isinstance(lid, str):
            seen[lid] = i
        cells = lever.get("cells")
        for j, cell in enumerate(cells if isinstance(cells, list) else []):
            if isinstance(cell, str) and cell not in cell_ids:
                problems.append(f"levers[{i}].cells[{j}]: unknown cell {cell!r}; cells of config.yaml: "
                                f"{', '.join(cell_ids) or '(none)'}")
        pattern = lever.get("kernel")
        if isinstance(pattern, str) and pattern:
            try:
                name_matches(pattern, "probe")
            except InputError as exc:
                problems.append(f"levers[{i}].kernel: {exc.message}")
    return problems


def validate_levers(data: Any, cell_ids: Sequence[str], strict: bool = False) -> tuple[list[str], list[str]]:
    """Return (problems, warnings) of a parsed levers.yaml; unknown keys warn, and fail with strict."""
    # File order; missing keys (after the present ones) in the schema's `required` order.
    ranked = sorted(validate.problems(data, SCHEMA_FILE), key=lambda p: (_file_order(data, p.parts), _rank(p)))
    found = [_describe(p) for p in ranked]
    problems = [message for _, message, unknown in found if not unknown]
    unknown = [message for _, message, is_unknown in found if is_unknown]
    if isinstance(data, Mapping):
        problems += _extra_problems(data, cell_ids)
    if strict:
        return list(dict.fromkeys(problems + [f"{u} (not allowed with --strict)" for u in unknown])), []
    return list(dict.fromkeys(problems)), [f"{u}, ignored" for u in unknown]


def _spec(node: Mapping[str, Any]) -> LeverSpec:
    unlock = node["unlock"]
    return LeverSpec(
        id=node["id"], lever=node["lever"], kernel=node["kernel"],
        cells=tuple(node["cells"]) if node.get("cells") else None, direction=unlock["direction"],
        fraction=float(unlock["fraction"]), moves_roof=bool(unlock.get("moves_roof", False)), cost=node["cost"],
        gate=node["gate"], status=node["status"], evidence=tuple(node.get("evidence") or ()),
        why_lost=node.get("why_lost"), why=unlock.get("why"),
    )


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc}); expected a UTF-8 YAML file.") from exc
    except yaml.YAMLError as exc:
        where = error_place(exc) or "(unknown line)"
        raise ConfigError(str(path), [f"{where}: YAML syntax error: {getattr(exc, 'problem', None) or exc}. "
                                      f"Fix the indentation or quote the value there."]) from exc


def load_levers(campaign: Campaign, strict: bool = False) -> LeversFile | None:
    """Load and validate <campaign>/levers.yaml as a whole file: one ConfigError lists every problem; None if absent."""
    path = campaign.dir / LEVERS_NAME
    if not path.is_file():
        return None
    data = _read_yaml(path)
    problems, warnings = validate_levers(data, [c.id for c in campaign.cells], strict)
    if problems:
        raise ConfigError(str(path), problems + [f"(the schema is perfreport/config/schemas/{SCHEMA_FILE}; "
                                                 f"docs/frontier.md shows a full example)"])
    return LeversFile(path, [_spec(node) for node in data["levers"]], data.get("sol_wall"), warnings)


def _cell_value(spec: LeverSpec, rows: list[Mapping[str, Any]]) -> tuple[float, float, float, str] | None:
    """(share, bound, value, basis) of the matched rows of one cell; None when none has a share."""
    timed = any(r.get("time_share_pct") is not None for r in rows)
    share_key = "time_share_pct" if timed else "ncu_share_pct"
    shared = [r for r in rows if r.get(share_key) is not None]
    if not shared:
        return None
    share = bound = value = 0.0
    no_sol = False
    for r in shared:
        s = float(r[share_key])
        if spec.moves_roof:
            b = s
        elif timed and r.get("amdahl_bound_pct") is not None:
            b = float(r["amdahl_bound_pct"])
        elif r.get("sol_pct") is not None:
            b = s * (1.0 - min(max(float(r["sol_pct"]), 0.0), 100.0) / 100.0)
        else:
            b, no_sol = s, True
        share, bound = share + s, bound + b
        value += -spec.fraction * s if spec.direction == "slower" else min(spec.fraction * s, b)
    what = "time share" if timed else "ncu duration share (a proxy: no timeline imported)"
    if spec.moves_roof:
        basis = f"bounded by their {what} ({bound:.1f}%): the lever moves the roof"
    else:
        basis = f"bounded by their Amdahl bound ({bound:.1f}%: {what} x distance to roof)"
        if no_sol:
            basis += "; a matched kernel has no %SoL, so its whole share bounds it"
    return share, bound, value, basis


def value_lever(spec: LeverSpec, join: Iterable[Mapping[str, Any]]) -> ValuedLever:
    """Value a lever in each cell it matches; keep the cell where it is worth most."""
    by_cell: dict[str, list[Mapping[str, Any]]] = {}
    for r in join:
        if (spec.cells is None or r["cell_id"] in spec.cells) and name_matches(spec.kernel, str(r["function"])):
            by_cell.setdefault(str(r["cell_id"]), []).append(r)
    best: ValuedLever | None = None
    for cell_id in sorted(by_cell):
        rows = by_cell[cell_id]
        valued = _cell_value(spec, rows)
        if valued is None:
            continue
        share, bound, value, basis = valued
        cand = ValuedLever(spec, cell_id, tuple(sorted({str(r["function"]) for r in rows})), share, bound, value,
                           value * EASE[spec.cost], basis)
        if best is None or (cand.value_pct or 0.0) > (best.value_pct or 0.0):
            best = cand
    if best is not None:
        return best
    where = "" if spec.cells is None else f" in cells {', '.join(spec.cells)}"
    matched = sorted({f"{c}: {r['function']}" for c, rows in by_cell.items() for r in rows})
    why = (f"matched kernels have no time share or ncu duration ({', '.join(matched)})" if matched else
           f"no kernel of the warehouse matches {spec.kernel!r}{where}; capture it (import_ncu) or fix the pattern")
    return ValuedLever(spec, None, (), None, None, None, None, f"unknown: {why}")


def rank_frontier(specs: Iterable[LeverSpec], join: Sequence[Mapping[str, Any]]) -> list[ValuedLever]:
    """Value every lever; open ones first by score (unknown last), then won, banked, refuted; ties by id."""
    valued = [value_lever(s, join) for s in specs]
    valued.sort(key=lambda v: (STATUS_ORDER.index(v.spec.status), v.score is None, -(v.score or 0.0), v.spec.id))
    return valued


SETTLED = ("won", "refuted")


def settle_lever(campaign: Campaign, lever_id: str, status: str, evidence: Sequence[str],
                 why_lost: str | None = None) -> Path:
    """Close an open lever of levers.yaml in place: its `status: open` line becomes `status: <won|refuted>` with its
    evidence (and why_lost for a refuted one) under it; the rest of the file, comments included, is kept. The new
    file is validated as a whole before it replaces the old one (nothing half-written)."""
    from perfreport.files import write_text_atomic

    path = campaign.dir / LEVERS_NAME
    if status not in SETTLED:
        raise InputError(f"{path}: lever {lever_id!r}: cannot settle as {status!r}; expected one of {SETTLED}")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() in (f"- id: {lever_id}", f"- id: '{lever_id}'",
                                                                         f'- id: "{lever_id}"')), None)
    if start is None:
        raise InputError(f"{path}: no lever with `- id: {lever_id}`; settle a lever of this file by its id")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("- id:")), len(lines))
    block = range(start, end)
    found = [i for i in block if lines[i].strip() == "status: open"]
    status_now = next((lines[i].split(":", 1)[1].strip() for i in block if lines[i].strip().startswith("status:")),
                      None)
    taken = [k for k in ("evidence", "why_lost") if any(lines[i].strip().startswith(f"{k}:") for i in block)]
    if len(found) != 1 or taken:
        why = (f"its status is {status_now}, not open" if status_now and status_now != "open" else
               f"it already has {' and '.join(taken)}" if taken else "its `status: open` line was not found")
        raise InputError(f"{path}: lever {lever_id!r} cannot be settled in place: {why}. Edit its status, evidence "
                         f"and why_lost by hand (docs/frontier.md).")
    at = found[0]
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    new = [f"{indent}status: {status}\n", f"{indent}evidence: {_flow(evidence)}\n"]
    if status == "refuted":
        new.append(f"{indent}why_lost: {_flow(why_lost or 'refuted by the measured outcome')}\n")
    text = "".join(lines[:at] + new + lines[at + 1:])
    problems, _ = validate_levers(yaml.safe_load(text), [c.id for c in campaign.cells])
    if problems:
        raise InputError(f"{path}: settling {lever_id!r} would leave the file invalid: {'; '.join(problems)}")
    write_text_atomic(path, text)
    return path


def _flow(value: str | Sequence[str]) -> str:
    """A YAML flow scalar or list of double-quoted strings (json quoting is valid YAML)."""
    import json

    return json.dumps(value if isinstance(value, str) else list(value), ensure_ascii=False)
