"""`ceilings measure`: achievable ceilings measured on the GPU host, written as a sol-ceilings override.

measure (the verb), bench (GPU side, torch imported lazily), smi (nvidia-smi samples beside it), override (raw
record -> validated override YAML). Outputs in the --out folder: ceilings_raw.json (every sample, deterministic key
order), ceilings_override.yaml (`hardware.<hw>.empirical`), nvidia-smi.csv (the clock and power samples).
"""
