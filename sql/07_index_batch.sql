-- After the outputs, with `--update-index`: this batch's part of the index (docs/INDEX.md).
--
-- documents: every document of the batch, fingerprint or not (its id is taken from now on),
-- with the signatures' band columns, the batch number, its input order and its sketch (which
-- later batches verify their candidates against).
-- group_log: the group of every document the batch put in a group or moved to another (a
-- merge), not of the members that stay where they were; a document's group is its row of the
-- highest `assigned_batch` (view `index_groups`).

COPY (
    SELECT id, simhash, ${bucket_names}, CAST(${batch} AS BIGINT) AS batch, input_order, sketch
    FROM signatures
) TO ${index_documents_dir} STORED AS PARQUET;

COPY (
    SELECT g.id, g.group_id, g.representative_id, CAST(${batch} AS BIGINT) AS assigned_batch
    FROM groups g
    LEFT JOIN index_groups c ON g.id = c.id
    WHERE c.id IS NULL OR c.group_id <> g.group_id
) TO ${index_groups_dir} STORED AS PARQUET;
