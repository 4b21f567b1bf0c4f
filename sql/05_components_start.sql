-- Connected components of the fingerprint pairs in SQL, for a cluster where the pairs must not
-- be collected on one machine (`--clustering sql`, run by src/job/clustering/sql_rounds.rs;
-- locally, union-find in src/job/clustering/union_find.rs is the default and gives the same
-- table). The large-star / small-star rounds of Kiveris et al., "Connected Components in
-- MapReduce and Beyond" (SoCC 2014): every round keeps the components and pulls each node
-- closer to its component's smallest node, until every component is a star around that node
-- (O(log^2 n) rounds). Edges are kept as a < b.

COPY (
    SELECT DISTINCT simhash_a AS a, simhash_b AS b FROM fingerprint_pairs
) TO ${edges_out_dir} STORED AS PARQUET ${work_table_options};
