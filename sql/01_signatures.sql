-- Stage 1: signatures. One row per input document.
--
-- Reads `corpus_ordered`: the input with `__neardup_input_order` = file index * 2^32 + row index, which
-- the runner sets up (one scan per file, so row numbers follow the file). Writes the original
-- system's table: id, fingerprint and its four 16-bit bands, plus the text length and the
-- input order (the representative of a group is its member that comes first).
--
-- simhash is NULL when the text is NULL or has nothing to fingerprint (empty, whitespace,
-- punctuation only); such documents take no part in matching.

CREATE VIEW signed AS
SELECT ${id} AS id,
       simhash(${text}) AS simhash,
       octet_length(${text}) AS text_bytes,
       __neardup_input_order AS input_order
FROM corpus_ordered;

COPY (
    SELECT id,
           simhash,
           bucket(simhash, 1) AS bucket1,
           bucket(simhash, 2) AS bucket2,
           bucket(simhash, 3) AS bucket3,
           bucket(simhash, 4) AS bucket4,
           text_bytes,
           input_order
    FROM signed
) TO ${signatures_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE signatures STORED AS PARQUET LOCATION ${signatures_dir};
