-- Stage 4 in this process, before verification: every document's fingerprint and sketch.
-- src/job/verify.rs keeps, for each candidate fingerprint (sql/04_verify_candidate_fingerprints.sql),
-- the smallest sketch of its documents: the rows sql/04_verify_sketches.sql's aggregate gives
-- on a cluster, without holding every sketch twice.

SELECT simhash, sketch FROM documents WHERE sketch IS NOT NULL;
