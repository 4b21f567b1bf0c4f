-- Stage 0: ids must be unique. A few of the ids given to more than one document, the most
-- repeated first, with the first and last places each is given at (file index * 2^32 + row),
-- for the error message.

SELECT arrow_cast(${id}, 'Utf8') AS id, count(*) AS copies,
       min(__neardup_input_order) AS first_place, max(__neardup_input_order) AS last_place
FROM corpus_ordered
GROUP BY ${id}
HAVING count(*) > 1
ORDER BY copies DESC, id
LIMIT 5;
