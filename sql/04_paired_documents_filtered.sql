-- Stage 4 in this process, before the document pairs: the table sql/04_paired_documents.sql
-- writes, the documents of a fingerprint with a pair or with copies. Here each document's
-- fingerprint is looked up in the set src/job/paired_documents.rs holds
-- (sql/04_paired_fingerprints.sql) by `paired_fingerprint(simhash)`, registered while this
-- runs, instead of a hash join that every document probes.

COPY (
    SELECT id, simhash, batch, input_order, fresh, keep_key
    FROM documents
    WHERE paired_fingerprint(simhash)
) TO ${paired_documents_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE paired_documents STORED AS PARQUET LOCATION ${paired_documents_dir};
