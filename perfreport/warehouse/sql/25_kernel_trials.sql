-- kernel_trials: one row per kernel key per trial of a cell: the timeline files imported with a trial number
-- (--trial N, or the cell's trials: in config.yaml) of the tool kernel_join takes the cell's time shares from, so a
-- kernel's trials are repetitions of the same measurement. ns_per_launch = total_ns / instances (a trial that
-- recorded more steps is not "slower"); share_pct is the kernel's share of that trial's kernel time. A kernel
-- absent from a trial has no row there (never a zero). warehouse/gather.py summarises these per kernel (n, mean,
-- std, median, min, 95% bootstrap CI: warehouse/stats.py).
CREATE OR REPLACE VIEW kernel_trials AS
WITH picked_tool AS (
    SELECT DISTINCT j.cell_id, j.time_source AS tool FROM kernel_join j WHERE j.time_source IS NOT NULL
)
SELECT t.cell_id, t.kernel, min(t.label) AS label, t.trial, any_value(t.source) AS source,
       sum(t.instances)::BIGINT AS instances, sum(t.total_ns) AS total_ns,
       sum(t.total_ns) / nullif(sum(t.instances), 0) AS ns_per_launch, sum(t.share_pct) AS share_pct
FROM kernel_times t
JOIN picked_tool p ON p.cell_id = t.cell_id AND p.tool = timeline_tool(t.source_format, t.source)
WHERE t.trial IS NOT NULL
GROUP BY t.cell_id, t.kernel, t.trial;

-- cell_trials: per cell and trial, the trial's total kernel time and how many kernel keys it ran.
CREATE OR REPLACE VIEW cell_trials AS
SELECT cell_id, trial, sum(total_ns) AS kernel_ns, count(*) AS kernels
FROM kernel_trials
GROUP BY cell_id, trial;
