#!/usr/bin/env bash
# ncu's metric catalog of each chip (issue 20's per-chip maps), from the repo root on the device machine:
#   plain mode  `ncu --query-metrics --chip X --csv`: every metric of the chip with its type, unit and description;
#   suffix mode `ncu --query-metrics --chip X --query-metrics-mode suffix --metrics <list> --csv`: every full name
#               (`.sum`, `.sum.peak_sustained`, ...) of the tensor, cycle, DRAM-byte and FP-instruction counters
#               (ncu refuses suffix mode without --metrics, so the list is taken from the plain dump).
# Needs no GPU work. Writes $OUT/ncu_catalogs.tar.gz; perfreport/ncu/catalog/chips/README.md says what was kept.
set -eu
NCU=${NCU:-/usr/local/cuda/bin/ncu}
CHIPS=${CHIPS:-"gh100 gb100 gb102 gb110 gb10b gb202 gb203 gb205 gb206 gb207 gb20b"}
W=/tmp/ncu_catalogs; rm -rf $W; mkdir -p $W
$NCU --version > $W/ncu_version.txt
$NCU --list-chips > $W/chips.txt
for chip in $CHIPS; do
  $NCU --query-metrics --chip "$chip" --csv > "$W/metrics_$chip.csv"
  names=$(python3 - "$W/metrics_$chip.csv" <<'PY'
import csv, re, sys
prefixes = ("sm__ops_path_tensor", "sm__inst_executed_pipe_tensor", "sm__pipe_tensor", "sm__cycles_elapsed",
            "dram__bytes")
with open(sys.argv[1], newline="") as f:
    rows = list(csv.reader(f))[1:]
print(",".join(r[0] for r in rows
               if r[0].startswith(prefixes) or re.fullmatch(r"sm__sass_thread_inst_executed_op_\w*pred_on", r[0])))
PY
)
  $NCU --query-metrics --chip "$chip" --query-metrics-mode suffix --metrics "$names" --csv \
    > "$W/metrics_${chip}_suffix.csv"
done
gzip -9n $W/*.csv
ls -la $W
tar -C /tmp -czf "$OUT/ncu_catalogs.tar.gz" ncu_catalogs
