"""The harness's inputs: op table, shape specs (`m=16,n=4096,k=4096` or `a=16x4096,b=4096x4096`), HarnessSpec, and
the FLOP and bytes an op must do by formula. Pure standard library (parsed before torch is imported).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfreport.errors import InputError

GEMM_RE = "regex:nvjet|gemm|sm90_xmma|cutlass"
SDPA_RE = "regex:flash|fmha|sdpa|attention"
NORM_RE = "regex:norm|elementwise|reduce"
ITEMSIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "e4m3": 1}
TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64", "e4m3": "float8_e4m3fn"}
CALLABLE_DTYPES = ("fp32", "fp64", "fp16", "bf16")
ARRAYS = ("auto", "numpy", "torch")
RMS_EPS = 1e-6
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*\Z")


@dataclass(frozen=True)
class OpInfo:
    """A built-in op: its shape keys, allowed dtypes and the ncu kernel-name regex of its kernels."""

    keys: tuple[str, ...]
    dtypes: tuple[str, ...]
    kernel_regex: str
    example: str
    optional: tuple[str, ...] = ()


OPS = {
    "gemm": OpInfo(("m", "n", "k"), ("bf16", "fp16"), GEMM_RE, "m=16,n=4096,k=4096"),
    "fp8-gemm": OpInfo(("m", "n", "k"), ("e4m3",), GEMM_RE, "m=8192,n=8192,k=8192"),
    "sdpa": OpInfo(("b", "h", "s", "d"), ("bf16", "fp16"), SDPA_RE, "b=8,h=32,s=1024,d=128,causal=1", ("causal",)),
    "rmsnorm": OpInfo(("t", "h"), ("bf16", "fp16", "fp32"), NORM_RE, "t=8192,h=4096"),
}


@dataclass(frozen=True)
class TensorShape:
    """One positional argument of a module:function op: its name (for messages) and dimensions."""

    name: str
    dims: tuple[int, ...]


Shape = dict[str, int] | list[TensorShape]


def parse_shape(text: str, op: str | None = None) -> Shape:
    """Parse `m=16,n=4096` (built-in ops) or `a=16x4096,b=4096x4096` (module:function ops, in argument order)."""
    where = f"--shape {text!r}"
    tensors = ":" in op if op else "x" in text
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise InputError(f"{where}: expected NAME=VALUE pairs such as m=16,n=4096,k=4096 or a=16x4096, got nothing.")
    seen: dict[str, str] = {}
    for item in items:
        name, eq, value = (s.strip() for s in item.partition("="))
        if not eq:
            raise InputError(f"{where}: {item!r}: expected NAME=VALUE, got no '='. Write it as e.g. m=16.")
        if not _NAME.match(name):
            raise InputError(f"{where}: name {name!r}: expected a letter or _ then letters, digits or _.")
        if name in seen:
            raise InputError(f"{where}: {name}: given twice ({seen[name]!r} and {value!r}); give each name once.")
        seen[name] = value
    if tensors:
        return [TensorShape(n, _dims(where, n, v)) for n, v in seen.items()]
    shape = {n: _int(where, n, v) for n, v in seen.items()}
    if op in OPS:
        check_shape(op, shape, where)
    return shape


def _int(where: str, name: str, value: str) -> int:
    if name == "causal":
        if value not in ("0", "1"):
            raise InputError(f"{where}: causal: expected 0 or 1, got {value!r}.")
        return int(value)
    if not value.isdigit() or int(value) < 1:
        raise InputError(f"{where}: {name}: expected a positive integer, got {value!r}.")
    return int(value)


def _dims(where: str, name: str, value: str) -> tuple[int, ...]:
    parts = value.split("x")
    if not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise InputError(f"{where}: {name}: expected dimensions such as 16x4096 (positive integers joined by x), "
                         f"got {value!r}.")
    return tuple(int(p) for p in parts)


def check_shape(op: str, shape: dict[str, int], where: str = "shape") -> None:
    """Raise InputError unless shape has exactly the keys built-in op needs (plus its optional ones)."""
    info = OPS[op]
    missing = [k for k in info.keys if k not in shape]
    unknown = sorted(set(shape) - set(info.keys) - set(info.optional))
    if missing or unknown:
        got = "; ".join(s for s in (f"missing {', '.join(missing)}" if missing else "",
                                    f"unknown {', '.join(unknown)}" if unknown else "") if s)
        raise InputError(f"{where}: {op} needs {', '.join(info.keys)}"
                         f"{' (optional ' + ', '.join(info.optional) + ')' if info.optional else ''}; {got}. "
                         f"Example: --shape {info.example}")


def shape_text(shape: Shape) -> str:
    """The --shape text of a parsed shape (inverse of parse_shape)."""
    if isinstance(shape, dict):
        return ",".join(f"{k}={v}" for k, v in shape.items())
    return ",".join(f"{t.name}={'x'.join(map(str, t.dims))}" for t in shape)


@dataclass
class HarnessSpec:
    """One op to replay; `shape` may be given as --shape text. dtype None = the op's default (first allowed)."""

    op: str
    shape: Shape | str
    dtype: str | None = None
    warmup: int = 10
    iters: int = 100
    device: str = "cuda"
    seed: int = 0
    nvtx: str | None = None
    arrays: str = "auto"

    def __post_init__(self) -> None:
        if self.op not in OPS and not _TARGET.match(self.op):
            raise InputError(f"harness op {self.op!r}: expected one of {', '.join(OPS)} or module:function "
                             "(e.g. numpy:matmul or mypkg.ops:fused).")
        if isinstance(self.shape, str):
            self.shape = parse_shape(self.shape, self.op)
        elif self.op in OPS:
            if not isinstance(self.shape, dict):
                raise InputError(f"harness op {self.op!r}: shape: expected NAME=INT pairs, got tensor shapes.")
            check_shape(self.op, self.shape)
        elif not isinstance(self.shape, list) or not self.shape:
            raise InputError(f"harness op {self.op!r}: shape: expected one or more tensor shapes such as "
                             f"a=16x4096, got {self.shape!r}.")
        allowed = OPS[self.op].dtypes if self.op in OPS else CALLABLE_DTYPES
        self.dtype = self.dtype or allowed[0]
        if self.dtype not in allowed:
            raise InputError(f"harness op {self.op!r}: --dtype: expected one of {', '.join(allowed)}, "
                             f"got {self.dtype!r}.")
        for name, value, low in (("warmup", self.warmup, 0), ("iters", self.iters, 1)):
            if value < low:
                raise InputError(f"harness --{name}: expected an integer >= {low}, got {value}.")
        if self.arrays not in ARRAYS:
            raise InputError(f"harness --arrays: expected one of {', '.join(ARRAYS)}, got {self.arrays!r}.")
        if self.nvtx is not None and not self.nvtx.strip():
            raise InputError("harness --nvtx: expected a range name, got an empty string.")

    @property
    def tensor_shapes(self) -> list[TensorShape]:
        """The positional-argument shapes of a module:function op."""
        return self.shape if isinstance(self.shape, list) else []

    @property
    def ints(self) -> dict[str, int]:
        """The named sizes of a built-in op."""
        return self.shape if isinstance(self.shape, dict) else {}


def spec_argv(spec: HarnessSpec) -> list[str]:
    """The harness arguments (after `-m perfreport.capture.harness.runner`) that reproduce spec exactly."""
    argv = [spec.op, "--shape", shape_text(spec.tensor_shapes or spec.ints), "--dtype", str(spec.dtype),
            "--warmup", str(spec.warmup), "--iters", str(spec.iters), "--device", spec.device, "--seed", str(spec.seed)]
    if spec.nvtx:
        argv += ["--nvtx", spec.nvtx]
    if spec.arrays != "auto":
        argv += ["--arrays", spec.arrays]
    return argv


def op_cost(spec: HarnessSpec) -> tuple[int | None, int | None]:
    """(FLOP, bytes) the op must do by formula (inputs read once, output written once); None for module:function."""
    s, size = spec.ints, ITEMSIZE[str(spec.dtype)]
    if spec.op == "gemm":
        return 2 * s["m"] * s["n"] * s["k"], (s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"]) * size
    if spec.op == "fp8-gemm":  # e4m3 inputs, bf16 output; the two float32 scales are ignored
        return 2 * s["m"] * s["n"] * s["k"], s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"] * 2
    if spec.op == "sdpa":  # QK^T and PV: 2 matmuls of 2*s*s*d each per head; causal does half
        flop = 4 * s["b"] * s["h"] * s["s"] * s["s"] * s["d"]
        return (flop // 2 if s.get("causal") else flop), 4 * s["b"] * s["h"] * s["s"] * s["d"] * size
    if spec.op == "rmsnorm":  # square, sum, scale by rsqrt, scale by w per element; read x and w, write y
        return 4 * s["t"] * s["h"], (2 * s["t"] * s["h"] + s["h"]) * size
    return None, None
