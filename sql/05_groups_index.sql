-- Stage 5 against an index: the groups this batch made or changed, with ids stable across
-- batches.
--
-- Reads two tables the runner computes with union-find (src/job.rs), whose nodes are this
-- batch's fingerprints (every new document's, and both sides of every fingerprint pair) and
-- the index's groups that any of them belongs to:
--   fingerprint_components (simhash, component)
--   group_components       (group_id, component)
-- A component's members are the documents with its fingerprints (new and indexed) and every
-- member of its indexed groups, so a group that a new document joins is listed whole.
--
-- Rules: a component that holds indexed groups keeps the smallest of their ids and that
-- group's representative (several merge into the oldest); otherwise it is a new group,
-- numbered from ${next_group_id} in the input order of its first member, which is its
-- representative (the same rule as a run without an index). `batch` is the batch each member
-- came from.

CREATE VIEW members AS
SELECT d.id, d.simhash, d.batch, d.input_order, c.component
FROM documents d
JOIN fingerprint_components c ON d.simhash = c.simhash
UNION
SELECT d.id, d.simhash, d.batch, d.input_order, gc.component
FROM index_groups g
JOIN group_components gc ON g.group_id = gc.group_id
JOIN index_documents d ON d.id = g.id;

CREATE VIEW kept_groups AS
SELECT gc.component, g.group_id, g.representative_id
FROM (SELECT component, min(group_id) AS group_id FROM group_components GROUP BY component) gc
JOIN (SELECT DISTINCT group_id, representative_id FROM index_groups) g
  ON g.group_id = gc.group_id;

CREATE VIEW batch_groups AS
SELECT c.component,
       c.group_size,
       COALESCE(k.group_id,
                arrow_cast(${next_group_id} - 1, 'UInt64')
                + row_number() OVER (PARTITION BY k.group_id IS NULL
                                     ORDER BY c.first_batch, c.first_order)) AS group_id,
       COALESCE(k.representative_id, c.first_id) AS representative_id
FROM (SELECT component,
             count(*) AS group_size,
             first_value(id ORDER BY batch, input_order) AS first_id,
             min(batch) AS first_batch,
             first_value(input_order ORDER BY batch, input_order) AS first_order
      FROM members
      GROUP BY component
      HAVING count(*) > 1) c
LEFT JOIN kept_groups k ON c.component = k.component;

COPY (
    SELECT m.id,
           g.group_id,
           g.representative_id,
           g.group_size,
           hamming(m.simhash, r.simhash) AS distance,
           m.batch
    FROM members m
    JOIN batch_groups g ON m.component = g.component
    JOIN documents r ON r.id = g.representative_id
    ORDER BY g.group_id, m.batch, m.input_order
) TO ${groups_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE groups STORED AS PARQUET LOCATION ${groups_dir};
