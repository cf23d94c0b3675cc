-- unmatched_kernels: a kernel a cell's source saw that another source of the same cell did not; one row per
-- (cell_id, label, missing_from). Only sources the cell has data for count (a cell without
-- kernel_samples.json reports nothing as missing from 'samples'). Side names: 'ncu', 'times', 'samples'.
CREATE OR REPLACE VIEW unmatched_kernels AS
WITH present AS (
    SELECT cell_id,
           bool_or(ncu_source IS NOT NULL) AS has_ncu,
           bool_or(time_source IS NOT NULL) AS has_times,
           bool_or(sample_source IS NOT NULL) AS has_samples
    FROM kernel_join
    GROUP BY cell_id
),
sides AS (
    SELECT cell_id, 'ncu' AS side FROM present WHERE has_ncu
    UNION ALL SELECT cell_id, 'times' FROM present WHERE has_times
    UNION ALL SELECT cell_id, 'samples' FROM present WHERE has_samples
)
SELECT
    j.cell_id,
    j.label,
    j.function,
    j.name,
    s.side AS missing_from,
    j.matched_sources AS seen_in,
    j.time_share_pct,
    j.sample_share_pct,
    j.ncu_duration_ns,
    j.ncu_launches
FROM kernel_join j
JOIN sides s ON s.cell_id = j.cell_id
WHERE NOT list_contains(string_split(j.matched_sources, ','), s.side);
