-- Stage 0, before any work: every document needs an id, since pairs, groups and dedup refer to
-- documents by it. The first few documents without one, by their place in the input (file
-- index * 2^32 + row), so the error can name the file and row.

SELECT __neardup_input_order
FROM corpus_ordered
WHERE ${id} IS NULL
ORDER BY 1
LIMIT 3;
