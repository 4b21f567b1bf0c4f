-- Stage 2: distinct fingerprints.
--
-- Identical fingerprints collapse to one row before any band is compared: a thousand copies of a
-- page (or of a template) are one fingerprint here, not half a million candidate rows. Written
-- once, read by each band's candidate step. `document_count` counts the documents of each: only
-- those of a fingerprint several documents share can pair at distance 0 (stage 4) or form a
-- group without a fingerprint pair (stage 5), so those stages join the few, not the corpus.
--
-- A cluster groups them here. In this process src/job/fingerprint_counts.rs counts them by
-- sorting the fingerprints (sql/02_fingerprint_values.sql) and writes the same table
-- (sql/02_fingerprints_counted.sql); this grouping is what it falls back on.

COPY (
    -- Every fingerprint here is this run's (`fresh`); sql/02_fingerprints_index.sql marks which.
    SELECT simhash, count(*) AS document_count, true AS fresh
    FROM signatures
    WHERE simhash IS NOT NULL
    GROUP BY simhash
) TO ${fingerprints_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE fingerprints STORED AS PARQUET LOCATION ${fingerprints_dir};
