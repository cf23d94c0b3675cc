-- kernel_ncu: one row per (cell_id, function) from the richest ncu source that saw the function
-- (section set full > roofline > detailed > basic, then by source id), so --set full counters win over a
-- --set basic capture of the same cell, and a kernel only the basic capture saw still has a row.
-- Kernel rows of that source sharing a function (template instances, launch configurations) are combined:
-- launches and ncu time summed; per-launch amounts (duration, FLOPs, bytes) launch-weighted; rates and
-- percentages weighted by ncu time (launches x duration_ns); AI = total FLOPs / total DRAM bytes; registers and
-- shared memory the maximum; text fields that disagree become a sorted ',' list. A function with one kernel row
-- keeps its ncu_kernels values unchanged.
CREATE OR REPLACE VIEW kernel_ncu AS
WITH ranked AS (
    SELECT *, ncu_set_rank(section_set) AS set_rank, launches * duration_ns AS ncu_ns
    FROM ncu_kernels
),
seen AS (
    SELECT cell_id, function, string_agg(DISTINCT source, ',' ORDER BY source) AS ncu_sources
    FROM ncu_kernels
    GROUP BY cell_id, function
),
chosen AS (
    SELECT * FROM ranked
    QUALIFY dense_rank() OVER (PARTITION BY cell_id, function ORDER BY set_rank, source) = 1
)
SELECT
    c.cell_id,
    c.function,
    arg_max(c.name, (coalesce(c.ncu_ns, 0), c.name)) AS name,
    count(*) AS variants,
    any_value(c.source) AS ncu_source,
    any_value(c.section_set) AS section_set,
    any_value(s.ncu_sources) AS ncu_sources,
    same_or_list(c.family) AS family,
    sum(c.launches)::BIGINT AS launches,
    wmean(c.duration_ns, c.launches) AS duration_ns,
    sum(c.ncu_ns) AS ncu_total_ns,
    wmean(c.flops_total, c.launches) AS flops_total,
    wmean(c.dram_bytes, c.launches) AS dram_bytes,
    CASE WHEN count(*) = 1 THEN any_value(c.arithmetic_intensity)
         WHEN bool_and(c.ai_measured)
         THEN sum(c.flops_total * c.launches) / nullif(sum(c.dram_bytes * c.launches), 0) END
        AS arithmetic_intensity,
    bool_and(c.ai_measured) AS ai_measured,
    wmean(c.achieved_tflops, c.ncu_ns) AS achieved_tflops,
    wmean(c.achieved_dram_tbps, c.ncu_ns) AS achieved_dram_tbps,
    wmean(c.sol_pct, c.ncu_ns) AS sol_pct,
    same_or_list(c.sol_ceiling_key) AS sol_ceiling_key,
    wmean(c.compute_pct_of_peak, c.ncu_ns) AS compute_pct_of_peak,
    wmean(c.dram_pct_of_peak, c.ncu_ns) AS dram_pct_of_peak,
    wmean(c.sm_throughput_pct, c.ncu_ns) AS sm_throughput_pct,
    wmean(c.dram_throughput_pct, c.ncu_ns) AS dram_throughput_pct,
    wmean(c.memory_throughput_pct, c.ncu_ns) AS memory_throughput_pct,
    wmean(c.achieved_occupancy_pct, c.ncu_ns) AS achieved_occupancy_pct,
    wmean(c.theoretical_occupancy_pct, c.ncu_ns) AS theoretical_occupancy_pct,
    max(c.regs_per_thread) AS regs_per_thread,
    max(c.smem_per_block_bytes) AS smem_per_block_bytes,
    same_or_list(c.block_limit_factor) AS block_limit_factor,
    wmean(c.branch_divergence_pct, c.ncu_ns) AS branch_divergence_pct,
    same_or_list(c.tensor_dtype) AS tensor_dtype,
    same_or_list(c.bound) AS bound,
    CASE WHEN count(*) = 1 THEN any_value(c.bound_reason)
         ELSE string_agg(DISTINCT c.bound_reason, '; ' ORDER BY c.bound_reason) END AS bound_reason
FROM chosen c
JOIN seen s ON s.cell_id = c.cell_id AND s.function = c.function
GROUP BY c.cell_id, c.function;
