-- Stage 4, before the document pairs, for fingerprints given (`neardup match` without an index):
-- there are no texts, so no sketches to verify with. Every candidate pair stays, with no
-- similarity; sql/04_verify.sql would look up a NULL sketch for each of them.

CREATE VIEW fingerprint_pairs AS
SELECT simhash_a, simhash_b, distance, CAST(NULL AS DOUBLE) AS similarity
FROM candidate_pairs;
