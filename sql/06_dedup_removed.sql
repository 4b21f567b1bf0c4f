-- Stage 6, before dedup is written: how many documents it removes. Two ways write the same rows
-- (06_dedup.sql and 06_dedup_kept.sql), and which one is faster depends on this share.

SELECT count(*) FROM groups WHERE id <> representative_id;
