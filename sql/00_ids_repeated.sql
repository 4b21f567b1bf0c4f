-- Stage 0: ids must be unique. A few of the ids given to more than one document, the most
-- repeated first, for the error message.

SELECT CAST(${id} AS VARCHAR) AS id, count(*) AS copies
FROM corpus
GROUP BY ${id}
HAVING count(*) > 1
ORDER BY copies DESC, id
LIMIT 5;
