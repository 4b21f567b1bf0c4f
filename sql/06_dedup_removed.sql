-- Stage 6, before dedup is written: how many documents it removes, and the bytes of the
-- corpus's texts. Two ways write the same rows (06_dedup.sql and 06_dedup_kept.sql), and which
-- one is faster depends on the share removed; the texts' size sets how many rows a row group
-- of the output holds (src/job/mod.rs, `write_dedup`). The bytes of the ids removed and of all
-- ids say whether the ids the stage joins fit in one table (`write_dedup`). Each table is read
-- once.

SELECT r.removed, s.text_bytes, r.removed_id_bytes, s.id_bytes
FROM (SELECT count(*) AS removed,
             CAST(sum(octet_length(CAST(id AS VARCHAR))) AS BIGINT) AS removed_id_bytes
      FROM groups WHERE id <> representative_id) r
CROSS JOIN (SELECT CAST(sum(text_bytes) AS BIGINT) AS text_bytes,
                   CAST(sum(octet_length(CAST(id AS VARCHAR))) AS BIGINT) AS id_bytes
            FROM signatures) s;
