-- Stage 4: document pairs, written in this process: the same rows as sql/04_pairs.sql, or with
-- `--pairs star` sql/04_pairs_star.sql (see there for what they are), found without their joins.
-- `expanded_pairs` is a table of src/job/document_pairs.rs, which holds `paired_documents` by
-- fingerprint and lists, for each fingerprint pair, its two fingerprints' documents against each
-- other (star: their heads), then every two documents of one fingerprint (star: each with its
-- head). The joins copied each id three times before the writer (out of two joins and through
-- least / greatest), and took about half of the statement's CPU at a million generated documents
-- (docs/BENCHMARKS.md).

COPY (
    SELECT id_a, id_b, distance, similarity
    FROM expanded_pairs
-- zstd at level 1, as sql/04_pairs.sql writes it.
) TO ${pairs_dir} STORED AS PARQUET OPTIONS ('format.compression' 'zstd(1)');

CREATE EXTERNAL TABLE pairs STORED AS PARQUET LOCATION ${pairs_dir};
