"""Kernel identity across tools: join nsys / PyTorch-profiler / sampling-profiler names to ncu names.

Each tool prints a kernel's name differently. nsys and kineto give the demangled C++ name
(`void at::native::(anonymous namespace)::k<8, ...>(int, float)`); ncu reports print `<unnamed>`, casts such as
`(int)8` and `[lambda() (instance 1)]`, and template placeholders (`T1`, `T2`) in the parameter list; ncu's
"demangled and simplified" CSV names drop `at::native::` down to `at::` (or drop namespaces entirely). Two keys
come out of a name:

- ``normalize(name)``: the function identity (`vectorized_elementwise_kernel`): what ncu's `--kernel-name`
  matches by default (`--kernel-name-base function`).
- ``simplify(name)``: the full instantiation with every spelling difference above removed (namespaces inside
  template arguments, return types, parameter lists, integer casts and suffixes, booleans as 0/1, lambda
  spelling, whitespace), used only to tell apart several instantiations of one function. The kernel's own
  outermost namespace is kept as a suffix (`gemm_kernel<float> [cutlass]`): kernels of two libraries never share
  a key (ncu's CSV shortens `at::native::` to `at::` but keeps that first namespace).

Both first drop the code-object suffix AMD's tools append (`vecCopy(double*, int) [clone .kd]` in rocprof-compute's
pmc_perf.csv, `Cijk_..._WG64_4_1.kd`), so a rocprof row and a ROCm torch trace's spelling of one kernel share keys.
"""

from __future__ import annotations

import re
from functools import lru_cache

from perfreport.errors import InputError
from perfreport.kernels.names import anonymous_spelled_once, function_name

# No compiler writes a kernel name this long (templated ones run to a few thousand characters): a longer one is
# damaged bytes, and a name cut to fit could merge two kernels into one row. Every importer refuses it.
MAX_NAME_CHARS = 1 << 16
# rocprof's suffix naming the kernel descriptor symbol (`<kernel>.kd`), no part of the kernel's name; longest first
CODE_OBJECT_SUFFIXES = (" [clone .kd]", " (.kd)", ".kd")


def without_code_object_suffix(name: str) -> str:
    """The name stripped, without the code-object suffix rocprof writes after a kernel's name (` [clone .kd]`)."""
    s = name.strip()
    for suffix in CODE_OBJECT_SUFFIXES:
        if s.endswith(suffix):
            return s[: -len(suffix)].rstrip()
    return s


def check_name_length(name: str, where: str) -> None:
    """Raise InputError naming `where` when `name` is longer than MAX_NAME_CHARS."""
    if len(name) > MAX_NAME_CHARS:
        raise InputError(f"{where}: a kernel name of {len(name):,} characters (at most {MAX_NAME_CHARS:,} are read; "
                         f"it starts {name[:60]!r}): no compiler writes such a name, so the file is damaged. Export "
                         f"or copy it again.")


_ANON = re.compile(r"\{anonymous\}::")
_NCU_LAMBDA = re.compile(r"\[lambda\((.*?)\) \(instance (\d+)\)\]")
_BOOL = re.compile(r"\(bool\)([01])\b|\b(true|false)\b")
# ncu's C-style casts of integral template arguments: (int)128, (unsigned long)3, (char)65, (long long)-1
_INT_CAST = re.compile(r"\((?:(?:unsigned|signed|long|short|int|char|wchar_t|char8_t|char16_t|char32_t|__int128)"
                       r"\s*)+\)\s*(-?\d+)\b")
# cxxabi's integer literal suffixes: 3ul, 8u, 1ll, 2ull (ncu writes a cast instead)
_INT_SUFFIX = re.compile(r"\b(\d+)(?:ull|llu|ul|lu|ll|u|l)\b", re.IGNORECASE)
# a chain of namespace qualifiers (not a class scope: `X<T>::Policy` or `f()::{lambda}` are kept)
_NAMESPACES = re.compile(r"(?<![\w:})\]>])((?:(?!(?:const|volatile)::)[A-Za-z_]\w*::)+)(?=[A-Za-z_~{])")
# ncu prints the return type of a function template a lambda is local to (`void gpu_kernel_impl_nocast<F>(...)::
# [lambda(int) (instance 1)]`); cxxabi does not (`gpu_kernel_impl_nocast<F>(...)::{lambda(int)#1}`)
_SCOPE_RETURN_VOID = re.compile(r"(?<=[<,(])void (?=[A-Za-z_{])")
_SCOPE_QUALIFIERS = re.compile(r"(?:const|volatile|&&|&)*::")


def normalize(name: str) -> str:
    """Return the function identity of a kernel name: no return type, namespaces, template or parameter lists.

    Mangled names (`_Z...`) are reduced to their function identifier with a small Itanium parser; a mangled
    name it cannot read is returned unchanged (stripped), so it still joins with an identical string.
    """
    s = without_code_object_suffix(name)
    if s.startswith("_Z"):
        return _itanium_function(s) or s
    return re.sub(r"\s+", "", function_name(s))


@lru_cache(maxsize=1 << 16)  # a pure function of the name; a campaign's cells run the same kernels over and over
def simplify(name: str) -> str:
    """Return the full instantiation key of a demangled name, comparable between nsys, kineto and ncu.

    `void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>,
    std::array<char *, (unsigned long)3>>(int, T2, T3)` and the kineto spelling of the same kernel both give
    `vectorized_elementwise_kernel<8,CUDAFunctor_add<BFloat16>,array<char*,3>>`. Mangled names are returned
    stripped and otherwise unchanged.
    """
    s = without_code_object_suffix(name)
    if s.startswith("_Z"):
        return s
    s = _ANON.sub("", anonymous_spelled_once(s))
    s = _NCU_LAMBDA.sub(lambda m: "{lambda(" + m.group(1) + ")#" + m.group(2) + "}", s)
    s = _last_top_level_token(_drop_parameters(s))
    root = m.group(1).split("::", 1)[0] if (m := _NAMESPACES.match(s)) else ""
    s = _NAMESPACES.sub("", s)
    s = _BOOL.sub(lambda m: m.group(1) or ("1" if m.group(2) == "true" else "0"), s)
    s = _INT_CAST.sub(r"\1", s)
    s = _INT_SUFFIX.sub(r"\1", s)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"(?<=\W) | (?=\W)", "", s)
    s = _SCOPE_RETURN_VOID.sub("", _drop_scope_parameters(s))
    # the kernel's outermost namespace, last so keys sort by function: `gemm_kernel<float> [cutlass]`
    return f"{s} [{root}]" if root else s


def _drop_scope_parameters(s: str) -> str:
    """Cut the parameter list (and cv-qualifiers) of every function a name is local to: `f<F>(T1 const&)::{lambda}`
    -> `f<F>::{lambda}`. ncu prints the enclosing function template's parameters as placeholders (`const T1 &`),
    cxxabi as the types they stand for, so only the template arguments compare. `operator()`'s own `()` stays."""
    out: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "(" and not s[:i].endswith("operator"):
            close = _matching_paren(s, i)
            if close is not None:
                after = _SCOPE_QUALIFIERS.match(s, close + 1)
                if after is not None:
                    i = after.end() - 2  # resume at the "::"
                    continue
        out.append(ch)
        i += 1
    return "".join(out)


def _matching_paren(s: str, i: int) -> int | None:
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


def _drop_parameters(s: str) -> str:
    """Cut the top-level parameter list (ncu prints template placeholders there, so it is not comparable)."""
    angle = paren = 0
    for i, ch in enumerate(s):
        if ch == "<":
            angle += 1
        elif ch == ">" and angle:
            angle -= 1
        elif ch == "(":
            if angle == 0 and paren == 0 and i > 0 and not s[:i].rstrip().endswith("operator"):
                return s[:i]
            paren += 1
        elif ch == ")" and paren:
            paren -= 1
    return s


def _last_top_level_token(s: str) -> str:
    """Drop a return type: keep what follows the last space outside <...> and (...)."""
    depth, cut = 0, 0
    for i, ch in enumerate(s.rstrip()):
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i + 1
    return s[cut:].strip()


def _read_number(m: str, i: int) -> tuple[int, int]:
    j = i
    while j < len(m) and m[j].isdigit():
        j += 1
    return int(m[i:j]), j


def _itanium_function(m: str) -> str | None:
    """Function identifier of an Itanium-mangled name (`_ZN2at6native29vectorized_elementwise_kernelI...`).

    Reads `_Z [L] <source-name>` and `_Z N [qualifiers] {<source-name> | <substitution>} ... (I|E)`: the last
    source name before the template arguments or the end of the nested name is the function. Anything else
    (local names, operators, constructors) returns None: the caller keeps the name as given.
    """
    i = 2
    if m.startswith("L", i):
        i += 1
    if i < len(m) and m[i].isdigit():
        n, j = _read_number(m, i)
        return m[j : j + n] or None
    if not m.startswith("N", i):
        return None
    i += 1
    while i < len(m) and m[i] in "rVKRO":
        i += 1
    last: str | None = None
    while i < len(m):
        c = m[i]
        if c.isdigit():
            n, j = _read_number(m, i)
            last, i = m[j : j + n], j + n
        elif c == "S":
            k = m.find("_", i) if not m.startswith(("St", "Sa", "Sb", "Ss", "Si", "So", "Sd"), i) else i + 1
            if k < 0:
                return None
            i = k + 1
        elif c == "L":
            i += 1
        elif c in "IE":
            # kernels (__global__) are never members of a class template, so the first template argument list
            # after the last source name belongs to the function itself
            return last if last and not last.startswith("_GLOBAL__N") else None
        else:
            return None
    return None


def name_matches(pattern: str, name: str, base: str = "function") -> bool:
    """Apply ncu's `--kernel-name` semantics: plain text = exact match, `regex:<expr>` = re.search.

    `base` mirrors `--kernel-name-base`: `function` (default) compares with the function identity
    (`normalize`), `demangled` and `mangled` with the name as given.
    """
    if base not in ("function", "demangled", "mangled"):
        raise InputError(f"kernel-name base {base!r}: expected one of function, demangled, mangled.")
    subject = normalize(name) if base == "function" else name.strip()
    if pattern.startswith("regex:"):
        try:
            return re.search(pattern[len("regex:") :], subject) is not None
        except re.error as exc:
            raise InputError(
                f"kernel-name pattern {pattern!r}: not a valid regular expression ({exc}). "
                f"Fix the expression after 'regex:', e.g. regex:'nvjet|gemm'."
            ) from None
    return subject == (normalize(pattern) if base == "function" else pattern.strip())
