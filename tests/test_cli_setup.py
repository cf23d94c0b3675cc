"""The README's two set-up commands: `make demo` installs the runtime only (saying so before pip runs), `make test`
the test tools too; CI runs exactly `make test`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _dry_run(target: str) -> list[str]:
    """What `make -n TARGET` would run; the MAKE* variables of a `make test` running this are left out, so a
    nested make prints no directory lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "MFLAGS"}
    done = subprocess.run(["make", "--no-print-directory", "-n", "-B", target], cwd=ROOT, capture_output=True,
                          text=True, check=True, env=env)
    return done.stdout.splitlines()


def test_make_demo_installs_only_the_runtime_after_a_progress_line() -> None:
    lines = _dry_run("demo")
    installs = [i for i, line in enumerate(lines) if "pip install" in line and "--upgrade pip" not in line]
    assert [lines[i].split("pip install", 1)[1].strip() for i in installs] == ["-q -e ."]
    assert "runtime dependencies" in lines[installs[0] - 1] and lines[installs[0] - 1].startswith("echo ")
    assert lines[-1].endswith("perftunereport demo --campaign campaigns/h200-decoder-layer")
    assert not any(tool in line for line in lines for tool in ("[test", "playwright", "mypy", "ruff", "pytest"))


def test_make_test_installs_the_test_tools_and_runs_lint_and_pytest() -> None:
    lines = _dry_run("test")
    assert any("pip install" in line and "'.[test" in line for line in lines)
    assert any(line.endswith("/ruff check perfreport tests benchmarks device") for line in lines)
    assert lines[-1].endswith("/pytest")
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == "make test"
