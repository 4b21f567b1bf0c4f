-- Stage 5 in this process: the table sql/05_groups.sql writes, from `numbered_groups`, which
-- src/job/numbered_groups.rs numbered by sorting the members (sql/05_group_members.sql) and
-- holds in memory while this runs.

COPY (
    SELECT id, group_id, representative_id, group_size, distance
    FROM numbered_groups
) TO ${groups_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE groups STORED AS PARQUET LOCATION ${groups_dir};
