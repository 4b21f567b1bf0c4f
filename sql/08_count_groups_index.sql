-- Stage 8 against an index: `groups` also lists indexed members of the groups this batch
-- joined, and only this batch's documents (batch ${batch}) can be removed from its dedup.

SELECT count(DISTINCT group_id) AS groups,
       count(*) AS grouped_documents,
       count(*) FILTER (WHERE id <> representative_id AND batch = ${batch}) AS documents_removed
FROM groups;
