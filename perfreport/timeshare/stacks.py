"""Stack samples (pprof, folded stacks) -> per-kernel sample rows: each sample goes to its CUDA-kernel frame.

The kernel frame of a stack (docs/timeshare.md, "Attribution"), by the first rule that finds one:
1. known: the leaf-most frame whose function identity (kernel_identity.normalize) is that of a kernel the cell
   already knows, from its ncu_kernels.json or kernel_times.json.
2. marked: the leaf-most frame named `[GPU Kernel] NAME` or `[CUDA Kernel] NAME` (any case): NAME is the kernel.
3. launched: the leaf frame, when a frame above it is a CUDA launch call (cudaLaunchKernel, cuLaunchKernel[Ex],
   the cooperative and graph launches): GPU profilers put the kernel as a pseudo-frame under the launching stack.
A sample with none has no kernel frame (host-only time): it is left out of the shares and counted in a warning.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from perfreport.errors import InputError
from perfreport.kernels.cells import FILE_NAME as NCU_FILE
from perfreport.kernels.cells import read_cell
from perfreport.kernels.identity import normalize
from perfreport.timeshare.model import INT64_LIMIT, quoted
from perfreport.timeshare.store import FILES, SCHEMA_VERSION

Frame = tuple[str, ...]  # one frame's names: the one shown first, then others (a pprof function's system_name)
_MARKED = re.compile(r"^\s*\[(?:gpu|cuda)[ _-]?kernel\]\s*(\S.*)$", re.IGNORECASE)
_LAUNCH = re.compile(r"^cu(?:da)?(?:LaunchKernel(?:Ex|ExC)?|LaunchCooperativeKernel(?:MultiDevice)?|GraphLaunch)"
                     r"(?:_ptsz|_ptds|_v\d+)*$")
RULES = ("known", "marked", "launched")
SHOWN = 5  # frames and kernels a message lists at most


@dataclass(frozen=True)
class KnownKernels:
    """The function identities of the kernels a cell knows, and the files they came from."""

    functions: frozenset[str]
    files: tuple[str, ...]


def known_kernels(cell_dir: Path) -> KnownKernels:
    """The kernels of the cell's ncu_kernels.json and kernel_times.json (rule 1); none when neither exists."""
    functions: set[str] = set()
    files = []
    for name, version in ((NCU_FILE, 1), (FILES["kernel_times"], SCHEMA_VERSION)):
        data = read_cell(cell_dir / name, version)
        if data is None:
            continue
        files.append(name)
        for k in data["kernels"]:
            functions.update(normalize(k[key]) for key in ("name", "function") if isinstance(k.get(key), str))
    return KnownKernels(frozenset(f for f in functions if f), tuple(files))


@dataclass
class Attributed:
    """Per-kernel sample rows (name, samples, share_pct None) and what the attribution has to report."""

    rows: list[dict[str, Any]]
    warnings: list[str]


class _Verdict(NamedTuple):
    """What one frame is to the rules: the kernel name it gives, and which rule it answers."""

    name: str  # the marked NAME, else the frame's first name
    named: bool  # the name has a function identity ('()' has none: no kernel)
    known: bool  # rule 1
    marked: bool  # rule 2
    launch: bool  # a CUDA launch call (rule 3)


class _Classifier:
    """Finds a stack's kernel frame by RULES, caching each frame's verdict (stacks repeat their frames)."""

    def __init__(self, known: KnownKernels) -> None:
        self.known = known.functions
        self.seen: dict[Frame, _Verdict] = {}

    def _frame(self, frame: Frame) -> _Verdict:
        if frame not in self.seen:
            marked = next((m.group(1).strip() for m in map(_MARKED.match, frame) if m), None)
            ids = [normalize(n) for n in ((marked,) if marked else frame)]
            named = bool(ids[0])
            self.seen[frame] = _Verdict(marked or frame[0], named, named and any(i in self.known for i in ids),
                                        named and marked is not None, any(_LAUNCH.match(i) for i in ids))
        return self.seen[frame]

    def kernel(self, stack: list[Frame]) -> tuple[str, str] | None:
        """(kernel name, rule) of a stack given leaf first, or None when it has no kernel frame."""
        verdicts = [self._frame(f) for f in stack]
        for rule in ("known", "marked"):
            hit = next((v.name for v in verdicts if getattr(v, rule)), None)
            if hit is not None:
                return hit, rule
        leaf = verdicts[0]
        if leaf.named and not leaf.launch and any(v.launch for v in verdicts[1:]):
            return leaf.name, "launched"
        return None


def attribute(path: Path, stacks: Iterable[tuple[list[Frame], int]], known: KnownKernels,
              what: str) -> Attributed:
    """Sum each stack's value into its kernel frame's row; refuse a profile in which no sample has one.

    `what` names the values in messages ("samples/count of 1,931 samples"); stacks are given leaf first.
    """
    find = _Classifier(known)
    totals: Counter[str] = Counter()
    by_rule: dict[str, Counter[str]] = {r: Counter() for r in RULES}
    orphans: Counter[str] = Counter()  # no kernel frame: by leaf frame
    n_stacks = 0
    for stack, value in stacks:
        n_stacks += 1
        hit = find.kernel(stack) if stack else None
        if hit is None:
            orphans[stack[0][0] if stack else "(empty stack)"] += value
            continue
        totals[hit[0]] += value
        by_rule[hit[1]][hit[0]] += value
    if not totals:
        raise _no_kernel_frames(path, orphans, n_stacks, known, what)
    big = [k for k, v in totals.items() if v >= INT64_LIMIT]
    if big:
        raise InputError(f"'{path}': kernel {quoted(big[0])}: its samples add up beyond 2^63-1; the profile is "
                         f"damaged; export it again.")
    return Attributed([{"name": k, "samples": v, "share_pct": None} for k, v in totals.items()],
                      _warnings(by_rule, orphans, sum(totals.values()), known))


def _top(counts: Counter[str]) -> str:
    shown = [f"'{quoted(k)}' ({v:,})" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:SHOWN]]
    more = len(counts) - SHOWN
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _warnings(by_rule: dict[str, Counter[str]], orphans: Counter[str], kernel_total: int,
              known: KnownKernels) -> list[str]:
    out = []
    if by_rule["launched"]:
        n = sum(by_rule["launched"].values())
        basis = (f"no frame names a kernel of {' or '.join(known.files)}" if known.files
                 else "the cell has no ncu_kernels.json or kernel_times.json to name its kernels")
        out.append(f"{n:,} of {kernel_total:,} kernel samples went to the leaf frame under a CUDA launch call "
                   f"({basis}): {_top(by_rule['launched'])}. Check that these leaves are kernels; import the cell's "
                   f"ncu capture or timeline first to attribute by kernel name.")
    orphan_total = sum(orphans.values())
    if orphan_total:
        share = 100.0 * orphan_total / (orphan_total + kernel_total)
        out.append(f"{orphan_total:,} samples ({share:.1f}%) have no CUDA-kernel frame (host-only stacks) and are "
                   f"left out of the kernel shares; their leaf frames: {_top(orphans)}.")
    return out


def _no_kernel_frames(path: Path, orphans: Counter[str], n_stacks: int, known: KnownKernels,
                      what: str) -> InputError:
    names = (f"naming a kernel of the cell's {' and '.join(known.files)} ({len(known.functions)} function names)"
             if known.files else "naming a kernel of the cell (it has no ncu_kernels.json or kernel_times.json yet)")
    return InputError(
        f"'{path}': no CUDA-kernel frame in any of its {n_stacks:,} stacks ({what}); its leaf frames are "
        f"{_top(orphans) or 'none'}. A kernel frame is one {names}, one marked '[GPU Kernel] NAME', or the leaf "
        f"under a CUDA launch call (cudaLaunchKernel, cuLaunchKernel, ...). A host (CPU) profile has none: export "
        f"the profiler's GPU profile (its CUDA kernel samples); if the kernel frames have other names, import the "
        f"cell's ncu capture or nsys/torch timeline first so they are known (docs/timeshare.md).")


_FOLDED_LINE = re.compile(r"^(?P<stack>.*\S)\s+(?P<count>[-+]?\d[\w.+-]*)\s*$")


def looks_folded(text: str) -> bool:
    """Whether the first line that is not blank or a `#` comment is a folded stack ('a;b;c 12')."""
    line = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    return bool(_FOLDED_LINE.match(line)) and not line.lstrip().startswith(("{", "[{", "[\""))


def read_folded(path: Path, text: str) -> list[tuple[list[Frame], int]]:
    """Folded stacks (Brendan Gregg's format: frames root first, `;`-joined, a space, an integer count) as
    (frames leaf first, count); blank lines and `#` comments are skipped."""
    stacks: list[tuple[list[Frame], int]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _FOLDED_LINE.match(line)
        count = m.group("count") if m else ""
        if m is None or not count.isdigit() or len(count) > 19:
            got = f"count '{quoted(count)}'" if m else f"'{quoted(line.strip())}'"
            raise InputError(f"'{path}':{n}: expected a folded stack 'frame;frame;...;leaf COUNT' with COUNT an "
                             f"integer >= 0, got {got}. Folded stacks hold raw sample counts (flamegraph.pl "
                             f"input); export counts, not times or percents.")
        frames: list[Frame] = [(f.strip(),) for f in m.group("stack").split(";") if f.strip()]
        stacks.append((frames[::-1], int(count)))
    if not stacks:
        raise InputError(f"'{path}': only comments and blank lines; expected folded stacks 'frame;...;leaf COUNT'.")
    return stacks
