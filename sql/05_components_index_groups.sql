-- Stage 5 against an index: the indexed groups that this batch's fingerprints belong to. Union-
-- find connects each such group with the fingerprints in it, so a new document that matches one
-- member joins the whole group without reading all of its members.

SELECT DISTINCT d.simhash, g.group_id
FROM index_documents d
JOIN index_groups g ON d.id = g.id
WHERE d.simhash IN (
    SELECT simhash_a FROM fingerprint_pairs
    UNION ALL SELECT simhash_b FROM fingerprint_pairs
    UNION ALL SELECT simhash FROM documents WHERE fresh
);
