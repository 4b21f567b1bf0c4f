-- Stage 3, after its last pass: the pairs of distinct fingerprints as one table. Every pass
-- added its own files to the folder (each COPY names its files afresh); the table is declared
-- only now because a table lists its files once, when it is created.

CREATE EXTERNAL TABLE fingerprint_pairs STORED AS PARQUET LOCATION ${fingerprint_pairs_dir};
