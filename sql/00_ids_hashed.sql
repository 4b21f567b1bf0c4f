-- Stage 0 in this process, before the queries that name bad ids: every document's id, which
-- src/job/ids.rs hashes to 64 bits and sorts. Without a NULL among them and without two equal
-- hashes no id is missing or repeated, and sql/00_ids_missing.sql and sql/00_ids_repeated.sql
-- need not run; with either they run and name the rows or the ids (two different ids whose
-- hashes agree pass them). A cluster runs those two alone.

SELECT ${id} AS id
FROM corpus;
