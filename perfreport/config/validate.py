"""The one JSON validation engine: packaged schemas by name, problems as `path: expected X, got Y`.

jsonschema does the work where it is importable; elsewhere (a GPU host may lack it) a stdlib validator of the
keywords our schemas use does, with the same paths and words. A schema using a keyword the fallback does not know
is refused rather than half-checked. Callers keep their own wording around the problem list.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from perfreport.errors import PerfReportError

CHECKED = frozenset({
    "type", "const", "enum", "pattern", "minLength", "minimum", "exclusiveMinimum", "maximum", "minItems",
    "maxItems", "minProperties", "required", "properties", "additionalProperties", "items", "$ref", "oneOf", "allOf",
    "if", "then",
})
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "$defs"})
ONE_OF = "expected exactly one of the forms the schema allows"


@dataclass(frozen=True)
class Problem:
    """One way a document fails its schema: where (path parts), which keyword, and the words after the path."""

    parts: tuple[str | int, ...]
    keyword: str
    message: str
    got: Any = field(default=None, compare=False)
    node: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def path(self) -> str:
        """The dotted path (`outputs[0].sha256`), `(top level)` for the document itself."""
        return path_text(self.parts) or "(top level)"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def path_text(parts: Sequence[Any]) -> str:
    """Dotted path of parts: keys joined by dots, list indexes in brackets."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


SHOW_CHARS = 60  # a bad value is shown this long at most: a wrong file's content is not echoed whole


def cut(text: str, width: int = SHOW_CHARS) -> str:
    """text, cut to `width` characters with '...'."""
    return text if len(text) <= width else text[: width - 3] + "..."


def show(value: Any) -> str:
    """A value as the problem shows it: JSON for scalars, `an object` / `an array` for containers."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return cut(json.dumps(value, ensure_ascii=False))


def schema_file(name: str) -> str:
    """The file name of a packaged schema: `levers` and `levers.schema.json` both name levers.schema.json."""
    return name if name.endswith(".json") else f"{name}.schema.json"


def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped in perfreport/config/schemas/ by name (`levers` or `levers.schema.json`); do not mutate."""
    return _load(schema_file(name))


@cache
def _load(file: str) -> dict[str, Any]:
    text = resources.files("perfreport.config").joinpath("schemas", file).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def problems(doc: Any, schema: str) -> list[Problem]:
    """Every problem of doc against the named schema, sorted by path then message, without repeats."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        found = list(_fallback(doc, load_schema(schema)))
    else:
        found = [p for err in _compiled(schema_file(schema)).iter_errors(doc) for p in _from_jsonschema(err)]
    # A value of the wrong type is reported once, by its type (the fallback checks nothing further there).
    mistyped = {p.parts for p in found if p.keyword == "type"}
    found = [p for p in found if p.keyword == "type" or p.parts not in mistyped]
    return sorted(dict.fromkeys(found), key=lambda p: (_order(p.parts), p.message))


def check(doc: Any, schema: str) -> list[str]:
    """Every problem of doc against the named schema as `path: expected X, got Y` lines ([] when valid)."""
    return [str(p) for p in problems(doc, schema)]


def _order(parts: Sequence[Any]) -> list[tuple[int, Any]]:
    return [(0, p) if isinstance(p, int) else (1, str(p)) for p in parts]


def ecma_search(pattern: str, value: str) -> bool:
    """JSON Schema's `pattern` with ECMA-262's `$` (the end of the string, where Python's also matches before a
    final newline: an id "abc\\n" would pass "^[a-z]+$" and become a folder name ending in a newline)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.search(pattern, value) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    import jsonschema

    if validator.is_type(instance, "string") and not ecma_search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _compiled(file: str) -> Any:
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _checker, value: _is_type(value, "integer"))
    ecma = jsonschema.validators.extend(base, {"pattern": _pattern}, type_checker=checker)
    return ecma(_load(file))


def _types(types: Any) -> list[str]:
    return [types] if isinstance(types, str) else list(types)


def _expected(keyword: str, want: Any, node: Mapping[str, Any]) -> str | None:
    """What a failed keyword expected, in words; None for keywords reported otherwise."""
    if keyword == "type":
        return " or ".join(_types(want))
    if keyword == "const":
        return json.dumps(want)
    if keyword == "enum":
        return "one of " + ", ".join(json.dumps(v) for v in want)
    if keyword == "pattern":
        return str(node.get("description") or f"a string matching {want}")
    words = {"minLength": "a non-empty string" if want == 1 else f"at least {want} character(s)",
             "minimum": f"a number >= {want}", "exclusiveMinimum": f"a number > {want}",
             "maximum": f"a number <= {want}", "minItems": f"at least {want} item(s)",
             "maxItems": f"at most {want} item(s)", "minProperties": f"at least {want} field(s)"}
    return words.get(keyword)


def _problem(parts: Sequence[Any], keyword: str, want: Any, got: Any, node: Mapping[str, Any],
             fallback: str) -> Problem:
    expected = _expected(keyword, want, node)
    if keyword == "type" and isinstance(got, int) and not isinstance(got, bool) and "integer" in _types(want):
        expected = f"{expected} within 64 bits (from -2^63 to 2^63-1)"  # a whole number, too large to store
    message = f"expected {expected}, got {show(got)}" if expected is not None else fallback
    return Problem(tuple(parts), keyword, message, got, node)


def _from_jsonschema(err: Any) -> list[Problem]:
    parts, got, kind = list(err.absolute_path), err.instance, err.validator
    node = err.schema if isinstance(err.schema, Mapping) else {}
    if kind == "required" and isinstance(got, Mapping):
        return [Problem((*parts, k), kind, "required field is missing", None, node)
                for k in err.validator_value if k not in got]
    if kind == "additionalProperties" and isinstance(got, Mapping):
        known = node.get("properties", {})
        return [Problem((*parts, k), kind, "unknown field", got[k], node) for k in got if k not in known]
    if kind == "oneOf":
        return [Problem(tuple(parts), kind, f"{ONE_OF}, got {show(got)}", got, node)]
    return [_problem(parts, kind, err.validator_value, got, node, err.message)]


# -- the stdlib fallback ---------------------------------------------------------------------------------------------
# An integer field holds what the warehouse and lake store (BIGINT, int64): a larger one would validate, then crash.
INT64 = 2**63 - 1


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        whole = (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
        return whole and -INT64 - 1 <= value <= INT64
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    kinds: dict[str, type | tuple[type, ...]] = {"object": dict, "array": list, "string": str,
                                                 "boolean": bool, "null": type(None)}
    return isinstance(value, kinds[name])


def _resolve(root: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    target: Any = root
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return _resolve(root, target)


def _fallback(doc: Any, schema: Mapping[str, Any]) -> Iterator[Problem]:
    yield from _walk(doc, schema, schema, [])


def _walk(value: Any, node: Any, root: Mapping[str, Any], parts: list[Any]) -> Iterator[Problem]:
    """Check value against one schema node, yielding its problems (the CHECKED keywords)."""
    if node is True or node is False:
        if node is False:
            yield Problem(tuple(parts), "false", "unknown field", value, {})
        return
    node = _resolve(root, node)
    unknown = set(node) - CHECKED - ANNOTATIONS
    if unknown:
        raise PerfReportError(f"schema {root.get('$id', '?')}: keyword(s) {sorted(unknown)} are not checked "
                              f"without jsonschema; install it (pip install jsonschema) on this host.")
    types = node.get("type")
    if types is not None and not any(_is_type(value, t) for t in _types(types)):
        yield _problem(parts, "type", types, value, node, "")
        return
    for keyword in ("const", "enum"):
        if keyword in node and not (value == node[keyword] if keyword == "const" else value in node[keyword]):
            yield _problem(parts, keyword, node[keyword], value, node, "")
    yield from _combinators(value, node, root, parts)
    if isinstance(value, str):
        if len(value) < node.get("minLength", 0):
            yield _problem(parts, "minLength", node["minLength"], value, node, "")
        if "pattern" in node and not ecma_search(node["pattern"], value):
            yield _problem(parts, "pattern", node["pattern"], value, node, "")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield from _number(value, node, parts)
    elif isinstance(value, list):
        if len(value) < node.get("minItems", 0):
            yield _problem(parts, "minItems", node["minItems"], value, node, "")
        if "maxItems" in node and len(value) > node["maxItems"]:
            yield _problem(parts, "maxItems", node["maxItems"], value, node, "")
        if "items" in node:
            for i, item in enumerate(value):
                yield from _walk(item, node["items"], root, [*parts, i])
    elif isinstance(value, dict):
        yield from _object(value, node, root, parts)


def _number(value: float, node: Mapping[str, Any], parts: list[Any]) -> Iterator[Problem]:
    checks = (("minimum", lambda b: value < b), ("exclusiveMinimum", lambda b: value <= b),
              ("maximum", lambda b: value > b))
    for keyword, fails in checks:
        if keyword in node and fails(node[keyword]):
            yield _problem(parts, keyword, node[keyword], value, node, "")


def _combinators(value: Any, node: Mapping[str, Any], root: Mapping[str, Any],
                 parts: list[Any]) -> Iterator[Problem]:
    for sub in node.get("allOf", ()):
        yield from _walk(value, sub, root, parts)
    if "if" in node and "then" in node and not any(True for _ in _walk(value, node["if"], root, parts)):
        yield from _walk(value, node["then"], root, parts)
    if "oneOf" in node:
        passing = sum(not any(True for _ in _walk(value, sub, root, parts)) for sub in node["oneOf"])
        if passing != 1:
            yield Problem(tuple(parts), "oneOf", f"{ONE_OF}, got {show(value)}", value, node)


def _object(value: dict[str, Any], node: Mapping[str, Any], root: Mapping[str, Any],
            parts: list[Any]) -> Iterator[Problem]:
    props = node.get("properties", {})
    for key in node.get("required", ()):
        if key not in value:
            yield Problem((*parts, key), "required", "required field is missing", None, node)
    if len(value) < node.get("minProperties", 0):
        yield _problem(parts, "minProperties", node["minProperties"], value, node, "")
    extra = node.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            yield from _walk(item, props[key], root, [*parts, key])
        elif extra is False:
            yield Problem((*parts, key), "additionalProperties", "unknown field", item, node)
        elif extra is not True:
            yield from _walk(item, extra, root, [*parts, key])
