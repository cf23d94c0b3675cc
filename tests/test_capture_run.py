"""capture run, its ncu session, the release attach, the serving load generator and the overhead benchmark.

The GPU and ncu cannot exist here: tests/data/fake_ncu/ncu replays REAL ncu 2025.3.1 output recorded on the H200
(attach_twice.log, oracle_basic.log, empty.log) and writes a real .ncu-rep on SIGINT, then dies by that SIGINT
(rc -2, as ncu 2025.3.1 did on the H200: overhead4/), as the attach facts in tests/data/h200_shared/README.md
say ncu does. The real path runs on the H200 (docs/capture.md).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.serving.loadgen import LoadGen, Record, percentile, split_windows, window_stats
from benchmarks.serving.serve_llama import Batcher, EchoEngine, Serving, ServingState, warm_up
from perfreport.capture.release import NO_KERNEL, release_argv, release_launched, release_workers
from perfreport.capture.run_record import exports_for
from perfreport.capture.session import NcuSession, parse_line

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "data" / "fake_ncu"
NCU, SMI = str(FAKE / "ncu"), str(FAKE / "nvidia-smi")
SHARED = ROOT / "tests" / "data" / "h200_shared"
ORACLE = ROOT / "tests" / "data" / "h200_oracle"
REPORT_BYTES = gzip.decompress((SHARED / "attach_interrupt_1.ncu-rep.gz").read_bytes())
HOSTILE = "a'; rm -rf / #"


def calls(record: Path) -> list[dict[str, Any]]:
    """The fake's recorded events, in order."""
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


# -- ==PROF== parsing on real logs -------------------------------------------------------------------------------
def test_parse_real_attach_log_counts_sessions_and_kernels() -> None:
    events = [e for line in (SHARED / "attach_twice.log").read_text().splitlines() if (e := parse_line(line))]
    kinds = [e.kind for e in events]
    assert kinds.count("connected") == 3 and kinds.count("profiling") == 3 and kinds.count("shutdown") == 2
    assert {e.pid for e in events if e.kind == "connected"} == {692}
    assert {e.name for e in events if e.kind == "profiling"} == {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"}
    assert [e.path for e in events if e.kind == "report"] == ["/root/out/a1.ncu-rep", "/root/out/a2.ncu-rep"]
    assert parse_line("22.43 iters=82000 rate=4791/s") is None  # the target's own output


def test_parse_real_launch_and_empty_logs() -> None:
    basic = [e for line in (ORACLE / "oracle_basic.log").read_text().splitlines() if (e := parse_line(line))]
    names = [e.name for e in basic if e.kind == "profiling"]
    assert names[0] == "nvjet_sm90_tst_320x128_64x3_1..." and len(names) == 6  # truncated names, indexed lines
    empty = [e for line in (SHARED / "empty.log").read_text().splitlines() if (e := parse_line(line))]
    assert [e.kind for e in empty] == ["connected", "disconnected", "no-kernels"]
    cut = parse_line('==PROF== Profiling "k" - 3: 0%....50%')
    assert cut is not None and cut.kind == "profiling-started"  # a replay cut short is not a profiled kernel


# -- the ncu session: SIGINT to our ncu only ---------------------------------------------------------------------
def test_session_sigint_goes_to_ncu_only_and_target_keeps_running(fake_ncu: Path, tmp_path: Path) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import signal,time\n"
                               "signal.signal(signal.SIGINT, lambda *a: print('target got SIGINT', flush=True))\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        session = NcuSession([NCU, "--mode", "attach", "--hostname", "127.0.0.1", "-c", "2", "-o",
                              str(tmp_path / "r")], tmp_path / "out.txt").start()
        assert session.wait_profiled(2, 20)
        assert session.running()  # still attached after --launch-count kernels (attach fact 2)
        rc = session.stop(grace_s=20)
        assert rc == -2  # killed by the SIGINT after writing the report, as on the H200 (overhead4/)
        assert (tmp_path / "r.ncu-rep").read_bytes() == REPORT_BYTES
        assert [s.step for s in session.signals] == ["sigint-ncu"]
        assert session.signals[0].argv == ["kill", "-INT", f"-{session.proc.pid}"]  # type: ignore[union-attr]
        assert target.poll() is None  # the attach target is untouched
        got = calls(fake_ncu)
        assert [c.get("signal") for c in got if c["event"] == "signal"] == ["SIGINT"]
        assert {c["pid"] for c in got} == {session.proc.pid}  # type: ignore[union-attr]
        assert "Trying to shutdown target application" in (tmp_path / "out.txt").read_text()
    finally:
        target.kill()
        target.wait()
    assert "target got SIGINT" not in (target.stdout.read() if target.stdout else "")


def test_session_escalates_when_ncu_ignores_sigint(fake_ncu: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU_SCENARIO", "hang")
    session = NcuSession([NCU, "--mode", "attach", "-o", str(tmp_path / "r")], tmp_path / "out.txt").start()
    assert session.wait_profiled(1, 20)
    rc = session.stop(grace_s=0.5)
    assert rc == 143
    assert [s.step for s in session.signals] == ["sigint-ncu", "sigterm-ncu-group"]
    assert not (tmp_path / "r.ncu-rep").exists()


# -- release of a process started under ncu --mode launch --------------------------------------------------------
def test_release_attaches_with_a_filter_matching_nothing_then_detaches(fake_ncu: Path, tmp_path: Path) -> None:
    assert release_argv("ncu") == ["ncu", "--mode", "attach", "--hostname", "127.0.0.1", "--kernel-name",
                                   NO_KERNEL, "--launch-count", "1"]
    assert release_argv("ncu", graph_profiling="graph")[5:7] == ["--graph-profiling", "graph"]
    res = release_launched(NCU, tmp_path / "release.txt", hold_s=0.1)
    assert res.pid == 692 and res.steps[0].rc == -2
    assert [c["step"] for c in res.cleanup] == ["sigint-ncu"]
    assert "No kernels were profiled" in (tmp_path / "release.txt").read_text()


def test_release_per_port_attaches_each_worker_once(fake_ncu: Path, tmp_path: Path) -> None:
    assert release_argv("ncu", port=49153, exact_port=True)[4:9] == [
        "127.0.0.1", "--port", "49153", "--max-connections", "2"]
    results = release_workers(NCU, tmp_path / "release.txt", 3, hold_s=0.05)
    assert [r.pid for r in results] == [692, 693, 694]
    assert [r.log_path.name for r in results if r.log_path] == [
        "release.port49152.txt", "release.port49153.txt", "release.port49154.txt"]
    assert "on port 49154." in (tmp_path / "release.port49154.txt").read_text()
    assert all(r.steps[0].argv[5:9] == ["--port", str(49152 + i), "--max-connections", "2"]
               for i, r in enumerate(results))


def test_release_workers_cli_and_a_port_that_never_answers(fake_ncu: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import run_cli

    from perfreport.errors import PerfReportError

    out = run_cli("capture", "release", "--ncu", NCU, "--workers", "2", "--port", "49152",
                  "--log", str(tmp_path / "rel.txt"), ok=True).output
    assert "released process 692 after 1 attach attempt(s)" in out and "released process 693" in out
    assert "release: port 49153 (2 of 2)" in out
    code, out = run_cli("capture", "release", "--ncu", NCU, "--workers", "0")
    assert code == 2 and "--workers" in out and "Traceback" not in out
    monkeypatch.setenv("FAKE_NCU_ANY_PORT", "1")  # port 49152 answers every attach: 49153 is never reached
    said: list[str] = []
    with pytest.raises(PerfReportError, match="after 2 attempts"):
        release_workers(NCU, tmp_path / "r.txt", 2, hold_s=0.05, attempts=2, retry_s=0.01, progress=said.append)
    assert said[:2] == ["release: port 49152 (1 of 2)", "release: connected to process 692; detaching in 0.05 s"]
    assert said.count("release: port 49152 answered, not 49153 (its process has not reached CUDA yet); retrying") == 2
    # ncu 2025.3.1 finds no process with --max-connections 1 (ports_probe.log): the fake does the same
    probe = (Path(__file__).parent / "data/h200_capture/ports_probe.log").read_text()
    assert "No processes found on 127.0.0.1 (ports 49153-49153)" in probe and "(3013) on port 49153" not in probe
    assert "listen ('tcp', 49153) pid 3013" in probe


def test_release_retries_then_names_the_problem(fake_ncu: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU_SCENARIO", "refuse")
    from perfreport.errors import PerfReportError

    with pytest.raises(PerfReportError, match="after 2 attempts"):
        release_launched(NCU, tmp_path / "release.txt", attempts=2, retry_s=0.01, connect_timeout_s=5)


# -- exports naming ----------------------------------------------------------------------------------------------
def test_exports_are_named_after_their_page() -> None:
    got = exports_for([["ncu", "--import", "r", "--csv", "--page", "raw"],
                       ["ncu", "--import", "r", "--csv", "--page", "details", "--section", "SpeedOfLight"],
                       ["ncu", "--import", "r", "--csv", "--page", "details"]])
    assert [s for _, s in got] == ["-raw.csv", "-sol.csv", "-details.csv"]


# -- serving: echo engine, batching, load generator ----------------------------------------------------------------
def test_percentile_and_windows_count_requests_by_their_end_time() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([float(i) for i in range(1, 101)], 99) == pytest.approx(99.01)
    recs = [Record(0, 0.0, 1.0, 10), Record(1, 0.5, 2.5, 10), Record(0, 1.0, 2.0, 10),
            Record(1, 2.5, 3.5, 0, "HTTP 500: x"), Record(0, 2.0, 3.0, 10)]
    w = window_stats(recs, 1.0, 3.0, "w")
    assert (w.completed, w.errors, w.latency_n) == (3, 0, 1)  # ended in [1, 3): 1.0, 2.5, 2.0; inside: [1, 2]
    assert w.tokens_per_s == pytest.approx(15.0) and w.p50_s == pytest.approx(1.0)
    assert window_stats(recs, 2.5, 4.0).errors == 1
    assert [x.name for x in split_windows(recs, 0.0, 3.5, 1.5)] == ["0s", "2s", "3s"]


def test_batcher_groups_waiting_requests_and_finishes_each_at_its_own_length() -> None:
    seen: list[tuple[int, int, int]] = []

    class Engine(EchoEngine):
        def generate(self, batch: int, prompt_len: int, steps: int, on_step):  # type: ignore[no-untyped-def]
            seen.append((batch, prompt_len, steps))
            super().generate(batch, prompt_len, steps, on_step)

    from benchmarks.serving.serve_llama import Job

    batcher = Batcher(Engine(0.0), max_batch=3)
    jobs = [Job(8, 4), Job(8, 2), Job(16, 3), Job(8, 5), Job(8, 1)]
    batch = [jobs[0], jobs[1], jobs[3]]  # same prompt length, at most 3
    for j in jobs:
        batcher.submit(j)
    import threading

    taken = batcher._take(threading.Event())
    assert taken == batch
    batcher.run_batch(taken)
    assert seen == [(3, 8, 5)] and [j.tokens for j in batch] == [4, 2, 5] and all(j.done.is_set() for j in batch)


def test_echo_server_is_ready_only_after_warm_up_and_serves_the_load() -> None:
    serving = Serving(ServingState(Batcher(EchoEngine(0.001), max_batch=4)))
    try:
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"{serving.url}/health", timeout=5)
        assert info.value.code == 503  # not ready before warm-up
        assert warm_up(serving.state.batcher.engine, 4, 16) >= 0
        serving.start_worker()
        assert urllib.request.urlopen(f"{serving.url}/health", timeout=5).status == 200
        bad = urllib.request.Request(f"{serving.url}/generate", data=b'{"prompt_len": 0}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(bad, timeout=5)
        assert info.value.code == 400
        gen = LoadGen(serving.url, concurrency=3, prompt_len=16, max_new_tokens=5).start(duration_s=1.0)
        gen.join(10)
        recs = gen.snapshot()
        assert recs and all(r.error is None and r.tokens == 5 for r in recs)
        w = window_stats(recs, recs[0].start, max(r.end for r in recs) + 1e-6)
        assert w.completed == len(recs) and w.p50_s is not None and w.p50_s > 0.004
        assert serving.state.batcher.stats["requests"] >= len(recs)
    finally:
        serving.close()


# -- the overhead benchmark's pure parts --------------------------------------------------------------------------
def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("capture_overhead", ROOT / "benchmarks" / "capture_overhead.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_capture_windows_ratio_rows_and_verdict() -> None:
    bench = _bench()
    tl = {"started": 100.0, "connected": 101.0, "first_profiled": 102.0, "last_profiled": 103.0,
          "sigint": 115.0, "ended": 116.0}
    cuts = bench.capture_windows(tl, before_s=8, after_s=8, settle_s=2)
    assert cuts == {"before": (92.0, 100.0), "capture": (100.0, 103.0), "attached": (105.0, 115.0),
                    "after": (118.0, 126.0)}
    assert "attached" not in bench.capture_windows({**tl, "sigint": 104.0}, 8, 8, 2)
    recs = [Record(0, t, t + 0.5, 32) for t in [x * 0.5 for x in range(0, 260)]]
    slow = [Record(0, t, t + 0.6, 32) for t in [x * 0.6 for x in range(0, 200)]]
    base = window_stats(recs, 10, 100, "A un-profiled")
    attached = window_stats(slow, 10, 100, "B1 scoped basic: attached")
    rows = bench.ratio_rows({"A un-profiled": base, "B1 scoped basic: attached": attached}, base, None)
    assert rows[0]["vs_unprofiled"]["tokens_per_s"] == pytest.approx(1.0)
    v = bench.verdict(rows, "B1 scoped basic: attached")
    assert v["met"] is False and v["p50_ratio"] == pytest.approx(1.2)
    assert bench.verdict(rows, "B9: attached")["met"] is None
    table = bench.format_table(rows)
    assert "B1 scoped basic: attached" in table and "1.200" in table


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _free_port_pair() -> int:
    """A port P with P + 1 free too (the sister's)."""
    for _ in range(50):
        port = _free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no free port pair")


def test_sister_mode_refuses_a_busy_sister_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import http.server
    import threading

    bench = _bench()
    port = _free_port_pair()
    srv = http.server.HTTPServer(("127.0.0.1", port + 1), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        rc = bench.main(["--cpu-smoke", "--sister", "--port", str(port), "--work", str(tmp_path / "w")])
    finally:
        srv.shutdown()
        srv.server_close()
    assert rc == 2
    err = capsys.readouterr().err
    assert f"something already answers on http://127.0.0.1:{port + 1}" in err and "--port + 1" in err
    assert not (tmp_path / "w" / "server_production.log").exists()  # nothing was started


def test_sister_mode_measures_production_while_the_sister_is_captured(tmp_path: Path) -> None:
    """--sister on CPU (echo engine, fake ncu): production is never under ncu, every capture attaches to the sister,
    and every window is cut from production's records."""
    bench = _bench()
    port, out = _free_port_pair(), tmp_path / "sister.json"
    rc = bench.main(["--cpu-smoke", "--sister", "--sister-control", "--port", str(port), "--duration", "1",
                     "--before", "0.3",
                     "--linger", "0.5", "--after", "0.3", "--settle", "0.2", "--work", str(tmp_path / "w"),
                     "--out", str(out)])
    assert rc == 0
    got = json.loads(out.read_text())
    launch = got["phase_b"]["launch_argv"]
    assert launch[1:3] == ["--mode", "launch"] and launch[launch.index("--port") + 1] == str(port + 1)
    assert got["phase_b"]["sister_port"] == port + 1
    prod_log = (tmp_path / "w" / "server_production.log").read_text()
    assert "Waiting for profiler" not in prod_log  # production ran without ncu
    assert "Waiting for profiler" in (tmp_path / "w" / "server_sister.log").read_text()
    caps = got["phase_b"]["captures"]
    assert [c["label"] for c in caps] == ["S1 scoped basic", "S2 scoped full", "S3 unscoped basic"]
    assert [(c["ok"], c["kernels_profiled"]) for c in caps] == [(True, 1), (True, 1), (True, 50)]
    assert all(c["argv"][1:3] == ["--mode", "attach"] for c in caps)
    windows = [r["window"] for r in got["rows"]]
    assert windows[:4] == ["P production alone", "C beside a plain replica serving 1 client",
                           "S0 beside the released sister, idle", "S0 beside the released sister serving 1 client"]
    assert "Waiting for profiler" not in (tmp_path / "w" / "server_plain_replica.log").read_text()
    assert all(c["driver_requests"] > 0 for c in caps)  # the sister was driven during each capture only
    assert {f"S{i} {k}: capture" for i, k in ((1, "scoped basic"), (2, "scoped full"), (3, "unscoped basic"))} \
        <= set(windows)
    assert got["target"]["window"] == "S1 scoped basic: attached" and got["target"]["met"] is not None
    assert [v["window"] for v in got["target_during_captures"]] == [
        "S1 scoped basic: capture", "S2 scoped full: capture", "S3 unscoped basic: capture"]
    assert got["records_b"] and got["sister_records"]  # both loads ran; production's are the windows' source
    assert {r["window"]: r["completed"] for r in got["rows"]}["P production alone"] > 0


def test_fake_ncu_launch_mode_runs_the_command(tmp_path: Path, fake_ncu: Path) -> None:
    out = subprocess.run([NCU, "--mode", "launch", "--target-processes", "all", "--", sys.executable, "-c",
                          "print('target ran')"], capture_output=True, text=True, timeout=30)
    assert out.stdout.splitlines() == ["==PROF== Waiting for profiler to attach on ports 49152-49215.", "target ran"]


def test_kill_helpers_do_not_leak(tmp_path: Path) -> None:
    bench = _bench()
    proc = bench.start([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "x.log")
    bench.end(proc, "sleeper")
    assert proc.returncode == -signal.SIGTERM
    assert os.path.exists(tmp_path / "x.log")


H200_RUNS = Path(__file__).resolve().parent / "data" / "h200_capture"


def _overhead4_output(name: str) -> list[str]:
    """ncu's console output of one capture of the H200 run overhead4/ (bundle.tar.gz)."""
    import tarfile

    with tarfile.open(H200_RUNS / "overhead4" / "bundle.tar.gz") as tar:
        member = tar.extractfile(f"bundle/ncu-profiles/{name}.ncu-output.txt")
        assert member is not None
        return member.read().decode().splitlines()


@pytest.mark.parametrize(("name", "count", "first"), [
    ("overhead_b1_basic", 1, "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT"),   # -k regex:nvjet -c 1: `Profiling "K": ..`
    ("overhead_b2_full", 1, "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_NNT"),
    ("overhead_b3_unscoped", 50, "vectorized_layer_norm_kernel"),          # -c 50: `Profiling "K" - 0 (1/50): ..`
])
def test_every_profiled_line_of_a_real_h200_capture_counts(name: str, count: int, first: str) -> None:
    # The H200 run that found this: the unscoped -c 50 capture profiled 50 kernels, the session counted 0 (its
    # `- 0 (1/50):` lines did not match), so it waited out its 120 s timeout and called the capture failed.
    events = [e for line in _overhead4_output(name) if (e := parse_line(line)) is not None]
    done = [e for e in events if e.kind == "profiling"]
    assert len(done) == count and done[0].name == first
    assert not [e for e in events if e.kind == "profiling-started"]
    assert parse_line('==PROF== Profiling "elementwise_kernel" - 49 (50/50): 0%....50%....100% - 10 passes') == \
        type(done[0])("profiling", 'Profiling "elementwise_kernel" - 49 (50/50): 0%....50%....100% - 10 passes',
                      0.0, name="elementwise_kernel")
    cut = parse_line('==PROF== Profiling "elementwise_kernel" - 7 (8/50): 0%....50')
    assert cut is not None and cut.kind == "profiling-started" and cut.name == "elementwise_kernel"


def test_attach_capture_after_the_fix_ended_ok_on_the_h200() -> None:
    """attach_count_device.sh: `capture run --mode attach --launch-count 3`, scoped and unscoped, on a process
    replaying a CUDA graph; both ended by our SIGINT (rc -2) with 3 kernels, diagnosed ok, exit 0."""
    run = H200_RUNS / "attach_count"
    receipt = json.loads((run / "scoped_c3.receipt.json").read_text())
    assert receipt["exit_status"] == -2 and receipt["kernels_profiled"] == 3
    assert receipt["kernel_names"] == ["vectorized_elementwise_kernel"] * 3
    assert [d["code"] for d in receipt["diagnosis"]] == ["ok"]
    lines = (run / "scoped_c3.ncu-output.txt").read_text().splitlines()
    assert sum(e.kind == "profiling" for line in lines if (e := parse_line(line))) == 3
    log = (run / "attach_count.log").read_text()
    for name in ("scoped_c3", "unscoped_c3"):
        assert f"captured 3 kernel(s) into /tmp/acb/ncu-profiles: {name}-raw.csv" in log
    assert log.count("profiled 3/3: vectorized_elementwise_kernel") == 2 and log.count("\nrc=0\n") == 3
