"""The house rules that hold the layout together (docs/architecture.md), checked over the source tree.

The stages' layers are lint-imports' contract (pyproject.toml), run by `make lint`; here a planted upward import and a
planted unused dependency show that the contract and deptry fail, and the tree is checked for what they do not see:
cycles through imports inside functions, flat modules, serving code in the package, the magic, dated notes.
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "perfreport"
BIN = Path(sys.executable).parent
MAX_FLAT_MODULES = 8


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every perfreport module this one imports, at module level or inside a function, TYPE_CHECKING included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        found.update(t for t in targets if t in modules and t != name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []
    # the checker itself finds a planted cycle
    planted = {k: set(v) for k, v in graph.items()}
    planted["perfreport.errors"].add("perfreport.ncu.importer")
    assert any("perfreport.errors" in c for c in _cycles(planted))


def test_at_most_eight_flat_modules_and_every_stage_a_package() -> None:
    flat = sorted(p.name for p in PKG.glob("*.py"))
    assert len(flat) <= MAX_FLAT_MODULES, flat
    stages = {"cli", "config", "bundle", "capture", "ncu", "timeshare", "warehouse", "site", "frontier", "lake"}
    assert stages <= {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}


def test_no_serving_engine_or_load_generator_ships_in_the_package() -> None:
    sources = {path: path.read_text(encoding="utf-8") for path in PKG.rglob("*.py")}
    names = {p.stem for p in sources}
    assert not names & {"serve_llama", "serve_graph", "loadgen"}
    servers = [p for p, text in sources.items() if re.search(r"\bhttp\.server\b|ThreadingHTTPServer", text)]
    assert servers == []
    assert (ROOT / "benchmarks" / "serving" / "serve_llama.py").is_file()


def test_the_ncu_rep_magic_is_spelled_once() -> None:
    spelled = [p for p in PKG.rglob("*.py") if 'b"NVR\\x00"' in p.read_text(encoding="utf-8")]
    assert len(spelled) == 1, spelled


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    out = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
           if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return out


DATED = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b|\b(?:until|since|as of) (?:20\d\d|today|yesterday)\b", re.I)


def test_no_dated_notes_in_code_comments_or_docstrings() -> None:
    hits = [f"{p.relative_to(ROOT)}:{line}: {DATED.search(text).group(0)}"  # type: ignore[union-attr]
            for p in sorted(PKG.rglob("*.py")) for line, text in _comments_and_docstrings(p) if DATED.search(text)]
    assert hits == []


def _copy_project(tmp: Path) -> Path:
    dst = tmp / "project"
    shutil.copytree(PKG, dst / "perfreport", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "benchmarks", dst / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    shutil.copy(ROOT / "README.md", dst / "README.md")
    return dst


def _run(tool: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(cwd), "PATH": f"{BIN}:/usr/bin:/bin"}
    return subprocess.run([str(BIN / tool), *(["--no-cache"] if tool == "lint-imports" else ["."])], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_project(tmp_path_factory.mktemp("arch"))


def test_import_contract_holds_and_fails_on_a_planted_upward_import(project: Path) -> None:
    ok = _run("lint-imports", project)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Contracts: 2 kept, 0 broken." in ok.stdout
    derive = project / "perfreport" / "ncu" / "derive.py"
    original = derive.read_text(encoding="utf-8")
    derive.write_text(original + "\n\ndef _planted() -> None:\n    import perfreport.lake.gate  # noqa\n")
    try:
        bad = _run("lint-imports", project)
    finally:
        derive.write_text(original)
    assert bad.returncode != 0
    assert "perfreport.ncu is not allowed to import perfreport.lake" in bad.stdout
    assert "perfreport.ncu.derive -> perfreport.lake.gate" in bad.stdout


def test_dependency_check_fails_on_a_declared_but_unused_dependency(project: Path) -> None:
    pyproject = project / "pyproject.toml"
    original = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(original.replace('  "click>=8.1",\n', '  "click>=8.1",\n  "left-pad-nobody-imports>=1.0",\n'))
    (project / "tests").mkdir(exist_ok=True)
    try:
        bad = _run("deptry", project)
    finally:
        pyproject.write_text(original)
    assert bad.returncode != 0
    plain = re.sub(r"\x1b\[[0-9;]*m", "", bad.stdout + bad.stderr)
    assert "DEP002 'left-pad-nobody-imports' defined as a dependency but not used" in plain


def test_stage_packages_list_their_layers_in_the_contract() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    layers = re.search(r"layers = \[(.*?)\]", text, re.S)
    assert layers is not None
    named = set(re.findall(r"perfreport\.(\w+)", layers.group(1)))
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    flat = {p.stem for p in PKG.glob("*.py")} - {"__init__"}
    missing = sorted((packages | flat) - named)
    assert missing == [], f"add {missing} to [tool.importlinter] layers in pyproject.toml (docs/architecture.md)"


def _stage_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        stage = name.split(".")[1] if "." in name else name
        for dep in _imports(name, path, modules):
            graph[stage].add(dep.split(".")[1] if "." in dep else dep)
    return graph


def test_capture_builds_on_ncu_and_ncu_never_on_capture() -> None:
    graph = _stage_graph()
    assert "ncu" in graph["capture"]  # the walker, the catalog, the importer
    assert "capture" not in graph["ncu"] and "capture" not in graph["bundle"]
