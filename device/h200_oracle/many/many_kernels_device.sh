#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root, 2026-12-04: a --set basic report of N kernel launches and
# its raw CSV (ncu --import). Committed: N=150 (67 s; 20.1 MB report = 134 KB per kernel, 3.6 MB gzipped). A first
# try at N=2016 profiled ~450 kernels in 400 s (10 passes each, ~0.9 s per kernel) and was cut by the timeout.
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
O=$OUT/many; mkdir -p $O
cd tests/data/h200_oracle/many
capture() {
  rm -f $O/many_basic*
  ( time timeout 200 $NCU --profile-from-start off --set basic --clock-control none -f -o $O/many_basic \
      python3 many_kernels.py $1 ) > $O/many_basic.log 2>&1
  echo "rc=$? N=$1" >> $O/many_basic.log
  $NCU --import $O/many_basic.ncu-rep --csv --page raw > $O/many_basic-raw.csv 2>> $O/many_basic.log
  ls -la $O >> $O/many_basic.log
  gzip -9 $O/many_basic.ncu-rep; gzip -9 $O/many_basic-raw.csv
}
capture ${N:-150}
if [ $(stat -c %s $O/many_basic.ncu-rep.gz) -gt 12000000 ]; then capture 504; fi
ls -la $O; tail -8 $O/many_basic.log
