"""A distributed engine reads the team lake: Daft on a local Ray cluster scans the kernels table through the same
catalog (`catalog:team`: PostgreSQL + S3) and counts what `lake query` counts.

Ray starts in this process (`ray.init`: a head node with its own GCS, raylet and worker processes on 127.0.0.1) and
is shut down by the fixture's finalizer. Daft runs on it with its Ray runner, reading Parquet from the S3 server
itself (its Rust reader, configured from the table's FileIO properties), not through pyiceberg's scan.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TeamLake, run_cli
from test_lake import make_campaign
from test_lake_concurrency import synthetic_campaign

from perfreport.lake.iceberg import load_tables, open_catalog

pytestmark = [pytest.mark.team, pytest.mark.distributed]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[dict[str, Any]]:
    """A local Ray cluster of 2 CPUs, with Daft's Ray runner on it; shut down after the module."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
    import daft
    import ray

    logs = tempfile.mkdtemp(prefix="ray-")  # short: Ray's unix socket paths live under it
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=logs)
    try:
        daft.set_runner_ray(address=context.address_info["address"])
        yield context.address_info
    finally:
        ray.shutdown()
        shutil.rmtree(logs, ignore_errors=True)


def test_daft_on_ray_counts_the_rows_lake_query_counts(team_lake: TeamLake, ray_cluster: dict[str, Any],
                                                      tmp_path: Path) -> None:
    import daft
    import ray

    run_cli("publish_to_lake", "--campaign", str(make_campaign(tmp_path / "h200-decoder-layer")), "--lake",
            team_lake.lake, ok=True)
    run_cli("publish_to_lake", "--campaign", str(synthetic_campaign(tmp_path / "team-sweep", cells=6, kernels=5)),
            "--lake", team_lake.lake, ok=True)
    sql = ("SELECT campaign, cell_id, count(*) AS n, sum(duration_ns) AS ns FROM kernels GROUP BY 1, 2 "
           "ORDER BY 1, 2")
    ours = list(csv.DictReader(io.StringIO(run_cli("lake", "query", "--lake", team_lake.lake, "--format", "csv", sql,
                                                   ok=True).output)))
    assert len(ours) == 8 and sum(int(r["n"]) for r in ours) == 39 + 30

    kernels = load_tables(open_catalog(team_lake.lake), ["kernels"])["kernels"]  # the same catalog, one SELECT
    assert kernels.metadata_location.startswith(team_lake.warehouse + "/perfreport/kernels/metadata/")

    @daft.func
    def worker_pid(cell_id: str) -> int:
        return os.getpid()

    df = daft.read_iceberg(kernels).with_column("pid", worker_pid(daft.col("cell_id")))
    theirs = (df.groupby("campaign", "cell_id")
              .agg(daft.col("kernel_id").count().alias("n"), daft.col("duration_ns").sum().alias("ns"),
                   daft.col("pid").min().alias("pid"))
              .sort(["campaign", "cell_id"]).to_pydict())
    assert daft.get_or_infer_runner_type() == "ray"
    assert ray.is_initialized() and ray.cluster_resources()["CPU"] == 2
    assert [(c, cell, n) for c, cell, n in zip(theirs["campaign"], theirs["cell_id"], theirs["n"], strict=True)] == [
        (r["campaign"], r["cell_id"], int(r["n"])) for r in ours]
    assert theirs["ns"] == pytest.approx([float(r["ns"]) for r in ours])
    assert os.getpid() not in set(theirs["pid"])  # the rows went through Ray's worker processes, not this one
