-- Stage 2 in this process: the table sql/02_fingerprints.sql writes, from `fingerprint_counts`
-- (simhash, document_count), each distinct fingerprint with its documents, which
-- src/job/fingerprint_counts.rs counted by sorting and holds in memory while this runs.

COPY (
    SELECT simhash, document_count, true AS fresh
    FROM fingerprint_counts
) TO ${fingerprints_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE fingerprints STORED AS PARQUET LOCATION ${fingerprints_dir};
