-- Stage 5 in this process: the members that src/job/numbered_groups.rs groups by sorting, each
-- with its fingerprint's component (what sql/05_groups.sql joins and groups).
--
-- Every paired document is a member: its fingerprint has a fingerprint pair, so union-find
-- labelled it, or several documents share it, and then it is a component of its own when it
-- has no pair (sql/04_paired_documents.sql, `grouped_fingerprints` in sql/05_groups.sql).

SELECT d.id, d.simhash, d.input_order, COALESCE(c.component, d.simhash) AS component
-- The components first: a hash join holds its first input in memory.
FROM fingerprint_components c
RIGHT JOIN paired_documents d ON d.simhash = c.simhash;
