-- Stage 0 against an index: an index holds each document once, so ids it already holds are
-- refused (a batch run twice is caught here, before any work). A few of them, with the batch
-- that added them.

SELECT CAST(c.${id} AS VARCHAR) AS id, i.batch
FROM corpus c
JOIN index_documents i ON c.${id} = i.id
ORDER BY i.batch, 1
LIMIT 5;
