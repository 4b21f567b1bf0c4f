-- Stage 2: candidates and pairs.
--
-- Identical fingerprints collapse to one row before the band join: a thousand copies of a page
-- (or of a template) are one fingerprint here, not half a million candidate rows.

CREATE VIEW fingerprints AS
SELECT simhash, bucket1, bucket2, bucket3, bucket4
FROM signatures
WHERE simhash IS NOT NULL
GROUP BY simhash, bucket1, bucket2, bucket3, bucket4;

-- Pairs of distinct fingerprints within distance ${k}. Two fingerprints within distance 3
-- share at least one of the four bands (pigeonhole). Each pair is taken from the first band it
-- shares, so it appears once even when it shares several; the Hamming filter sits inside the
-- join, so candidates that fail it are never materialised.
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

-- Document pairs: the documents behind each fingerprint pair, and every two documents that
-- share a fingerprint (distance 0). One row per unordered pair, id_a < id_b.
COPY (
    SELECT CASE WHEN x.id < y.id THEN x.id ELSE y.id END AS id_a,
           CASE WHEN x.id < y.id THEN y.id ELSE x.id END AS id_b,
           p.distance AS distance
    FROM fingerprint_pairs p
    JOIN signatures x ON x.simhash = p.simhash_a
    JOIN signatures y ON y.simhash = p.simhash_b
    UNION ALL
    SELECT x.id AS id_a, y.id AS id_b, arrow_cast(0, 'UInt8') AS distance
    FROM signatures x
    JOIN signatures y ON x.simhash = y.simhash AND x.id < y.id
    ORDER BY id_a, id_b
) TO ${pairs_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE pairs STORED AS PARQUET LOCATION ${pairs_dir};
