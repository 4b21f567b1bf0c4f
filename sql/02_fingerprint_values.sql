-- Stage 2 in this process: every document's fingerprint, which src/job/fingerprint_counts.rs
-- sorts and counts (what sql/02_fingerprints.sql groups).

SELECT simhash
FROM signatures
WHERE simhash IS NOT NULL;
