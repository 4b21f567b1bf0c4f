-- Stage 5 against an index: the groups this batch made or changed, with ids stable across
-- batches.
--
-- Reads two tables of the clustering (union-find: `cluster_against_index` in
-- src/job/clustering/union_find.rs; SQL rounds: sql/05_components_index_labels.sql), over the
-- fingerprints of this batch's pairs and the index's groups that those or the batch's other
-- fingerprints belong to (sql/05_components_index_groups.sql):
--   fingerprint_components (simhash, component)  component: its smallest fingerprint
--   group_components       (group_id, component)
-- A component's members are the documents with its fingerprints (new and indexed) and every
-- member of its indexed groups, so a group that a new document joins is listed whole. A new
-- document's fingerprint with no pair and no indexed group is a component of its own (named
-- by itself, which no other component is), grouping the documents that share it exactly.
--
-- Rules: a component that holds indexed groups keeps the smallest of their ids and that
-- group's representative (several merge into the oldest); otherwise it is a new group, and its
-- representative is its member from the earliest batch: what an earlier batch kept stays kept.
-- Among this batch's members `--keep` chooses (by keep_key, then input order, as in a run
-- without an index); among an earlier batch's, input order does. New groups are numbered from
-- ${next_group_id} in the input order of their representatives. `batch` is the batch each
-- member came from.

-- Written once (read twice below): computing it scans the whole index.
COPY (
    SELECT d.id, d.simhash, d.batch, d.input_order, d.keep_key,
           COALESCE(c.component, d.simhash) AS component
    FROM documents d
    LEFT JOIN fingerprint_components c ON d.simhash = c.simhash
    WHERE d.simhash IS NOT NULL
      AND (d.fresh OR c.component IS NOT NULL OR d.simhash IN (SELECT simhash FROM signatures))
    UNION ALL
    -- Members of indexed groups whose fingerprint is not a node (nodes' documents are above).
    SELECT d.id, d.simhash, d.batch, d.input_order, NULL AS keep_key, gc.component
    FROM index_groups g
    JOIN group_components gc ON g.group_id = gc.group_id
    JOIN index_documents d ON d.id = g.id
    WHERE d.simhash NOT IN (SELECT simhash FROM fingerprint_components)
) TO ${members_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE members STORED AS PARQUET LOCATION ${members_dir};

-- Only components of two or more documents are groups; most of the batch's documents are
-- alone, so they leave here, before the per-group work.
COPY (
    SELECT m.id, m.simhash, m.batch, m.input_order, m.keep_key, m.component, s.group_size
    FROM members m
    JOIN (SELECT component, count(*) AS group_size
          FROM members
          GROUP BY component
          HAVING count(*) > 1) s
      ON m.component = s.component
) TO ${grouped_members_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE grouped_members STORED AS PARQUET LOCATION ${grouped_members_dir};

-- A group's representative never changes, so any log row of the group names it: no need to
-- find each document's current row here.
CREATE VIEW kept_groups AS
SELECT gc.component, gc.group_id, min(l.representative_id) AS representative_id
FROM (SELECT component, min(group_id) AS group_id FROM group_components GROUP BY component) gc
JOIN index_group_log l ON l.group_id = gc.group_id
GROUP BY gc.component, gc.group_id;

-- One pass over the members: a kept group's representative sorts first in its component
-- (is_representative), a new group's first member otherwise.
CREATE VIEW batch_groups AS
SELECT component,
       max(group_size) AS group_size,
       max(kept_group_id) AS kept_group_id,
       first_value(id ORDER BY is_representative DESC, batch, ${keep_order}input_order) AS representative_id,
       first_value(simhash ORDER BY is_representative DESC, batch, ${keep_order}input_order)
           AS representative_simhash,
       first_value(batch ORDER BY is_representative DESC, batch, ${keep_order}input_order) AS first_batch,
       first_value(input_order ORDER BY is_representative DESC, batch, ${keep_order}input_order)
           AS first_order
FROM (SELECT m.id, m.simhash, m.batch, m.input_order, m.keep_key, m.component, m.group_size,
             k.group_id AS kept_group_id,
             COALESCE(m.id = k.representative_id, false) AS is_representative
      FROM grouped_members m
      LEFT JOIN kept_groups k ON m.component = k.component)
GROUP BY component;

CREATE VIEW numbered_groups AS
SELECT component,
       group_size,
       COALESCE(kept_group_id,
                arrow_cast(${next_group_id} - 1, 'UInt64')
                + row_number() OVER (PARTITION BY kept_group_id IS NULL
                                     ORDER BY first_batch, first_order)) AS group_id,
       representative_id,
       representative_simhash
FROM batch_groups;

COPY (
    SELECT m.id,
           g.group_id,
           g.representative_id,
           g.group_size,
           hamming(m.simhash, g.representative_simhash) AS distance,
           m.batch
    FROM grouped_members m
    JOIN numbered_groups g ON m.component = g.component
    ORDER BY g.group_id, m.batch, m.input_order
) TO ${groups_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE groups STORED AS PARQUET LOCATION ${groups_dir};
