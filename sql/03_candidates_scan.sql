-- Stage 3, strategy `scan` (the default): pairs of distinct fingerprints within distance ${k},
-- band by band, with a sort-and-scan inside each group of rows that can share a band value.
--
-- Every fingerprint appears once per band. Two fingerprints within distance 3 share at least one
-- of the four bands (pigeonhole), so only rows with equal (band, band_value) need comparing. The
-- rows are grouped by band and a coarse slice of the band value (64 groups: enough to keep both
-- cores busy, few enough that no per-group overhead shows); `band_pairs` sorts each group by
-- band value, compares the fingerprints of each run of equal values with one popcount, and keeps
-- a pair only in the first band it shares, so every pair is found exactly once. Only the pairs
-- leave the aggregate.

-- One row per fingerprint and band:
--   SELECT 1 AS band, bucket1 AS band_value, simhash FROM fingerprints UNION ALL
--   SELECT 2, bucket2, simhash FROM fingerprints UNION ALL ... (4 bands of 64 bits, 8 of 128)
CREATE VIEW band_rows AS
${band_rows};

COPY (
    SELECT pair['simhash_a'] AS simhash_a,
           pair['simhash_b'] AS simhash_b,
           hamming(pair['simhash_a'], pair['simhash_b']) AS distance
    FROM (
        SELECT unnest(pairs) AS pair
        FROM (
            SELECT band_pairs(simhash, band, ${k}) AS pairs
            FROM band_rows
            GROUP BY band, band_value / 4096
        )
    )
) TO ${fingerprint_pairs_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE fingerprint_pairs STORED AS PARQUET LOCATION ${fingerprint_pairs_dir};
