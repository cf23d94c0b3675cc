#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: a --set basic report of N kernel launches and its raw CSV
# (ncu --import). N=2016 first; if its gzipped report is over 12 MB (what a fixture may weigh here), N=504 instead.
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
O=$OUT/many; mkdir -p $O
cd tests/data/h200_oracle/many
capture() {
  rm -f $O/many_basic*
  ( time timeout 400 $NCU --profile-from-start off --set basic --clock-control none -f -o $O/many_basic \
      python3 many_kernels.py $1 ) > $O/many_basic.log 2>&1
  echo "rc=$? N=$1" >> $O/many_basic.log
  $NCU --import $O/many_basic.ncu-rep --csv --page raw > $O/many_basic-raw.csv 2>> $O/many_basic.log
  ls -la $O >> $O/many_basic.log
  gzip -9 $O/many_basic.ncu-rep; gzip -9 $O/many_basic-raw.csv
}
capture ${N:-2016}
if [ $(stat -c %s $O/many_basic.ncu-rep.gz) -gt 12000000 ]; then capture 504; fi
ls -la $O; tail -8 $O/many_basic.log
