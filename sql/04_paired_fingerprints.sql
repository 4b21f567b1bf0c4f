-- Stage 4 in this process, before the document pairs: the fingerprints whose documents can be
-- in a pair or a group (those of a fingerprint pair, and those several documents share), which
-- src/job/paired_documents.rs holds as a set for sql/04_paired_documents_filtered.sql. A value
-- may come more than once; the set keeps one.

SELECT simhash_a AS simhash FROM fingerprint_pairs
UNION ALL
SELECT simhash_b FROM fingerprint_pairs
UNION ALL
SELECT simhash FROM fingerprints WHERE document_count > 1;
