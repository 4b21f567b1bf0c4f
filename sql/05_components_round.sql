-- One round of sql/05_components_start.sql: large-star from `edges_in` to the round's large
-- folder, then small-star from there (`large_in`) to the round's edges.
-- src/job/clustering/sql_rounds.rs stops when a round changes no edge
-- (sql/05_components_settled.sql).

CREATE OR REPLACE VIEW star_neighbours AS
SELECT a AS u, b AS v FROM edges_in
UNION ALL
SELECT b AS u, a AS v FROM edges_in;

-- Large-star: each node links its larger neighbours to the smallest of itself and its
-- neighbours.
-- COALESCE: over non-null edges DataFusion 55 plans min() as non-null but runs it as nullable,
-- and refuses the plan; the COALESCE is non-null both ways (min of a non-empty group is set).
COPY (
    SELECT DISTINCT CASE WHEN COALESCE(m.m, n.u) < n.u THEN COALESCE(m.m, n.u) ELSE n.u END AS a,
                    n.v AS b
    FROM star_neighbours n
    JOIN (SELECT u, min(v) AS m FROM star_neighbours GROUP BY u) m ON n.u = m.u
    WHERE n.v > n.u
) TO ${large_out_dir} STORED AS PARQUET ${work_table_options};
