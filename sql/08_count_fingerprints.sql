-- Stage 8 of `neardup match`: the counts of 08_count_documents.sql, for fingerprints given
-- (no texts, so none is NULL, empty or short).

SELECT count(*) AS documents,
       CAST(0 AS BIGINT) AS null_texts,
       count(*) - count(simhash) AS without_fingerprint,
       (SELECT count(*) FROM fingerprints WHERE fresh) AS distinct_fingerprints,
       CAST(0 AS BIGINT) AS empty_texts,
       CAST(0 AS BIGINT) AS short_texts
FROM signatures;
