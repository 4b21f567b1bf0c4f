-- Stage 6, before dedup is written: how many documents it removes, and the bytes of the
-- corpus's texts. Two ways write the same rows (06_dedup.sql and 06_dedup_kept.sql), and which
-- one is faster depends on the share removed; the texts' size sets how many rows a row group
-- of the output holds (src/job/mod.rs, `write_dedup`). The bytes of the ids removed and of all
-- ids say whether the ids the stage joins fit in one table (`write_dedup`).

SELECT (SELECT count(*) FROM groups WHERE id <> representative_id) AS removed,
       (SELECT CAST(sum(text_bytes) AS BIGINT) FROM signatures) AS text_bytes,
       (SELECT CAST(sum(octet_length(CAST(id AS VARCHAR))) AS BIGINT)
        FROM groups WHERE id <> representative_id) AS removed_id_bytes,
       (SELECT CAST(sum(octet_length(CAST(id AS VARCHAR))) AS BIGINT)
        FROM signatures) AS id_bytes;
