-- Stage 2: distinct fingerprints.
--
-- Identical fingerprints collapse to one row before any band is compared: a thousand copies of a
-- page (or of a template) are one fingerprint here, not half a million candidate rows. Written
-- once, read by each band's candidate step. `document_count` counts the documents of each: only
-- those of a fingerprint several documents share can pair at distance 0 (stage 4) or form a
-- group without a fingerprint pair (stage 5), so those stages join the few, not the corpus.
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

COPY (
    -- Every fingerprint here is this run's (`fresh`); sql/02_fingerprints_index.sql marks which.
    SELECT simhash, count(*) AS document_count, true AS fresh
    FROM signatures
    WHERE simhash IS NOT NULL
    GROUP BY simhash
) TO ${fingerprints_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE fingerprints STORED AS PARQUET LOCATION ${fingerprints_dir};
