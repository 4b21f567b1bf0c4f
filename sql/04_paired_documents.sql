-- Stage 4, before the document pairs: the documents that can be in a pair, or in a group of a
-- run without an index, those of a fingerprint with a fingerprint pair or of one that several
-- documents share (`fingerprints.document_count`, sql/02_fingerprints.sql). Every other
-- document has neither. (Against an index, sql/05_groups_index.sql also groups indexed
-- documents, and reads them from the index.)
--
-- Written once, then read by the pairs (sql/04_pairs.sql, sql/04_pairs_star.sql) and the groups
-- (sql/05_groups.sql) instead of `documents`: each of their joins looked every document up,
-- and these are a fraction of them (18% of `generate-fingerprints`' rows, docs/SCALE.md).
--
-- In this process sql/04_paired_documents_filtered.sql writes the same table with the
-- fingerprints held as a set (src/job/paired_documents.rs); this runs on a cluster and when
-- the memory pool refuses the set.

COPY (
    SELECT d.id, d.simhash, d.batch, d.input_order, d.fresh, d.keep_key
    -- The few first: a hash join holds its first input in memory.
    FROM (SELECT simhash_a AS simhash FROM fingerprint_pairs
          UNION
          SELECT simhash_b FROM fingerprint_pairs
          UNION
          SELECT simhash FROM fingerprints WHERE document_count > 1) f
    JOIN documents d ON d.simhash = f.simhash
) TO ${paired_documents_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE paired_documents STORED AS PARQUET LOCATION ${paired_documents_dir};
