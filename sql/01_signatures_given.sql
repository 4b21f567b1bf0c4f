-- Stage 1 for `neardup match`: the fingerprints were computed elsewhere. The bands are cut here
-- exactly as stage 1 of `neardup run` cuts them, so both commands share stages 2 and 3.

CREATE VIEW signatures AS
SELECT ${id} AS id,
       ${simhash} AS simhash,
       bucket(${simhash}, 1) AS bucket1,
       bucket(${simhash}, 2) AS bucket2,
       bucket(${simhash}, 3) AS bucket3,
       bucket(${simhash}, 4) AS bucket4,
       CAST(NULL AS BIGINT) AS text_bytes,
       __neardup_input_order AS input_order,
       -- No texts, so no sketch: `match` does not verify its candidates.
       arrow_cast(NULL, 'FixedSizeBinary(256)') AS sketch${keep_value_source}
FROM corpus_ordered;
