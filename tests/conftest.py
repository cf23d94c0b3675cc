"""Shared fixtures: campaigns built in tmp from the real captures (never written into the repo's campaigns/)."""

from __future__ import annotations

import json
import shutil
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from perfreport.cli.main import cli
from perfreport.site.render import RenderResult, report_render
from perfreport.warehouse.campaign_import import import_campaign

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "campaigns" / "h200-decoder-layer"
TORCH_TRACE = ROOT / "tests" / "data" / "torch" / "workload_torch_trace.json.gz"
EVIL_KERNEL = "<img src=x onerror=alert(1)>"
EVIL_FIELD = '</script><script>alert("field")</script>'


def copy_example(dst: Path) -> Path:
    """Copy the example campaign's config and captures (not its cells/) to dst and import every capture."""
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    import_campaign(dst)
    return dst


@pytest.fixture(scope="session")
def example_campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example campaign (2 cells, --set full and --set basic captures), imported in tmp."""
    return copy_example(tmp_path_factory.mktemp("example") / EXAMPLE.name)


@pytest.fixture(scope="session")
def example_site(example_campaign: Path, tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    """The example campaign rendered into a tmp site/."""
    return report_render(example_campaign, tmp_path_factory.mktemp("site"))


def _rewrite_config(camp: Path, edit) -> None:  # type: ignore[no-untyped-def]
    config = camp / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    edit(doc)
    config.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="session")
def evil_site(tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    """A campaign whose kernel is named like an XSS payload and whose config carries `</script>`."""
    camp = copy_example(tmp_path_factory.mktemp("evil") / "evil-campaign")

    def edit(doc: dict) -> None:  # type: ignore[type-arg]
        doc["campaign"] = "evil-campaign"
        doc["context"]["identity"]["model"] = EVIL_FIELD
        doc["cells"][1]["description"] = f"decode {EVIL_KERNEL} {EVIL_FIELD}"

    _rewrite_config(camp, edit)
    path = camp / "cells" / "decode-b16-kv2048" / "ncu_kernels.json"
    data = json.loads(path.read_text())
    for k in data["kernels"]:
        if k["function"].startswith("splitKreduce"):
            k["name"] = k["function"] = EVIL_KERNEL
    data["campaign"] = "evil-campaign"
    path.write_text(json.dumps(data))
    return report_render(camp, tmp_path_factory.mktemp("evil-site"))


@pytest.fixture(scope="session")
def rich_campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every section filled: a torch-trace time share (prefill), a bundle with serving results and a step
    budget, a krhpa block, and two decode cells differing only in workload.concurrency (a comparison)."""
    from perfreport.timeshare import import_torch_trace

    camp = copy_example(tmp_path_factory.mktemp("rich") / "rich-campaign")
    bundle = camp / "bundles" / "decode-bench"
    (bundle / "ncu-profiles").mkdir(parents=True)
    (bundle / "inference_perfbench_v1.json").write_text(json.dumps({
        "schema_version": 1, "bundle_id": "decode-bench", "context": {}, "kernel_internals": None,
        "results": [{"name": "c16", "output_throughput_tok_s": 1830.5, "mean_ttft_ms": 41.2, "mean_tpot_ms": 8.7},
                    {"name": "c32", "output_throughput_tok_s": 2950.0, "mean_ttft_ms": 55.0, "mean_tpot_ms": 10.9}],
        "step_budget": [{"step": i, "gpu_busy_ms": 3.0 + 0.1 * i, "host_gap_ms": 4.5} for i in range(5)],
    }))

    def edit(doc: dict) -> None:  # type: ignore[type-arg]
        doc["campaign"] = "rich-campaign"
        doc["krhpa"] = {"candidate": {"K": "fp8 weights", "R": 0.98, "H": True, "P": "L3", "A": "approved"},
                        "baseline": {"K": "bf16", "R": 1.0, "H": True, "P": "L2"}}
        decode = doc["cells"][1]
        decode["captures"].append("bundles/decode-bench")
        twin = json.loads(json.dumps(decode))
        twin["id"] = "decode-b16-kv2048-c32"
        twin["context"]["workload"]["concurrency"] = 32
        doc["cells"].append(twin)

    _rewrite_config(camp, edit)
    src = camp / "cells" / "decode-b16-kv2048"
    shutil.copytree(src, camp / "cells" / "decode-b16-kv2048-c32")
    for cell in ("decode-b16-kv2048", "decode-b16-kv2048-c32", "prefill-b8-s1024"):
        path = camp / "cells" / cell / "ncu_kernels.json"
        data = json.loads(path.read_text())
        data["campaign"], data["cell_id"] = "rich-campaign", cell
        path.write_text(json.dumps(data))
    import_torch_trace(camp, "prefill-b8-s1024", TORCH_TRACE)
    return camp


@pytest.fixture(scope="session")
def rich_site(rich_campaign: Path, tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    """The rich campaign rendered into a tmp site/."""
    return report_render(rich_campaign, tmp_path_factory.mktemp("rich-site"))


class _IndentedDumper(yaml.SafeDumper):
    """Indent block sequences under their key, as the hand-written campaign configs do."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


MINIMAL_CONFIG: dict[str, Any] = {"schema_version": 1, "campaign": "t-campaign", "hardware": "h200_sm90",
                                  "sol_rigor": "L2", "cells": [{"id": "c1", "description": "test cell"}]}


def config_text(**overrides: Any) -> str:
    """The minimal valid campaign config.yaml text; each override replaces (or adds) one top-level key."""
    return yaml.dump({**MINIMAL_CONFIG, **overrides}, Dumper=_IndentedDumper, sort_keys=False)


def write_config(campaign_dir: Path, **overrides: Any) -> Path:
    """Write the minimal campaign config (see config_text) into campaign_dir, creating it; return campaign_dir."""
    campaign_dir.mkdir(parents=True, exist_ok=True)
    (campaign_dir / "config.yaml").write_text(config_text(**overrides))
    return campaign_dir


@pytest.fixture()
def campaign(tmp_path: Path) -> Path:
    """An empty one-cell campaign (`c1`, hardware h200_sm90) in tmp_path."""
    return write_config(tmp_path / "camp")


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tests/data/fake_ncu (real H200 ncu output replayed) with no line delay; returns the JSON-lines file where it
    records every call (argv, pid, signals received)."""
    record = tmp_path / "fake_ncu.jsonl"
    monkeypatch.setenv("FAKE_NCU_RECORD", str(record))
    monkeypatch.setenv("FAKE_NCU_LINE_DELAY_S", "0")
    monkeypatch.setenv("FAKE_NCU_MAX_S", "20")
    monkeypatch.delenv("FAKE_NCU_SCENARIO", raising=False)
    return record


@dataclass(frozen=True)
class CliRun:
    """One in-process CLI run; unpacks as (exit_code, output) for the common `code, out = run_cli(...)`."""

    exit_code: int
    output: str  # stdout and stderr interleaved, as a terminal shows them
    stdout: str
    stderr: str
    exception: BaseException | None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.exit_code, self.output))


def run_cli(*args: str, ok: bool | None = None, input: str | None = None,
            env: Mapping[str, str | None] | None = None) -> CliRun:
    """Invoke `perftunereport ARGS` in-process; ok=True/False asserts success/failure and shows the output if not."""
    result = CliRunner().invoke(cli, list(args), input=input, env=env)
    run = CliRun(result.exit_code, result.output, result.stdout, result.stderr, result.exception)
    if ok is not None and (run.exit_code == 0) != ok:
        crashed = result.exc_info is not None and not isinstance(run.exception, SystemExit)
        crash = "".join(traceback.format_exception(*result.exc_info)) if crashed and result.exc_info else ""
        pytest.fail(f"perftunereport {' '.join(args)}: exit {run.exit_code}, expected "
                    f"{'0' if ok else 'non-zero'}\n{run.output}\n{crash}", pytrace=False)
    return run
