-- Stage 2: distinct fingerprints.
--
-- Identical fingerprints collapse to one row before any band is compared: a thousand copies of a
-- page (or of a template) are one fingerprint here, not half a million candidate rows. Written
-- once, read by each band's candidate step.

COPY (
    SELECT simhash, ${bucket_names}
    FROM signatures
    WHERE simhash IS NOT NULL
    GROUP BY simhash, ${bucket_names}
) TO ${fingerprints_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE fingerprints STORED AS PARQUET LOCATION ${fingerprints_dir};
