-- kernel_join: one row per piece of work seen by any source of the cell: ncu (kernel_ncu rows), the cell's
-- timeline (kernel_times) and the cell's sampling profiler (kernel_samples), joined on the kernel key
-- (warehouse/db.py assign_kernel_keys). A FULL OUTER join (all keys of the three, then LEFT JOINs): a kernel
-- missing from a source keeps its row with that source's columns NULL; matched_sources lists which saw it
-- ('ncu', 'times', 'samples', in that order).
-- A key ncu split into several rows (kernel_ncu `parts`) takes its time share, time and instances part by part from
-- the op/shape rows of a trace recorded with shapes (kernel_times `op`, `shapes`) where pairing each part with the
-- row whose useful FLOPs per launch are nearest its executed ones is one to one: share_split = 'op shapes', exact.
-- Otherwise each part gets the key's share in proportion to its ncu time (launches x duration): share_split =
-- 'ncu time', an estimate. Samples count a key as a whole: always split by ncu time. op, shapes: the launching op
-- and its input shapes of the time row(s) a row stands for ('; '-joined by time where several).
-- A cell uses ONE timeline source so its time shares add up to 100%: nsys before torch before other tools, then a
-- source with op/shape rows before one without, then an unnumbered file before the trials (--trial N) and trial 1
-- first, then by source id (time_source says which tool, time_source_id which file); samples likewise by trial and
-- source id. Every trial's numbers are in kernel_trials (25_kernel_trials.sql).
-- executed_per_useful: the FLOPs ncu counted per launch over the FLOPs the op needed (useful_flops, from a trace
-- recorded with shapes): 1 for a GEMM that pads nothing, ~16 for decode attention computing 16-row tiles for one
-- query row; NULL without shapes (unknown, never 1).
-- Amdahl bound: amdahl_bound_pct = time_share_pct x the fraction of its time the kernel could give back by
-- reaching its floor (amdahl_basis says which): a launch-bound kernel ('latency') down to the measured launch floor
-- x its launches (table launch_floor; without one the whole time, an upper bound), any other down to its roof:
-- 1 - clamp(pct / 100, 0, 1) with the measured (achievable) roof where one is measured for this hardware
-- (pct_of_achievable: a kernel at it gives back nothing), else the datasheet one (sol_pct); amdahl_ceiling_key
-- names it. A kernel that ran above its measured roof (ceiling_exceeded holds achievable_key: that ceiling is to be
-- re-measured) is at it: it gives back nothing, rather than being scored on the datasheet roof it cannot reach.
-- NULL when the time share or both percentages are unknown. frontier.candidates ranks by this column.
CREATE OR REPLACE VIEW kernel_join AS
WITH
time_pick AS (
    SELECT cell_id, source, timeline_tool(source_format, source) AS tool
    FROM (SELECT cell_id, source, any_value(source_format) AS source_format, bool_or(op IS NOT NULL) AS has_ops,
                 any_value(trial) AS trial
          FROM kernel_times GROUP BY cell_id, source)
    QUALIFY row_number() OVER (
        PARTITION BY cell_id
        ORDER BY CASE timeline_tool(source_format, source) WHEN 'nsys' THEN 1 WHEN 'torch' THEN 2 ELSE 3 END,
                 has_ops DESC, trial NULLS FIRST, source
    ) = 1
),
time_rows AS (  -- the chosen source's rows: one per kernel name, or per name, op and shapes (time_row 1.. by time)
    SELECT t.cell_id, t.kernel, t.function, t.label, t.name, t.op, t.shapes, t.instances, t.total_ns, t.share_pct,
           t.source, p.tool,
           CASE WHEN len(t.useful_flops) = 1 THEN t.useful_flops[1] END AS useful_per_launch,
           row_number() OVER (PARTITION BY t.cell_id, t.kernel
                              ORDER BY t.total_ns DESC, t.name, t.op, t.shapes) AS time_row,
           count(*) OVER (PARTITION BY t.cell_id, t.kernel) AS time_rows
    FROM kernel_times t
    JOIN time_pick p ON p.cell_id = t.cell_id AND p.source = t.source
),
times AS (
    SELECT cell_id, kernel, any_value(function) AS function, min(label) AS label,
           any_value(tool) AS time_source,
           any_value(source) AS time_source_id,
           arg_max(name, (coalesce(total_ns, 0), name)) AS name,
           sum(instances)::BIGINT AS instances,
           sum(total_ns) / 1e6 AS total_ms,
           sum(share_pct) AS time_share_pct,
           CASE WHEN count(DISTINCT op) <= 1 THEN min(op) ELSE string_agg(op, '; ' ORDER BY time_row) END AS op,
           string_agg(shapes, '; ' ORDER BY time_row) AS shapes
    FROM time_rows
    GROUP BY cell_id, kernel
),
useful AS (  -- from every timeline source of the cell that recorded shapes, not only the one picked for shares
    SELECT cell_id, kernel, list_sort(list_distinct(flatten(list(useful_flops)))) AS useful_flops
    FROM kernel_times
    WHERE useful_flops IS NOT NULL
    GROUP BY cell_id, kernel
),
sample_pick AS (
    SELECT cell_id, source FROM kernel_samples
    QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY trial NULLS FIRST, source) = 1
),
samples AS (
    SELECT s.cell_id, s.kernel, any_value(s.function) AS function, min(s.label) AS label,
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
nearest AS (  -- each part of a split key: the time row whose useful FLOPs per launch are nearest its executed ones
    SELECT n.cell_id, n.kernel, n.part, n.parts,
           arg_min(r.time_row, (abs(ln(r.useful_per_launch / n.flops_total)), r.time_row)) AS time_row
    FROM ncu n
    JOIN time_rows r ON r.cell_id = n.cell_id AND r.kernel = n.kernel
    WHERE n.parts > 1 AND r.time_rows = n.parts AND n.flops_total > 0 AND r.useful_per_launch > 0
    GROUP BY n.cell_id, n.kernel, n.part, n.parts
),
paired AS (  -- keys whose every part found a row of its own: parts and op/shape rows one to one
    SELECT cell_id, kernel FROM nearest GROUP BY cell_id, kernel
    HAVING count(*) = any_value(parts) AND count(DISTINCT time_row) = count(*)
),
op_match AS (
    SELECT m.cell_id, m.kernel, m.part, r.op, r.shapes, r.instances, r.total_ns / 1e6 AS total_ms, r.share_pct,
           r.useful_per_launch
    FROM nearest m
    JOIN paired p ON p.cell_id = m.cell_id AND p.kernel = m.kernel
    JOIN time_rows r ON r.cell_id = m.cell_id AND r.kernel = m.kernel AND r.time_row = m.time_row
),
joined AS (
    SELECT
        k.cell_id,
        k.kernel,
        n.part,
        coalesce(n.label, t.label, s.label, k.kernel) AS label,
        coalesce(n.function, t.function, s.function) AS function,
        coalesce(n.name, t.name, s.name) AS name,
        concat_ws(',', CASE WHEN n.cell_id IS NOT NULL THEN 'ncu' END,
                       CASE WHEN t.cell_id IS NOT NULL THEN 'times' END,
                       CASE WHEN s.cell_id IS NOT NULL THEN 'samples' END) AS matched_sources,
        coalesce(o.share_pct, t.time_share_pct * coalesce(n.share_fraction, 1)) AS time_share_pct,
        coalesce(o.total_ms, t.total_ms * coalesce(n.share_fraction, 1)) AS total_ms,
        coalesce(o.instances, t.instances) AS instances, t.time_source, t.time_source_id,
        CASE WHEN o.cell_id IS NOT NULL THEN o.op ELSE t.op END AS op,
        CASE WHEN o.cell_id IS NOT NULL THEN o.shapes ELSE t.shapes END AS shapes,
        s.sample_share_pct * coalesce(n.share_fraction, 1) AS sample_share_pct,
        s.samples, s.sample_source,
        CASE WHEN o.cell_id IS NOT NULL THEN 'op shapes'
             WHEN n.parts > 1 AND (t.cell_id IS NOT NULL OR s.cell_id IS NOT NULL) THEN 'ncu time' END
            AS share_split,
        n.ncu_source, n.section_set, n.kernel_id, n.vendor, n.launches AS ncu_launches,
        n.duration_ns AS ncu_duration_ns, n.family, n.bound, n.sol_pct, n.sol_ceiling_key,
        n.pct_of_achievable, n.achievable_key, n.ceiling_exceeded, n.above_achievable,
        -- useful FLOPs per launch (a trace recorded with shapes): the matched op/shape row's, else the value nearest
        -- the row's executed FLOPs, so a key whose launches did different work (parts) meets its own shape;
        -- executed / useful = padding factor
        CASE WHEN o.useful_per_launch IS NOT NULL THEN o.useful_per_launch
             WHEN n.flops_total > 0 AND len(u.useful_flops) > 0
             THEN list_sort(list_transform(u.useful_flops,
                                           lambda x: struct_pack(d := abs(ln(x / n.flops_total)), v := x)))[1].v
        END AS useful_flops,
        CASE WHEN n.pct_of_achievable IS NOT NULL OR n.above_achievable THEN n.achievable_key
             WHEN n.sol_pct IS NOT NULL THEN n.sol_ceiling_key END AS amdahl_ceiling_key,
        n.arithmetic_intensity, n.ai_measured, n.dram_throughput_pct, n.sm_throughput_pct, n.flops_total AS ncu_flops,
        n.achieved_occupancy_pct,
        -- explicit NULL: DuckDB's least/greatest skip NULL arguments (greatest(NULL, 0) is 0)
        CASE WHEN n.bound = 'latency' AND t.total_ms > 0 AND f.floor_us IS NOT NULL
             THEN greatest(1 - coalesce(o.instances, t.instances) * f.floor_us / 1000
                               / coalesce(o.total_ms, t.total_ms), 0)
             WHEN n.bound = 'latency' AND t.total_ms > 0 THEN 1
             WHEN n.above_achievable THEN 0
             WHEN coalesce(n.pct_of_achievable, n.sol_pct) IS NOT NULL
             THEN 1 - least(greatest(coalesce(n.pct_of_achievable, n.sol_pct) / 100, 0), 1) END AS saving_fraction,
        CASE WHEN n.bound = 'latency' AND t.total_ms > 0 AND f.floor_us IS NOT NULL
             THEN 'launch floor (' || f.key || ': ' || f.floor_us || ' us x ' || coalesce(o.instances, t.instances)
                  || ' launches)'
             WHEN n.bound = 'latency' AND t.total_ms > 0
             THEN 'launch floor, not measured on this hardware: the whole time, an upper bound'
             WHEN n.above_achievable THEN 'above the achievable roof'
             WHEN n.pct_of_achievable IS NOT NULL THEN 'achievable roof'
             WHEN n.sol_pct IS NOT NULL THEN 'datasheet roof' END AS amdahl_basis
    FROM keys k
    LEFT JOIN ncu n ON n.cell_id = k.cell_id AND n.kernel = k.kernel
    LEFT JOIN times t ON t.cell_id = k.cell_id AND t.kernel = k.kernel
    LEFT JOIN op_match o ON o.cell_id = n.cell_id AND o.kernel = n.kernel AND o.part = n.part
    LEFT JOIN samples s ON s.cell_id = k.cell_id AND s.kernel = k.kernel
    LEFT JOIN useful u ON u.cell_id = k.cell_id AND u.kernel = k.kernel
    LEFT JOIN launch_floor f ON f.hardware = (SELECT any_value(hardware) FROM cells)
)
SELECT * EXCLUDE (saving_fraction),
       CASE WHEN useful_flops > 0 THEN ncu_flops / useful_flops END AS executed_per_useful,
       time_share_pct * saving_fraction AS amdahl_bound_pct,
       total_ms * saving_fraction AS amdahl_bound_ms
FROM joined;
