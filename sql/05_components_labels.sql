-- Stage 5, SQL rounds, once settled: every component is a star around its smallest node, so
-- each node's label is the smallest of itself and its neighbours. The same table union-find
-- registers: `fingerprint_components (simhash, component)`.

CREATE VIEW fingerprint_components AS
SELECT u AS simhash, CASE WHEN min(v) < u THEN min(v) ELSE u END AS component
FROM (
    SELECT a AS u, b AS v FROM ${edges_after}
    UNION ALL
    SELECT b AS u, a AS v FROM ${edges_after}
)
GROUP BY u;
