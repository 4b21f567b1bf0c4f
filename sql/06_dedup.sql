-- Stage 6: the deduplicated corpus: every input row, with every input column, except the group
-- members that are not their group's representative. Documents with NULL or empty text are in
-- no group, so they are kept. Against an index, `groups` also lists indexed members of the
-- groups new documents joined; they are not in `corpus`, and a new document is removed when an
-- indexed one represents its group. With `--partition-by`, the COPY ends in PARTITIONED BY
-- those columns (one folder per value, Hive style), and ${dedup_columns} writes their NULLs
-- as `__HIVE_DEFAULT_PARTITION__` (src/job/source.rs, `dedup_columns`).

CREATE VIEW removed AS
SELECT id FROM groups WHERE id <> representative_id;

COPY (
    SELECT ${dedup_columns}
    FROM corpus c
    WHERE NOT EXISTS (SELECT 1 FROM removed r WHERE r.id = c.${id})
    -- The corpus's own columns: dictionary pages as in any Parquet file, where the job's own
    -- tables have none (src/engine/session.rs, `job_config`).
) TO ${dedup_dir} STORED AS PARQUET OPTIONS ('format.dictionary_enabled' 'true') ${partition_by};

CREATE EXTERNAL TABLE dedup STORED AS PARQUET LOCATION ${dedup_dir};
