-- Stage 7, with an index: the largest group id this batch used, so the index's next batch
-- numbers its new groups after it.

SELECT max(group_id) FROM groups;
