-- Stage 4 with `--pairs star`: document pairs that connect the same groups in at most one row per
-- document plus one per fingerprint pair.
--
-- Every pair (`--pairs all`) is quadratic in copies: a page served 200,000 times is 2 * 10^10
-- rows. Here each document is paired with the head of its fingerprint (its first document in
-- input order, distance 0), and each fingerprint pair with the heads of its two fingerprints.
-- The connected components, hence `groups`, `dedup` and `eval`'s sweep, are the same; the
-- pairs left out are the ones those rows imply. One row per pair, id_a < id_b.
--
-- Against an index, only rows with a new (`fresh`) document are listed: an indexed document
-- comes before every new one, so the head of an indexed fingerprint is indexed, and the rows
-- between indexed documents were listed by their own batches.

-- Only fingerprints of a fingerprint pair, and those several documents share, need a head: their
-- documents are `paired_documents` (sql/04_paired_documents.sql); the rest, most of a large
-- corpus, are left out before the grouping.
CREATE VIEW heads AS
SELECT simhash,
       first_value(id ORDER BY batch, input_order) AS id,
       first_value(fresh ORDER BY batch, input_order) AS fresh
FROM paired_documents
GROUP BY simhash;

COPY (
    SELECT least(x.id, y.id) AS id_a,
           greatest(x.id, y.id) AS id_b,
           p.distance AS distance,
           p.similarity AS similarity
    FROM fingerprint_pairs p
    JOIN heads x ON x.simhash = p.simhash_a
    JOIN heads y ON y.simhash = p.simhash_b
    WHERE x.fresh OR y.fresh
    UNION ALL
    SELECT least(s.id, h.id) AS id_a,
           greatest(s.id, h.id) AS id_b,
           arrow_cast(0, 'UInt8') AS distance,
           CAST(NULL AS DOUBLE) AS similarity
    FROM paired_documents s
    JOIN heads h ON s.simhash = h.simhash AND s.id <> h.id
    WHERE s.fresh
    -- No ORDER BY: sorting a million documents' 22 million pairs took longer than finding
    -- them and 3.5 GiB (docs/BENCHMARKS.md); the rows come in join order, and a query that
    -- needs an order sorts.
-- zstd at level 1 rather than the other tables' 3: the largest output (two ids a row, a
-- million documents' 32.6 million rows), where level 3 spent a second more for files 6%
-- smaller (docs/BENCHMARKS.md).
) TO ${pairs_dir} STORED AS PARQUET OPTIONS ('format.compression' 'zstd(1)');

CREATE EXTERNAL TABLE pairs STORED AS PARQUET LOCATION ${pairs_dir};
