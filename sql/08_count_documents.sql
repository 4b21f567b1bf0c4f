-- Stage 8: the counts of summary.json, read from the tables the stages wrote. Documents, those
-- with NULL text, without a fingerprint, distinct fingerprints, with no features, and with fewer
-- than min_features (${min_features}), which are matched only as exact copies. The distinct
-- fingerprints are counted in stage 2's table (those of this run's documents are `fresh`), not
-- again over every document.

SELECT count(*) AS documents,
       count(*) - count(text_bytes) AS null_texts,
       count(*) - count(simhash) AS without_fingerprint,
       (SELECT count(*) FROM fingerprints WHERE fresh) AS distinct_fingerprints,
       count(*) FILTER (WHERE features = 0) AS empty_texts,
       count(*) FILTER (WHERE features > 0 AND features < ${min_features}) AS short_texts
FROM signatures;
