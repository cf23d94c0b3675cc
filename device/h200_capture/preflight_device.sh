#!/usr/bin/env bash
# Device run for `capture preflight` (not yet run): records what the preflight reads on the H200, and runs it.
# Run from the repo root on the GPU machine:  OUT=/some/dir PYTHONPATH=. bash device/h200_capture/preflight_device.sh
# Writes into $OUT (7 files):
#   ncu_help.txt               `ncu --help` (replaces the fake ncu's RECONSTRUCTED_HELP: copy it to
#                              tests/data/h200_capture/ncu_help.txt and tests/data/fake_ncu/ncu prints it instead)
#   nvidia-smi-memory.txt      the exact GPU query preflight runs (name, driver, memory total/used/free, nounits)
#   nvidia_params.txt          /proc/driver/nvidia/params (RmProfilingAdminOnly), or the error when it is absent
#   ncu_launch_env.txt         injection-related variables of a process started under `ncu --mode launch`: does
#                              ncu itself set CUDA_INJECTION64_PATH (to its libcuda-injection.so) on the target?
#   preflight.json             preflight(...).as_dict() with a typical attach plan argv (expected: no fail)
#   preflight_removed.json     the same with the removed `--attach 12345` (expected: ncu-options fail)
#   rc.txt                     exit status of every command above
set -u
: "${OUT:?set OUT to an output folder}"
mkdir -p "$OUT"
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
export NCU PYTHONUNBUFFERED=1
"$NCU" --help > "$OUT/ncu_help.txt" 2>&1; echo "ncu --help rc=$?" >> "$OUT/rc.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,memory.free --format=csv,noheader,nounits \
  > "$OUT/nvidia-smi-memory.txt" 2>&1; echo "nvidia-smi --query-gpu rc=$?" >> "$OUT/rc.txt"
cat /proc/driver/nvidia/params > "$OUT/nvidia_params.txt" 2>&1; echo "cat params rc=$?" >> "$OUT/rc.txt"
timeout 60 "$NCU" --mode launch python3 -c "import os
for k in sorted(os.environ):
    if 'INJECTION' in k or k.startswith(('NV_', 'NVTX_')) or k == 'LD_PRELOAD':
        print(f'{k}={os.environ[k]}')" > "$OUT/ncu_launch_env.txt" 2>&1
echo "ncu --mode launch env rc=$?" >> "$OUT/rc.txt"
python3 -c "
import json, os, sys
from perfreport.capture.preflight import preflight, preflight_summary
ncu = os.environ['NCU']
plan = [ncu, '--mode', 'attach', '--hostname', '127.0.0.1', '--clock-control', 'none', '--kernel-name',
        'regex:nvjet', '--kernel-name-base', 'function', '--launch-skip', '0', '--launch-count', '1', '--set', 'basic',
        '--replay-mode', 'kernel', '--target-processes', 'all', '-o', '/tmp/preflight_probe']
for name, argv in (('preflight.json', plan), ('preflight_removed.json', [ncu, '--attach', '12345'])):
    result = preflight(ncu=ncu, plan_argv=argv)
    print(preflight_summary(result))
    with open(os.path.join(os.environ['OUT'], name), 'w') as fh:
        json.dump(result.as_dict(), fh, indent=2, sort_keys=True)
" ; echo "preflight rc=$?" >> "$OUT/rc.txt"
cat "$OUT/rc.txt"
