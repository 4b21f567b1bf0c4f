-- Stage 4, before the document pairs: verification. SimHash distance alone chains through
-- templated pages (short pages that share navigation fall within a few bits of each other), so
-- each candidate pair of fingerprints is checked by the estimated Jaccard similarity of the
-- two documents' feature sets, from their MinHash sketches (src/text/sketch.rs). With
-- `--verify T` (${verify} true) a pair stays when its similarity is at least T
-- (${min_similarity}); with `--verify off` every candidate stays, with its similarity shown.
--
-- This is the relational way, which a cluster runs: the sketches of the candidates'
-- fingerprints (`candidate_sketches`, sql/04_verify_sketches.sql) written as a table and joined
-- to the candidates once for each end. In this process sql/04_verify_lookup.sql gives the same
-- rows with the sketches held in memory. Writes `fingerprint_pairs`, which stages 4 and 5 read:
-- simhash_a, simhash_b, distance, similarity.

COPY (SELECT simhash, sketch FROM candidate_sketches)
TO ${sketches_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE fingerprint_sketches STORED AS PARQUET LOCATION ${sketches_dir};

-- The sketch table is the build side of both joins (it is the smaller input): the candidates
-- stream through them, and a candidate carries one sketch at a time into the second join.
COPY (
    SELECT simhash_a, simhash_b, distance, similarity
    FROM (
        SELECT x.simhash_a, x.simhash_b, x.distance,
               sketch_similarity(x.sketch, b.sketch) AS similarity
        FROM fingerprint_sketches b
        JOIN (
            SELECT c.simhash_a, c.simhash_b, c.distance, a.sketch
            FROM fingerprint_sketches a
            JOIN candidate_pairs c ON a.simhash = c.simhash_a
        ) x ON b.simhash = x.simhash_b
    )
    WHERE NOT ${verify} OR similarity >= ${min_similarity}
) TO ${fingerprint_pairs_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE fingerprint_pairs STORED AS PARQUET LOCATION ${fingerprint_pairs_dir};
