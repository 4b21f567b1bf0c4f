-- Stage 4 in this process: verification (what sql/04_verify.sql says, with the same rows). The
-- sketches of the candidates' fingerprints (those sql/04_verify_sketches.sql's
-- `candidate_sketches` gives, read from sql/04_verify_candidate_fingerprints.sql and
-- sql/04_verify_document_sketches.sql) are held in memory by src/job/verify.rs, and
-- `candidate_similarity(simhash_a, simhash_b)` looks both up for each candidate pair. The joins of sql/04_verify.sql copy each pair's two 256-byte sketches through
-- every operator after them, which at tens of millions of candidates was most of the stage.

COPY (
    SELECT simhash_a, simhash_b, distance, similarity
    FROM (
        SELECT simhash_a, simhash_b, distance,
               candidate_similarity(simhash_a, simhash_b) AS similarity
        FROM candidate_pairs
    )
    WHERE NOT ${verify} OR similarity >= ${min_similarity}
) TO ${fingerprint_pairs_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE fingerprint_pairs STORED AS PARQUET LOCATION ${fingerprint_pairs_dir};
