-- Stage 6, written another way: the same rows as sql/06_dedup.sql (see there for what they are,
-- against an index and with `--partition-by`), for when most documents are removed.

CREATE VIEW removed AS
SELECT id FROM groups WHERE id <> representative_id;

-- The ids kept, from the signatures (every input document has a row there), then the corpus
-- joined to them rather than filtered by NOT EXISTS (sql/06_dedup.sql): the join hands the kept
-- ids to the corpus scan, which (with Parquet filter pushdown, set for this stage by
-- `write_dedup` in src/job/mod.rs) decodes the texts of kept rows only. `write_dedup` picks this
-- file when at least two thirds of the documents are removed (sql/06_dedup_removed.sql counts
-- them): measured, 1M generated documents with 79% removed took 3.8 s here against 5.3 s, and
-- 75k with 53% removed 0.58 s against 0.46 s (the row filter costs more than it saves when most
-- rows pass).
CREATE VIEW kept AS
SELECT s.id FROM signatures s WHERE NOT EXISTS (SELECT 1 FROM removed r WHERE r.id = s.id);

COPY (
    SELECT ${dedup_columns}
    FROM corpus c
    JOIN kept k ON k.id = c.${id}
    -- The corpus's own columns: dictionary pages as in any Parquet file, where the job's own
    -- tables have none (src/engine/session.rs, `job_config`).
) TO ${dedup_dir} STORED AS PARQUET OPTIONS ('format.dictionary_enabled' 'true') ${partition_by};

CREATE EXTERNAL TABLE dedup STORED AS PARQUET LOCATION ${dedup_dir};
