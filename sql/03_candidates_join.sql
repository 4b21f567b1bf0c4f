-- Stage 3, strategy `join`: pairs of distinct fingerprints within distance ${k} by a self-join
-- on each band.
--
-- Two fingerprints within distance 3 share at least one of the four bands (pigeonhole). Each
-- pair is taken from the first band it shares, so it appears once even when it shares several;
-- the Hamming filter sits inside the join, so candidates that fail it are never materialised.
-- Simple and portable, but a hash join's cost per candidate grows with the rows sharing a key.

COPY (
    SELECT a.simhash AS simhash_a, b.simhash AS simhash_b, hamming(a.simhash, b.simhash) AS distance
    FROM fingerprints a JOIN fingerprints b
      ON a.bucket1 = b.bucket1
     AND a.simhash < b.simhash
     AND hamming(a.simhash, b.simhash) <= ${k}
    UNION ALL
    SELECT a.simhash, b.simhash, hamming(a.simhash, b.simhash)
    FROM fingerprints a JOIN fingerprints b
      ON a.bucket2 = b.bucket2
     AND a.simhash < b.simhash
     AND a.bucket1 <> b.bucket1
     AND hamming(a.simhash, b.simhash) <= ${k}
    UNION ALL
    SELECT a.simhash, b.simhash, hamming(a.simhash, b.simhash)
    FROM fingerprints a JOIN fingerprints b
      ON a.bucket3 = b.bucket3
     AND a.simhash < b.simhash
     AND a.bucket1 <> b.bucket1 AND a.bucket2 <> b.bucket2
     AND hamming(a.simhash, b.simhash) <= ${k}
    UNION ALL
    SELECT a.simhash, b.simhash, hamming(a.simhash, b.simhash)
    FROM fingerprints a JOIN fingerprints b
      ON a.bucket4 = b.bucket4
     AND a.simhash < b.simhash
     AND a.bucket1 <> b.bucket1 AND a.bucket2 <> b.bucket2 AND a.bucket3 <> b.bucket3
     AND hamming(a.simhash, b.simhash) <= ${k}
) TO ${fingerprint_pairs_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE fingerprint_pairs STORED AS PARQUET LOCATION ${fingerprint_pairs_dir};
