-- amdahl_ranking: per cell, the kernels with an Amdahl bound ranked by it (largest first), with the running
-- total: "the top 3 kernels could give back at most cum_bound_pct % of the timeline".
CREATE OR REPLACE VIEW amdahl_ranking AS
SELECT
    cell_id,
    row_number() OVER w AS rank,
    label,
    function,
    name,
    time_share_pct,
    sol_pct,
    sol_ceiling_key,
    pct_of_achievable,
    amdahl_ceiling_key,
    amdahl_basis,
    bound,
    amdahl_bound_pct,
    amdahl_bound_ms,
    sum(amdahl_bound_pct) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum_bound_pct
FROM kernel_join
WHERE amdahl_bound_pct IS NOT NULL
WINDOW w AS (PARTITION BY cell_id ORDER BY amdahl_bound_pct DESC, label);
