-- Stage 5: duplicate groups.
--
-- In this process, for a run without an index and the default `--keep first`,
-- src/job/numbered_groups.rs writes the same table by sorting the members
-- (sql/05_group_members.sql, sql/05_groups_numbered.sql); this file runs on a cluster, for the
-- other rules, for 128-bit fingerprints, and when the memory pool refuses the members.
--
-- Reads `fingerprint_components` (simhash, component): the connected components of the
-- fingerprint pairs, each labelled by its smallest fingerprint. Union-find registers it (the
-- default, in this process: src/job/clustering/union_find.rs, the one step that is not a
-- relational query); `--clustering sql` writes the same table with the rounds of
-- sql/05_components_*.sql (src/job/clustering/sql_rounds.rs). A document belongs to its
-- fingerprint's component; a fingerprint with no pair is a component of its own, which still
-- groups the documents that share it exactly.
--
-- Only documents of a fingerprint with a pair, or of one several documents share
-- (`fingerprints.document_count`, sql/02_fingerprints.sql), can be in a group. The work per
-- group below sees only those (18% of the documents in `generate-fingerprints`' 100M, see
-- docs/SCALE.md), never the rest.
--
-- Rules: the representative is the member `--keep` prefers (src/job/keep.rs), by default the
-- one that comes first in input order (the original system kept the earliest document); ties,
-- and members with no value for the rule, go by input order. `keep_key` is the value the rule
-- compares (the text's length, or the input column signatures carries as keep_value; see
-- `documents` in sql/02_documents.sql), and
-- ${representative_order} picks the representative's input order with it. Groups are numbered
-- 1, 2, ... in the input order of their representatives, so the same input always gives the
-- same group ids.

-- The fingerprints whose documents are in a group, each with its component.
CREATE VIEW grouped_fingerprints AS
SELECT simhash, component FROM fingerprint_components
UNION ALL
SELECT f.simhash, f.simhash AS component
FROM fingerprints f
WHERE f.document_count > 1
  AND NOT EXISTS (SELECT 1 FROM fingerprint_components c WHERE c.simhash = f.simhash);

-- Written once, read twice below.
COPY (
    SELECT d.id, d.simhash, d.input_order, d.keep_key, g.component
    -- The grouped fingerprints first: a hash join holds its first input in memory.
    FROM grouped_fingerprints g
    JOIN paired_documents d ON d.simhash = g.simhash
) TO ${members_dir} STORED AS PARQUET ${work_table_options};

CREATE EXTERNAL TABLE members STORED AS PARQUET LOCATION ${members_dir};

-- Every component here has two documents or more: a component of fingerprint pairs has two
-- fingerprints, and a fingerprint of its own is here only when documents share it.
CREATE VIEW group_heads AS
SELECT component, count(*) AS group_size, ${representative_order} AS representative_order
FROM members
GROUP BY component;

COPY (
    SELECT m.id,
           g.group_id,
           -- Never NULL (a group's first member has an id); COALESCE tells the schema so.
           COALESCE(g.representative_id, m.id) AS representative_id,
           g.group_size,
           hamming(m.simhash, g.representative_simhash) AS distance
    FROM members m
    -- The representative looked up among the members by its input order (unique in a run): an
    -- integer join. `first_value(id ORDER BY input_order)` in the aggregate instead compares
    -- each row on a generic path; at 4M fingerprints this statement took 0.44 s that way, 0.27
    -- with the lookup.
    JOIN (SELECT h.component, h.group_size, r.id AS representative_id,
                 r.simhash AS representative_simhash,
                 row_number() OVER (ORDER BY h.representative_order) AS group_id
          FROM group_heads h
          JOIN members r ON r.input_order = h.representative_order) g
      ON m.component = g.component
    ORDER BY g.group_id, m.input_order
) TO ${groups_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE groups STORED AS PARQUET LOCATION ${groups_dir};
