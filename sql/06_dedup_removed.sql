-- Stage 6, before dedup is written: how many documents it removes, and the bytes of the
-- corpus's texts. Two ways write the same rows (06_dedup.sql and 06_dedup_kept.sql), and which
-- one is faster depends on the share removed; the texts' size sets how many rows a row group
-- of the output holds (src/job/mod.rs, `write_dedup`).

SELECT (SELECT count(*) FROM groups WHERE id <> representative_id) AS removed,
       (SELECT CAST(sum(text_bytes) AS BIGINT) FROM signatures) AS text_bytes;
