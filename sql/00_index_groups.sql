-- Stage 0 against an index: each indexed document's current group, the last assignment in the
-- index's group log (a document's group changes when a later batch merges groups). An
-- aggregate, not a window: hashing beats sorting the whole log by id. A view, created with the
-- index's tables by `Index::register` (src/index/mod.rs), for `run`, `match` and `query --index`.

CREATE VIEW index_groups AS
SELECT id,
       last_value(group_id ORDER BY assigned_batch) AS group_id,
       last_value(representative_id ORDER BY assigned_batch) AS representative_id
FROM index_group_log
GROUP BY id;
