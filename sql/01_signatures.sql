-- Stage 1: signatures. One row per input document.
--
-- Reads `corpus_ordered`: the input with `__neardup_input_order` = file index * 2^32 + row
-- index, which `register_corpus` (src/job/source.rs) sets up (one scan per file, so row numbers
-- follow the file). Writes the original system's table: id, fingerprint and its 16-bit bands
-- (four of 64 bits, eight of 128), plus the text length and the input order (the representative
-- of a group is its member that comes first).
--
-- ${features} is the run's option string (`--features`, canonical form): cleaning and feature
-- mode. simhash is NULL when the text is NULL or has nothing to fingerprint (empty, whitespace,
-- punctuation only) unless the options say empty=exact; such documents take no part in
-- matching. `features` counts the distinct features: a document with fewer than min_features
-- was fingerprinted by an exact hash (the short-text policy, see docs/FEATURES.md). `sketch` is
-- the MinHash sketch of the same features (256 bytes), which verification compares
-- (sql/04_verify_sketches.sql).
-- ${keep_value} and ${keep_value_source} add `keep_value`, the input column that `--keep
-- max:COLUMN` (and the other column rules) chooses representatives by, when the rule names one
-- (src/job/keep.rs).

CREATE VIEW signed AS
SELECT id,
       "details.simhash" AS simhash,
       "details.features" AS features,
       "details.sketch" AS sketch,
       text_bytes,
       input_order${keep_value}
FROM (
    -- unnest splits the struct after it is computed once per row; reading its fields directly
    -- would let the optimizer inline the call once per field and fingerprint every text twice.
    SELECT id, unnest(details), text_bytes, input_order${keep_value}
    FROM (
        SELECT ${id} AS id,
               simhash_sketch(${text}, ${features}) AS details,
               octet_length(${text}) AS text_bytes,
               __neardup_input_order AS input_order${keep_value_source}
        FROM corpus_ordered
    )
);

COPY (
    SELECT id,
           simhash,
           -- bucket(simhash, 1) AS bucket1, ... one per 16-bit band: 4 for 64 bits, 8 for 128
           ${bucket_columns},
           text_bytes,
           input_order,
           features,
           sketch${keep_value}
    FROM signed
) TO ${signatures_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE signatures STORED AS PARQUET LOCATION ${signatures_dir};
