-- Stage 8: groups, the documents in them and the documents removed (all but one per group).

SELECT count(DISTINCT group_id) AS groups,
       count(*) AS grouped_documents,
       count(*) - count(DISTINCT group_id) AS documents_removed
FROM groups;
