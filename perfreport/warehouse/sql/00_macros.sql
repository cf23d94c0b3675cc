-- Helpers for the views (the files of perfreport/warehouse/sql/ run in sorted name order, so these come first).

-- Mean of x weighted by w over a group. A group of one row keeps its own value unchanged (a kernel seen once
-- shows exactly its ncu_kernels.json value); NULL when a row lacks x or w (a partial mean would mislead).
CREATE OR REPLACE MACRO wmean(x, w) AS
    CASE WHEN count(*) = 1 THEN any_value(x)
         WHEN count(x * w) = count(*) THEN sum(x * w) / nullif(sum(w), 0) END;

-- The group's value when its rows agree, else the distinct values sorted and joined with ','.
CREATE OR REPLACE MACRO same_or_list(x) AS
    CASE WHEN count(DISTINCT x) <= 1 THEN min(x) ELSE string_agg(DISTINCT x, ',' ORDER BY x) END;

-- Richness of an ncu section set: lower is richer (full > roofline > detailed > basic > unknown).
CREATE OR REPLACE MACRO ncu_set_rank(section_set) AS
    CASE section_set WHEN 'full' THEN 1 WHEN 'roofline' THEN 2 WHEN 'detailed' THEN 3 WHEN 'basic' THEN 4
                     ELSE 5 END;

-- The tool behind a kernel_times source, from its format (else its id): 'nsys', 'torch', or the format itself.
CREATE OR REPLACE MACRO timeline_tool(source_format, source) AS
    CASE WHEN lower(coalesce(source_format, '') || ' ' || source) LIKE '%nsys%' THEN 'nsys'
         WHEN lower(coalesce(source_format, '') || ' ' || source) LIKE '%torch%' THEN 'torch'
         ELSE coalesce(source_format, 'unknown') END;
