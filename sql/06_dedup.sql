-- Stage 6: the deduplicated corpus: every input row, with every input column, except the group
-- members that are not their group's representative. Documents with NULL or empty text are in
-- no group, so they are kept.

CREATE VIEW removed AS
SELECT id FROM groups WHERE id <> representative_id;

COPY (
    SELECT c.*
    FROM corpus c
    WHERE NOT EXISTS (SELECT 1 FROM removed r WHERE r.id = c.${id})
) TO ${dedup_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE dedup STORED AS PARQUET LOCATION ${dedup_dir};
