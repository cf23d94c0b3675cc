-- amdahl_cells: one row per cell of config.yaml: how much of its timeline could come back if every kernel
-- with a measured %SoL reached its roof (amdahl_bound_pct, the sum over kernels), how much of the timeline
-- that covers (timed_with_sol_pct) and how much has no %SoL (timed_without_sol_pct: not captured by ncu, or
-- captured with a set that has no roof). max_speedup = 100 / (100 - amdahl_bound_pct) is the kernel-time
-- speedup ceiling. NULLs for a cell without a timeline.
CREATE OR REPLACE VIEW amdahl_cells AS
SELECT
    c.cell_id,
    any_value(j.time_source) AS time_source,
    count(j.time_share_pct) AS kernels_timed,
    count(j.amdahl_bound_pct) AS kernels_with_sol,
    sum(j.time_share_pct) FILTER (WHERE j.sol_pct IS NOT NULL) AS timed_with_sol_pct,
    sum(j.time_share_pct) FILTER (WHERE j.sol_pct IS NULL) AS timed_without_sol_pct,
    sum(j.amdahl_bound_pct) AS amdahl_bound_pct,
    sum(j.amdahl_bound_ms) AS amdahl_bound_ms,
    100 / nullif(100 - sum(j.amdahl_bound_pct), 0) AS max_speedup
FROM cells c
LEFT JOIN kernel_join j ON j.cell_id = c.cell_id
GROUP BY c.cell_id, c.position
ORDER BY c.position;
