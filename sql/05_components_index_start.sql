-- Connected components against an index in SQL (`--clustering sql`, and on a cluster): the
-- rounds of sql/05_components_start.sql over this batch's fingerprint pairs and the indexed
-- groups its fingerprints belong to (`index_memberships`, sql/05_components_index_groups.sql).
-- Union-find makes each such group a node; here each group becomes a star instead, from its
-- smallest member fingerprint to its others, which connects the same fingerprints and keeps
-- every node a fingerprint. sql/05_components_index_labels.sql then names the groups'
-- components.

COPY (
    SELECT simhash_a AS a, simhash_b AS b FROM fingerprint_pairs
    UNION
    SELECT s.first AS a, m.simhash AS b
    FROM index_memberships m
    JOIN (SELECT group_id, min(simhash) AS first FROM index_memberships GROUP BY group_id) s
      ON m.group_id = s.group_id
    WHERE m.simhash > s.first
) TO ${edges_out_dir} STORED AS PARQUET ${work_table_options};
