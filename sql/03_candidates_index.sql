-- Stage 3 against an index, strategy `scan` (the default): pairs within distance ${k} that
-- involve a fresh fingerprint (one a document of this batch has), over tables ${band_from} to
-- ${band_to} - 1 of the band plan ${plan}.
--
-- As sql/03_candidates_scan.sql, with `fresh` passed to `band_pairs`: each group of rows is
-- sorted by the table's bits as before (the index is scanned and sorted, which grows with it),
-- but inside a run of equal keys only pairs with a fresh member are compared, and runs without
-- one are skipped, so the comparisons grow with the batch, not with the index squared.

CREATE OR REPLACE VIEW band_rows AS
SELECT simhash, fresh, band
FROM (SELECT unnest(range(${band_from}, ${band_to})) AS band) AS tables CROSS JOIN fingerprints;

COPY (
    SELECT pair['simhash_a'] AS simhash_a,
           pair['simhash_b'] AS simhash_b,
           hamming(pair['simhash_a'], pair['simhash_b']) AS distance
    FROM (
        SELECT unnest(pairs) AS pair
        FROM (
            SELECT band_pairs(simhash, band, ${k}, ${plan}, fresh) AS pairs
            FROM band_rows
            GROUP BY band, band_key(simhash, band, ${plan}) % arrow_cast(256, 'UInt64')
        )
    )
) TO ${candidate_pairs_dir} STORED AS PARQUET ${work_table_options};
