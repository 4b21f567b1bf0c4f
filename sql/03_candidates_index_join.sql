-- Stage 3 against an index, strategy `join`: pairs within distance ${k} that involve a fresh fingerprint (one a
-- document of this batch has), over tables ${band_from} to ${band_to} - 1 of the band plan ${plan}.
--
-- A hash join of the fresh fingerprints' keys (the batch: the small, build side) with every
-- fingerprint's keys (the index is scanned, not compared with itself). A fresh/fresh pair is
-- taken once (a < b); each pair from the first table it shares (`shared_band`), as in
-- sql/03_candidates_join.sql. Written as simhash_a < simhash_b, like the other strategies.

CREATE OR REPLACE VIEW band_keys AS
SELECT simhash, fresh, band, band_key(simhash, band, ${plan}) AS band_key
FROM (SELECT unnest(range(${band_from}, ${band_to})) AS band) AS tables CROSS JOIN fingerprints;

COPY (
    SELECT CASE WHEN a.simhash < b.simhash THEN a.simhash ELSE b.simhash END AS simhash_a,
           CASE WHEN a.simhash < b.simhash THEN b.simhash ELSE a.simhash END AS simhash_b,
           hamming(a.simhash, b.simhash) AS distance
    FROM (SELECT simhash, band, band_key FROM band_keys WHERE fresh) a
    JOIN band_keys b
      ON a.band = b.band
     AND a.band_key = b.band_key
     AND a.simhash <> b.simhash
     AND (NOT b.fresh OR a.simhash < b.simhash)
     AND hamming(a.simhash, b.simhash) <= ${k}
     AND shared_band(a.simhash, b.simhash, ${plan}) = a.band
) TO ${candidate_pairs_dir} STORED AS PARQUET ${work_table_options};
