"""Write the pprof and folded-stack fixtures of this folder from zymtrace_like_gpu_kernels.csv (README.md says why).

Not run by the tests: the fixtures are committed. To write them again (from the repository root):

    python3 -m venv /tmp/pgen && /tmp/pgen/bin/pip install grpcio-tools      # protoc + Google's protobuf runtime
    /tmp/pgen/bin/python tests/data/samples/make_pprof_fixtures.py PROFILE_PROTO

PROFILE_PROTO is pprof's schema, proto/profile.proto of github.com/google/pprof. It is compiled with protoc into a
temporary folder, the profile is built with the generated classes, and `go tool pprof -proto` (Debian's golang-go)
then writes the committed file with pprof's own writer (github.com/google/pprof/profile, vendored in Go), which
reads and checks it first. go_cpu_profile/ writes a real CPU profile with Go's runtime/pprof.
"""

from __future__ import annotations

import csv
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CSV = HERE / "zymtrace_like_gpu_kernels.csv"
PPROF = HERE / "parca_like_gpu_kernels.pb.gz"
FOLDED = HERE / "parca_like_gpu_kernels.folded"
GO_CPU = HERE / "go_cpu_no_kernels.pb.gz"

# Host frames of a Python process, root first, as an eBPF profiler unwinds them (native, then Python).
ROOT = ["_start", "__libc_start_main", "Py_BytesMain", "_PyEval_EvalFrameDefault"]
GEMM = ["at::native::structured_mm_out_cuda::impl", ("at::cuda::blas::gemm_internal<c10::BFloat16>",
        "at::cuda::blas::gemm_internal_cublaslt<c10::BFloat16>"), "cublasLtMatmul", "cuLaunchKernelEx"]
# The launching host frames of each kernel (by the start of its name) and the Python call site(s) with their share
# of the kernel's samples; a tuple is one location with an inlined callee (pprof Location.line, caller first here).
LAUNCH = {
    "nvjet_sm90_tst_256": (GEMM, [("workload.mlp", 400), ("workload.attention", 212)]),
    "nvjet_sm90_tst_320": (GEMM, [("workload.mlp", 300), ("workload.attention", 186)]),
    "nvjet_sm90_tst_192": (GEMM, [("workload.attention", 419)]),
    "cudnn_generated": (["at::native::_scaled_dot_product_cudnn_attention_cuda", "cudnn::backend::execute",
                         "cuLaunchKernel"], [("workload.attention", 63)]),
    "void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::silu": (
        ["at::native::silu_kernel", "cudaLaunchKernel"], [("workload.mlp", 48)]),
    "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add": (
        ["at::native::add_kernel", "cudaLaunchKernel"], [("workload.layer", 36)]),
    "void at::native::(anonymous namespace)::vectorized_layer_norm": (
        ["at::native::layer_norm_cuda", "cudaLaunchKernel"], [("workload.layer", 32)]),
}
# Host-only samples: no kernel frame (left out of the kernel shares, reported as such).
HOST_ONLY = [(["workload.layer", "at::native::empty_cuda", "c10::cuda::CUDACachingAllocator::malloc"], 140),
             (["workload.main", "cudaDeviceSynchronize", "ioctl"], 95)]
# The add kernel's frame also carries its mangled name (pprof Function.system_name).
MANGLED = {"CUDAFunctor_add": "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c108BFloat16EE"
                              "ESt5arrayIPcLm3EEEEviT0_T1_"}
NS_PER_SAMPLE = 10_000  # gpu_time: 10 us a sample, plus a deterministic spread so the two types' shares differ


def stacks() -> list[tuple[list[str | tuple[str, ...]], int, int, bool]]:
    """(frames root first, samples, gpu_time ns, whether the leaf is a kernel) per stack, from the CSV's kernel
    names and counts."""
    rows = [r for r in csv.reader(line for line in CSV.open() if not line.startswith("#"))][1:]
    out: list[tuple[list[str | tuple[str, ...]], int, int, bool]] = []
    for name, samples in rows:
        (host, sites), = [v for k, v in LAUNCH.items() if name.startswith(k)]
        assert sum(n for _, n in sites) == int(samples), name
        for site, n in sites:
            out.append(([*ROOT, site, *host, name], n, n * NS_PER_SAMPLE + (n * 7919) % 5000, True))
    out += [([*ROOT, *frames], n, 0, False) for frames, n in HOST_ONLY]
    return out


def build_profile(pb2: Any) -> Any:
    """A pprof Profile of stacks(): sample types samples/count and gpu_time/nanoseconds, default samples."""
    prof = pb2.Profile()
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings)
            prof.string_table.append(text)
        return strings[text]

    s("")
    for typ, unit in (("samples", "count"), ("gpu_time", "nanoseconds")):
        prof.sample_type.add(type=s(typ), unit=s(unit))
    prof.default_sample_type = s("samples")
    prof.period_type.type, prof.period_type.unit, prof.period = s("gpu_time"), s("nanoseconds"), NS_PER_SAMPLE
    functions: dict[str, int] = {}
    locations: dict[tuple[str, ...], int] = {}

    def function(name: str) -> int:
        if name not in functions:
            fid = functions[name] = len(functions) + 1
            mangled = next((m for key, m in MANGLED.items() if key in name), "")
            prof.function.add(id=fid, name=s(name), system_name=s(mangled or name))
        return functions[name]

    def location(frame: str | tuple[str, ...], kernel: bool) -> int:
        names = frame if isinstance(frame, tuple) else (frame,)
        if names not in locations:
            lid = locations[names] = len(locations) + 1
            # host frames sit in a mapped binary at an address; a kernel is a pseudo-frame (no mapping, no address)
            loc = prof.location.add(id=lid, mapping_id=0 if kernel else 1, address=0 if kernel else 0x1000 * lid)
            for name in reversed(names):  # line[0] is the inlined leaf, the last line its caller
                loc.line.add(function_id=function(name))
        return locations[names]

    prof.mapping.add(id=1, memory_start=0x1000, memory_limit=0x1000000, filename=s("python3.11"),
                     has_functions=True)
    for frames, n, ns, kernel_leaf in stacks():
        ids = [location(f, kernel_leaf and i == len(frames) - 1) for i, f in enumerate(frames)]
        sample = prof.sample.add(location_id=list(reversed(ids)), value=[n, ns])  # the leaf is location_id[0]
        sample.label.add(key=s("cuda_device"), str=s("0"))
    return prof


def folded() -> str:
    """The count sample type of stacks() as folded stacks (root first, `;`-joined, a space, the count)."""
    lines = []
    for frames, n, _, _ in stacks():
        flat = [name for f in frames for name in (f if isinstance(f, tuple) else (f,))]
        lines.append(f"{';'.join(flat)} {n}")
    return "\n".join(lines) + "\n"


def main(proto: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{proto.parent}", f"--python_out={tmp}",
                        proto.name], check=True)
        sys.path.insert(0, tmp)
        pb2 = importlib.import_module("profile_pb2")
        raw = Path(tmp) / "raw.pb"
        raw.write_bytes(build_profile(pb2).SerializeToString())
        with PPROF.open("wb") as out:
            subprocess.run(["go", "tool", "pprof", "-proto", "-symbolize=none", str(raw)], stdout=out, check=True)
    FOLDED.write_text(folded())
    subprocess.run(["go", "run", ".", str(GO_CPU)], cwd=HERE / "go_cpu_profile", check=True)
    for path in (PPROF, FOLDED, GO_CPU):
        print(f"wrote {path.relative_to(HERE.parents[2])} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
