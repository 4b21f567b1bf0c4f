-- Stage 2, first: the documents.
--
-- `documents` is what stages 4 and 5 read: every document with its batch (${batch}: 0 for a run
-- on its own, 1 for the first batch of an index), its place in input order and whether it is
-- new in this run (always here; against an index with batches,
-- sql/02_fingerprints_index.sql adds the indexed documents, which are not), and the value
-- `--keep` compares (`keep_key`, see sql/05_groups.sql).

CREATE VIEW documents AS
SELECT id, simhash, CAST(${batch} AS BIGINT) AS batch, input_order, true AS fresh, sketch,
       ${keep_key} AS keep_key
FROM signatures;
