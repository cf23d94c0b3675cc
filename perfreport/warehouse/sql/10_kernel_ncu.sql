-- kernel_ncu: one row per piece of work ncu saw in a cell: the ncu_kernels rows of the richest ncu source that
-- saw the kernel (section set full > roofline > detailed > basic, then a source with FLOP counters for it before
-- one without: the raw page of a full capture before its details page, then by source id), so --set full counters win
-- over a --set basic capture of the same cell, and a kernel only the basic capture saw still has its rows.
-- `kernel` is the join key (warehouse/db.py assign_kernel_keys: the function, or its instantiation where several
-- ran). A kernel key with several rows (launch configurations, or launches that did different work: a persistent
-- GEMM's o-proj and w2) keeps them apart; `part` numbers them by first launch (NULL when the key has one row) and
-- `parts` counts them. `label` is the row's own (ncu_kernels.json, perfreport/kernels/labels.py): the name it has
-- on every page, in the import table and in value_view.
CREATE OR REPLACE VIEW kernel_ncu AS
WITH ranked AS (
    SELECT *, ncu_set_rank(section_set) AS set_rank, launches * duration_ns AS ncu_ns,
           bool_or(flops_total IS NOT NULL) OVER (PARTITION BY cell_id, kernel, source) AS has_flops
    FROM ncu_kernels
),
seen AS (
    SELECT cell_id, kernel, string_agg(DISTINCT source, ',' ORDER BY source) AS ncu_sources
    FROM ncu_kernels
    GROUP BY cell_id, kernel
),
best AS (
    SELECT * FROM ranked
    QUALIFY dense_rank() OVER (PARTITION BY cell_id, kernel ORDER BY set_rank, NOT has_flops, source) = 1
),
chosen AS (
    SELECT *, count(*) OVER (PARTITION BY cell_id, kernel) AS parts,
           row_number() OVER (PARTITION BY cell_id, kernel ORDER BY launch_ids[1]) AS part_no
    FROM best
)
SELECT
    c.cell_id,
    c.kernel,
    CASE WHEN c.parts > 1 THEN c.part_no END AS part,
    c.parts,
    c.label,
    c.function,
    c.name,
    coalesce(c.vendor, 'nvidia') AS vendor,  -- a cell imported before the field came from ncu
    c.kernel_id,
    c.launch_ids,
    c.grid_size,
    c.block_size,
    c.source AS ncu_source,
    c.section_set,
    s.ncu_sources,
    c.family,
    c.launches::BIGINT AS launches,
    c.duration_ns,
    c.ncu_ns AS ncu_total_ns,
    c.flops_total,
    c.dram_bytes,
    c.arithmetic_intensity,
    c.ai_measured,
    c.achieved_tflops,
    c.achieved_dram_tbps,
    c.sol_pct,
    c.sol_ceiling_key,
    c.pct_of_achievable,
    c.achievable_key,
    c.ceiling_exceeded,
    -- ran above its measured roof: pct_of_achievable is null and that ceiling is to be re-measured
    coalesce(c.pct_of_achievable IS NULL AND list_contains(json_keys(c.ceiling_exceeded), c.achievable_key), false)
        AS above_achievable,
    c.compute_pct_of_peak,
    c.dram_pct_of_peak,
    c.sm_throughput_pct,
    c.dram_throughput_pct,
    c.memory_throughput_pct,
    c.achieved_occupancy_pct,
    c.theoretical_occupancy_pct,
    c.regs_per_thread,
    c.smem_per_block_bytes,
    c.block_limit_factor,
    c.branch_divergence_pct,
    c.tensor_dtype,
    c.bound,
    c.bound_reason
FROM chosen c
JOIN seen s ON s.cell_id = c.cell_id AND s.kernel = c.kernel;
