-- Stage 3, strategy `join`: pairs of distinct fingerprints within distance ${k} by a self-join
-- on each table's key of the band plan ${plan}, over tables ${band_from} to ${band_to} - 1 per
-- pass.
--
-- Two fingerprints within distance ${k} share the key of at least one table (src/plan.rs proves
-- it for each plan). Each pair is taken from the first table it shares (`shared_band`), so it
-- appears once even when it shares several; the Hamming filter sits inside the join, so
-- candidates that fail it are never materialised. Simple and portable, but a hash join's cost per
-- candidate grows with the rows sharing a key.

CREATE OR REPLACE VIEW band_keys AS
SELECT simhash, band, band_key(simhash, band, ${plan}) AS band_key
FROM (SELECT unnest(range(${band_from}, ${band_to})) AS band) AS tables CROSS JOIN fingerprints;

COPY (
    SELECT a.simhash AS simhash_a, b.simhash AS simhash_b, hamming(a.simhash, b.simhash) AS distance
    FROM band_keys a JOIN band_keys b
      ON a.band = b.band
     AND a.band_key = b.band_key
     AND a.simhash < b.simhash
     AND hamming(a.simhash, b.simhash) <= ${k}
     AND shared_band(a.simhash, b.simhash, ${plan}) = a.band
) TO ${candidate_pairs_dir} STORED AS PARQUET ${work_table_options};
