-- Stage 3, strategy `scan` (the default) where it is not found in memory (on a cluster, against
-- an index, at 128 bits, or without room in the pool; sql/03_candidates_in_memory.sql): pairs
-- of distinct fingerprints within distance ${k},
-- table by table of the band plan ${plan}, with a sort-and-scan inside each group of rows that
-- can share a key. Run once per pass over tables ${band_from} to ${band_to} - 1, so that the rows
-- held at once stay bounded whatever the number of tables. The pass's tables are a small list
-- crossed with the fingerprints, put first so that the join holds the list and streams the rest
-- (cheaper than a per-row `range` unnested).
--
-- A band plan (src/plan.rs) is a list of tables, each a set of the fingerprint's bits; the plan
-- is chosen so that two fingerprints within distance ${k} agree on all the bits of at least one
-- table (the default, four 16-bit bands, by pigeonhole for k <= 3). Every fingerprint appears
-- once per table; the rows are grouped by table and a slice of the table's key (256 groups per
-- table: a group of 100M fingerprints is 3 MB, so its sort stays in a core's cache, and a
-- cluster can spread a table over as many tasks);
-- `band_pairs` sorts each group by the table's bits, compares the fingerprints of each run of
-- equal values with one popcount, and keeps a pair only in the first table it shares, so every
-- pair is found exactly once. Only the pairs leave the aggregate.

CREATE OR REPLACE VIEW band_rows AS
SELECT simhash, band
FROM (SELECT unnest(range(${band_from}, ${band_to})) AS band) AS tables CROSS JOIN fingerprints;

COPY (
    SELECT pair['simhash_a'] AS simhash_a,
           pair['simhash_b'] AS simhash_b,
           hamming(pair['simhash_a'], pair['simhash_b']) AS distance
    FROM (
        SELECT unnest(pairs) AS pair
        FROM (
            SELECT band_pairs(simhash, band, ${k}, ${plan}) AS pairs
            FROM band_rows
            GROUP BY band, band_key(simhash, band, ${plan}) % arrow_cast(256, 'UInt64')
        )
    )
) TO ${candidate_pairs_dir} STORED AS PARQUET ${work_table_options};
