-- Stage 4 on a cluster, before the document pairs: each candidate fingerprint's sketch, which
-- verification (sql/04_verify.sql) compares. In this process src/job/verify.rs finds the same
-- sketches without this aggregate (sql/04_verify_document_sketches.sql).
--
-- A fingerprint's sketch is the smallest of its documents' (documents with one fingerprint have
-- the same features but for a hash collision; the smallest is the same whatever the order the
-- rows come in). Only fingerprints of candidate pairs are looked up.

CREATE VIEW candidate_sketches AS
-- min over Binary, cast back: DataFusion has a grouped min for Binary and none for
-- FixedSizeBinary, whose fallback keeps a boxed accumulator per fingerprint (at 1M
-- documents 0.51 s against 0.97 s).
SELECT simhash,
       arrow_cast(min(arrow_cast(sketch, 'Binary')), 'FixedSizeBinary(256)') AS sketch
-- The candidates' fingerprints first: a hash join holds its first input in memory (this
-- stage runs with the joins in the order written, src/job/verify.rs). c.simhash, not
-- d.simhash: the planner would make a semi-join of it, holding the documents.
FROM (SELECT c.simhash, d.sketch
      FROM (SELECT simhash_a AS simhash FROM candidate_pairs
            UNION
            SELECT simhash_b FROM candidate_pairs) c
      JOIN documents d ON d.simhash = c.simhash)
GROUP BY simhash;
