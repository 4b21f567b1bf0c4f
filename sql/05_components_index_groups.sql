-- Stage 5 against an index: the indexed groups that this batch's fingerprints belong to, as
-- `index_memberships (simhash, group_id)`. Both clusterings connect each such group with the
-- fingerprints in it (union-find in src/job/clustering/union_find.rs,
-- sql/05_components_index_start.sql in SQL), so a new document that matches one member joins
-- the whole group without reading all of its members. Written once: computing it scans the
-- whole index.

COPY (
    SELECT DISTINCT d.simhash, g.group_id
    FROM index_documents d
    JOIN index_groups g ON d.id = g.id
    WHERE d.simhash IN (
        SELECT simhash_a FROM fingerprint_pairs
        UNION ALL SELECT simhash_b FROM fingerprint_pairs
        UNION ALL SELECT simhash FROM documents WHERE fresh
    )
) TO ${memberships_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE index_memberships STORED AS PARQUET LOCATION ${memberships_dir};
