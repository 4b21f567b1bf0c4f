-- Stage 5 against an index, SQL rounds, once settled: the two tables union-find registers for
-- sql/05_groups_index.sql, each component named by its smallest fingerprint. A member
-- fingerprint that no edge reached (its group's only one in this batch, with no pair) labels
-- itself, as union-find labels it.

CREATE VIEW fingerprint_components AS
SELECT u AS simhash, CASE WHEN min(v) < u THEN min(v) ELSE u END AS component
FROM (
    SELECT a AS u, b AS v FROM ${edges_after}
    UNION ALL
    SELECT b AS u, a AS v FROM ${edges_after}
    UNION ALL
    SELECT simhash AS u, simhash AS v FROM index_memberships
)
GROUP BY u;

-- A group's member fingerprints share one component: its star joined them.
CREATE VIEW group_components AS
SELECT DISTINCT m.group_id, c.component
FROM index_memberships m
JOIN fingerprint_components c ON m.simhash = c.simhash;
