-- Stage 4 in this process, before verification: the fingerprints of the candidate pairs, whose
-- sketches src/job/verify.rs holds in memory for sql/04_verify_lookup.sql. A value may come
-- more than once; the map keeps one.

SELECT simhash_a, simhash_b FROM candidate_pairs;
