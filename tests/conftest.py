"""Shared fixtures: campaigns built in tmp from the real captures (never written into the repo's campaigns/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from perfreport.cli.main import cli
from perfreport.warehouse.campaign_import import import_campaign
from perfreport.site.render import RenderResult, report_render

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


ONE_CELL_CONFIG = """schema_version: 1
campaign: t-campaign
hardware: h200_sm90
sol_rigor: L2
cells:
  - id: c1
    description: test cell
"""


@pytest.fixture()
def campaign(tmp_path: Path) -> Path:
    """An empty one-cell campaign (`c1`, hardware h200_sm90) in tmp_path."""
    d = tmp_path / "camp"
    d.mkdir()
    (d / "config.yaml").write_text(ONE_CELL_CONFIG)
    return d


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


def run_cli(*args: str) -> tuple[int, str]:
    """Invoke the CLI in-process; return (exit code, output as a terminal shows it: stdout and stderr)."""
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def run_cli_streams(*args: str) -> tuple[int, str, str]:
    """Invoke the CLI in-process; return (exit code, stdout, stderr) apart."""
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr
