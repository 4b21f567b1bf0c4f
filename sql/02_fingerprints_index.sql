-- Stage 2 against an index (`--index`): the documents of the index and of this batch, and
-- their distinct fingerprints, each marked `fresh` when a document of this batch has it.
--
-- Only fresh fingerprints look for partners in stage 3: pairs of fingerprints that only
-- indexed documents have were found when their batches ran, so a batch costs what its own
-- fingerprints find, not a comparison of the index with itself. A fingerprint that indexed
-- documents have too is fresh all the same: its new documents pair with the documents of its
-- indexed neighbours, and stage 4 lists only the document pairs with a new document.

-- `keep_key` is what `--keep` compares (sql/05_groups.sql): this batch's documents have it; the
-- indexed ones come first in their groups by their batch, so they need none.
CREATE VIEW documents AS
SELECT id, simhash, batch, input_order, false AS fresh, sketch, NULL AS keep_key
FROM index_documents
UNION ALL
SELECT id, simhash, CAST(${batch} AS BIGINT) AS batch, input_order, true AS fresh, sketch,
       ${keep_key} AS keep_key
FROM signatures;

COPY (
    -- `document_count`: how many documents, indexed or new, have the fingerprint
    -- (sql/02_fingerprints.sql).
    SELECT simhash, bool_or(fresh) AS fresh, count(*) AS document_count
    FROM documents
    WHERE simhash IS NOT NULL
    GROUP BY simhash
) TO ${fingerprints_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE fingerprints STORED AS PARQUET LOCATION ${fingerprints_dir};
