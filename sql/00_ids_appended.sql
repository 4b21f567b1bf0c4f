-- Stage 0 for `--output-format delta --append`, after the index's check if there is one: a
-- run's rows are added to the tables as they are, so an id that `signatures` (registered as
-- `appended_signatures`, at the version summary.json records) already holds would be there
-- twice, and in two runs' groups. Such ids are refused before any work, as an index refuses
-- them (src/delta/append.rs). A few of them.

SELECT CAST(taken AS VARCHAR) AS id
FROM (
    SELECT c.${id} AS taken
    FROM corpus c
    JOIN appended_signatures a ON c.${id} = a.id
    ORDER BY taken
    LIMIT 5
)
ORDER BY taken;
