-- Stage 3, after its last pass: the candidate pairs of distinct fingerprints (within k) as one
-- table, which verification checks (sql/04_verify_sketches.sql). Every pass added its own files
-- to the folder (each COPY names its files afresh); the table is declared only now because a
-- table lists its files once, when it is created.

CREATE EXTERNAL TABLE candidate_pairs STORED AS PARQUET LOCATION ${candidate_pairs_dir};
