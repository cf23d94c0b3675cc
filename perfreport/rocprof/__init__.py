"""AMD Instinct importer: rocprof-compute (formerly omniperf) workload folders -> kernel rows of the cell contract.

Stage 2 beside perfreport.ncu (never importing it): read.py reads a workload folder (sysinfo.csv, pmc_perf.csv,
timestamps.csv, roofline.csv, perfmon/ pass lists), expr.py evaluates the per-gfx counter formulas of formulas.yaml,
ceilings.py holds the datasheet (chips.yaml) and measured (roofline.csv) roofs, derive.py turns dispatches into
kernel rows, importer.py writes them into a cell's ncu_kernels.json. docs/rocprof.md describes every field.
"""
