-- Stage 5, SQL rounds: the rounds have settled when a round gave back the edges it was given.
-- Counts the edges whose multiplicity differs between the two (one query, as each query is a
-- job on a cluster).

SELECT count(*)
FROM (
    SELECT a, b
    FROM (
        SELECT a, b, 1 AS before, 0 AS after FROM ${edges_before}
        UNION ALL
        SELECT a, b, 0 AS before, 1 AS after FROM ${edges_after}
    )
    GROUP BY a, b
    HAVING sum(before) <> sum(after)
);
