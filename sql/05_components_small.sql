-- The second half of a round of sql/05_components_start.sql. Small-star: each node with
-- smaller neighbours links itself and them to the smallest one (the COALESCE: see the round's
-- large-star).

CREATE OR REPLACE VIEW smaller AS
SELECT u, v
FROM (SELECT a AS u, b AS v FROM large_in UNION ALL SELECT b AS u, a AS v FROM large_in)
WHERE v < u;

COPY (
    SELECT DISTINCT COALESCE(s.m, s.u) AS a, x.v AS b
    FROM (SELECT u, min(v) AS m FROM smaller GROUP BY u) s
    JOIN (SELECT u, v FROM smaller UNION ALL SELECT DISTINCT u, u AS v FROM smaller) x
      ON x.u = s.u
    WHERE x.v <> COALESCE(s.m, s.u)
) TO ${edges_out_dir} STORED AS PARQUET ${work_table_options};
