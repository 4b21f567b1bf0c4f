-- Stage 5: duplicate groups.
--
-- Reads `fingerprint_components` (simhash, component): the connected components of the
-- fingerprint pairs, each labelled by its smallest fingerprint. Union-find registers it (the
-- default, in this process: src/job/clustering/union_find.rs, the one step that is not a
-- relational query); `--clustering sql` writes the same table with the rounds of
-- sql/05_components_*.sql (src/job/clustering/sql_rounds.rs). A document belongs to its
-- fingerprint's component; a fingerprint with no pair is a component of its own, which still
-- groups the documents that share it exactly.
--
-- Rules: the representative is the member `--keep` prefers (src/job/keep.rs), by default the
-- one that comes first in input order (the original system kept the earliest document); ties,
-- and members with no value for the rule, go by input order. ${keep_key} is the value the rule
-- compares (the text's length, or the input column signatures carries as keep_value), and
-- ${representative_order} picks the representative's input order with it. Groups are numbered
-- 1, 2, ... in the input order of their representatives, so the same input always gives the
-- same group ids.

CREATE VIEW members AS
SELECT s.id, s.simhash, s.input_order, ${keep_key} AS keep_key,
       COALESCE(c.component, s.simhash) AS component
FROM signatures s
LEFT JOIN fingerprint_components c ON s.simhash = c.simhash
WHERE s.simhash IS NOT NULL;

CREATE VIEW group_heads AS
SELECT component, count(*) AS group_size, ${representative_order} AS representative_order
FROM members
GROUP BY component
HAVING count(*) > 1;

COPY (
    SELECT m.id,
           g.group_id,
           r.id AS representative_id,
           g.group_size,
           hamming(m.simhash, r.simhash) AS distance
    FROM members m
    JOIN (SELECT component, group_size, representative_order,
                 row_number() OVER (ORDER BY representative_order) AS group_id
          FROM group_heads) g
      ON m.component = g.component
    JOIN signatures r ON r.input_order = g.representative_order
    ORDER BY g.group_id, m.input_order
) TO ${groups_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE groups STORED AS PARQUET LOCATION ${groups_dir};
