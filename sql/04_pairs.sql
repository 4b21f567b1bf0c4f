-- Stage 4: document pairs: the documents behind each fingerprint pair, and every two documents
-- that share a fingerprint (distance 0). One row per unordered pair, id_a < id_b, with the
-- estimated Jaccard similarity of their fingerprints' features (sql/04_verify.sql); NULL for
-- two documents of one fingerprint, which are duplicates without a check.
--
-- Reads `documents` (stage 2). Only pairs with a new (`fresh`) document are listed: against an
-- index, pairs of indexed documents were listed by their own batches; without one every
-- document is new.

-- Documents with a fingerprint another document has: the only ones with a pair at distance 0.
-- Most fingerprints belong to one document, so the self-join below joins these few. Here and
-- below the smaller input comes first: a hash join holds its first input in memory.
CREATE VIEW shared_documents AS
SELECT d.id, d.simhash, d.fresh
FROM (SELECT simhash FROM fingerprints WHERE document_count > 1) f
JOIN documents d ON d.simhash = f.simhash;

COPY (
    SELECT CASE WHEN x.id < y.id THEN x.id ELSE y.id END AS id_a,
           CASE WHEN x.id < y.id THEN y.id ELSE x.id END AS id_b,
           p.distance AS distance,
           p.similarity AS similarity
    FROM fingerprint_pairs p
    JOIN documents x ON x.simhash = p.simhash_a
    JOIN documents y ON y.simhash = p.simhash_b
    WHERE x.fresh OR y.fresh
    UNION ALL
    SELECT CASE WHEN x.id < y.id THEN x.id ELSE y.id END AS id_a,
           CASE WHEN x.id < y.id THEN y.id ELSE x.id END AS id_b,
           arrow_cast(0, 'UInt8') AS distance,
           -- Documents of one fingerprint are not checked against each other.
           CAST(NULL AS DOUBLE) AS similarity
    FROM shared_documents x
    JOIN shared_documents y ON x.simhash = y.simhash AND x.id <> y.id
    WHERE x.fresh AND (NOT y.fresh OR x.id < y.id)
    -- No ORDER BY: sorting a million documents' 22 million pairs took longer than finding
    -- them and 3.5 GiB (docs/BENCHMARKS.md); the rows come in join order, and a query that
    -- needs an order sorts.
) TO ${pairs_dir} STORED AS PARQUET;

CREATE EXTERNAL TABLE pairs STORED AS PARQUET LOCATION ${pairs_dir};
