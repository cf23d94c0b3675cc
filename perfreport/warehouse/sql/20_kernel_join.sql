-- kernel_join: one row per piece of work seen by any source of the cell: ncu (kernel_ncu rows), the cell's
-- timeline (kernel_times) and the cell's sampling profiler (kernel_samples), joined on the kernel key
-- (warehouse/db.py assign_kernel_keys). A FULL OUTER join (all keys of the three, then LEFT JOINs): a kernel
-- missing from a source keeps its row with that source's columns NULL; matched_sources lists which saw it
-- ('ncu', 'times', 'samples', in that order).
-- A timeline or profiler counts a kernel key as a whole; where ncu splits the key into several rows (kernel_ncu
-- `parts`), each row gets the key's time share and samples in proportion to its ncu time (launches x duration):
-- an estimate, flagged by share_split = 'ncu time'.
-- A cell uses ONE timeline source so its time shares add up to 100%: nsys before torch before other tools,
-- then by source id (time_source says which tool, time_source_id which file); samples likewise by source id.
-- executed_per_useful: the FLOPs ncu counted per launch over the FLOPs the op needed (useful_flops, from a trace
-- recorded with shapes): 1 for a GEMM that pads nothing, ~16 for decode attention computing 16-row tiles for one
-- query row; NULL without shapes (unknown, never 1).
-- Amdahl bound: amdahl_bound_pct = time_share_pct x the fraction of its time the kernel could give back by
-- reaching its floor (amdahl_basis says which): a launch-bound kernel ('latency') down to the measured launch floor
-- x its launches (table launch_floor; without one the whole time, an upper bound), any other down to its roof:
-- 1 - clamp(pct / 100, 0, 1) with the measured (achievable) roof where one is measured for this hardware
-- (pct_of_achievable: a kernel at it gives back nothing), else the datasheet one (sol_pct); amdahl_ceiling_key
-- names it. NULL when the time share or both percentages are unknown. frontier.candidates ranks by this column.
CREATE OR REPLACE VIEW kernel_join AS
WITH
time_pick AS (
    SELECT cell_id, source, timeline_tool(source_format, source) AS tool
    FROM (SELECT DISTINCT cell_id, source, source_format FROM kernel_times)
    QUALIFY row_number() OVER (
        PARTITION BY cell_id
        ORDER BY CASE timeline_tool(source_format, source) WHEN 'nsys' THEN 1 WHEN 'torch' THEN 2 ELSE 3 END,
                 source
    ) = 1
),
times AS (
    SELECT t.cell_id, t.kernel, any_value(t.function) AS function,
           any_value(p.tool) AS time_source,
           any_value(t.source) AS time_source_id,
           arg_max(t.name, (coalesce(t.total_ns, 0), t.name)) AS name,
           sum(t.instances)::BIGINT AS instances,
           sum(t.total_ns) / 1e6 AS total_ms,
           sum(t.share_pct) AS time_share_pct
    FROM kernel_times t
    JOIN time_pick p ON p.cell_id = t.cell_id AND p.source = t.source
    GROUP BY t.cell_id, t.kernel
),
useful AS (  -- from every timeline source of the cell that recorded shapes, not only the one picked for shares
    SELECT cell_id, kernel, list_sort(list_distinct(flatten(list(useful_flops)))) AS useful_flops
    FROM kernel_times
    WHERE useful_flops IS NOT NULL
    GROUP BY cell_id, kernel
),
sample_pick AS (
    SELECT cell_id, min(source) AS source FROM kernel_samples GROUP BY cell_id
),
samples AS (
    SELECT s.cell_id, s.kernel, any_value(s.function) AS function,
           any_value(s.source) AS sample_source,
           arg_max(s.name, (coalesce(s.samples, 0), s.name)) AS name,
           sum(s.samples)::BIGINT AS samples,
           sum(s.share_pct) AS sample_share_pct
    FROM kernel_samples s
    JOIN sample_pick p ON p.cell_id = s.cell_id AND p.source = s.source
    GROUP BY s.cell_id, s.kernel
),
keys AS (
    SELECT cell_id, kernel FROM kernel_ncu
    UNION SELECT cell_id, kernel FROM times
    UNION SELECT cell_id, kernel FROM samples
),
ncu AS (
    SELECT *, CASE WHEN parts > 1 THEN ncu_total_ns / nullif(sum(ncu_total_ns) OVER (PARTITION BY cell_id, kernel), 0)
                   ELSE 1 END AS share_fraction
    FROM kernel_ncu
),
joined AS (
    SELECT
        k.cell_id,
        k.kernel,
        n.part,
        coalesce(n.label, k.kernel) AS label,
        coalesce(n.function, t.function, s.function) AS function,
        coalesce(n.name, t.name, s.name) AS name,
        concat_ws(',', CASE WHEN n.cell_id IS NOT NULL THEN 'ncu' END,
                       CASE WHEN t.cell_id IS NOT NULL THEN 'times' END,
                       CASE WHEN s.cell_id IS NOT NULL THEN 'samples' END) AS matched_sources,
        t.time_share_pct * coalesce(n.share_fraction, 1) AS time_share_pct,
        t.total_ms * coalesce(n.share_fraction, 1) AS total_ms,
        t.instances, t.time_source, t.time_source_id,
        s.sample_share_pct * coalesce(n.share_fraction, 1) AS sample_share_pct,
        s.samples, s.sample_source,
        CASE WHEN n.parts > 1 AND (t.cell_id IS NOT NULL OR s.cell_id IS NOT NULL) THEN 'ncu time' END
            AS share_split,
        n.ncu_source, n.section_set, n.kernel_id, n.launches AS ncu_launches,
        n.duration_ns AS ncu_duration_ns, n.family, n.bound, n.sol_pct, n.sol_ceiling_key,
        n.pct_of_achievable, n.achievable_key,
        -- useful FLOPs per launch (a trace recorded with shapes): the value nearest the row's executed FLOPs, so a
        -- key whose launches did different work (parts) meets its own shape; executed / useful = padding factor
        CASE WHEN n.flops_total > 0 AND len(u.useful_flops) > 0
             THEN list_sort(list_transform(u.useful_flops,
                                           lambda x: struct_pack(d := abs(ln(x / n.flops_total)), v := x)))[1].v
        END AS useful_flops,
        CASE WHEN n.pct_of_achievable IS NOT NULL THEN n.achievable_key
             WHEN n.sol_pct IS NOT NULL THEN n.sol_ceiling_key END AS amdahl_ceiling_key,
        n.arithmetic_intensity, n.ai_measured, n.dram_throughput_pct, n.sm_throughput_pct, n.flops_total AS ncu_flops,
        n.achieved_occupancy_pct,
        -- explicit NULL: DuckDB's least/greatest skip NULL arguments (greatest(NULL, 0) is 0)
        CASE WHEN n.bound = 'latency' AND t.total_ms > 0 AND f.floor_us IS NOT NULL
             THEN greatest(1 - t.instances * f.floor_us / 1000 / t.total_ms, 0)
             WHEN n.bound = 'latency' AND t.total_ms > 0 THEN 1
             WHEN coalesce(n.pct_of_achievable, n.sol_pct) IS NOT NULL
             THEN 1 - least(greatest(coalesce(n.pct_of_achievable, n.sol_pct) / 100, 0), 1) END AS saving_fraction,
        CASE WHEN n.bound = 'latency' AND t.total_ms > 0 AND f.floor_us IS NOT NULL
             THEN 'launch floor (' || f.key || ': ' || f.floor_us || ' us x ' || t.instances || ' launches)'
             WHEN n.bound = 'latency' AND t.total_ms > 0
             THEN 'launch floor, not measured on this hardware: the whole time, an upper bound'
             WHEN n.pct_of_achievable IS NOT NULL THEN 'achievable roof'
             WHEN n.sol_pct IS NOT NULL THEN 'datasheet roof' END AS amdahl_basis
    FROM keys k
    LEFT JOIN ncu n ON n.cell_id = k.cell_id AND n.kernel = k.kernel
    LEFT JOIN times t ON t.cell_id = k.cell_id AND t.kernel = k.kernel
    LEFT JOIN samples s ON s.cell_id = k.cell_id AND s.kernel = k.kernel
    LEFT JOIN useful u ON u.cell_id = k.cell_id AND u.kernel = k.kernel
    LEFT JOIN launch_floor f ON f.hardware = (SELECT any_value(hardware) FROM cells)
)
SELECT * EXCLUDE (saving_fraction),
       CASE WHEN useful_flops > 0 THEN ncu_flops / useful_flops END AS executed_per_useful,
       time_share_pct * saving_fraction AS amdahl_bound_pct,
       total_ms * saving_fraction AS amdahl_bound_ms
FROM joined;
