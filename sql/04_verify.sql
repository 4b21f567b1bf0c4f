-- Stage 4, before the document pairs: verification. SimHash distance alone chains through
-- templated pages (short pages that share navigation fall within a few bits of each other), so
-- each candidate pair of fingerprints is checked by the estimated Jaccard similarity of the
-- two documents' feature sets, from their MinHash sketches (src/text/sketch.rs). With
-- `--verify T` (${verify} true) a pair stays when its similarity is at least T
-- (${min_similarity}); with `--verify off` every candidate stays, with its similarity shown.
--
-- A fingerprint's sketch is the smallest of its documents' (documents with one fingerprint have
-- the same features but for a hash collision; the smallest is the same whatever the order the
-- rows come in). Only fingerprints of candidate pairs are looked up. Writes `fingerprint_pairs`,
-- which stages 4 and 5 read: simhash_a, simhash_b, distance, similarity.

COPY (
    -- min over Binary, cast back: DataFusion has a grouped min for Binary and none for
    -- FixedSizeBinary, whose fallback keeps a boxed accumulator per fingerprint (at 1M
    -- documents 0.51 s against 0.97 s).
    SELECT simhash,
           arrow_cast(min(arrow_cast(sketch, 'Binary')), 'FixedSizeBinary(256)') AS sketch
    -- The candidates' fingerprints first: a hash join holds its first input in memory (this
    -- stage runs with the joins in the order written, src/job/matching.rs). c.simhash, not
    -- d.simhash: the planner would make a semi-join of it, holding the documents.
    FROM (SELECT c.simhash, d.sketch
          FROM (SELECT simhash_a AS simhash FROM candidate_pairs
                UNION
                SELECT simhash_b FROM candidate_pairs) c
          JOIN documents d ON d.simhash = c.simhash)
    GROUP BY simhash
) TO ${sketches_dir} STORED AS PARQUET ${work_table_options};

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
