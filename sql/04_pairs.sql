-- Stage 4: document pairs: the documents behind each fingerprint pair, and every two documents
-- that share a fingerprint (distance 0). One row per unordered pair, id_a < id_b, with the
-- estimated Jaccard similarity of their fingerprints' features (sql/04_verify.sql); NULL for
-- two documents of one fingerprint, which are duplicates without a check.
--
-- Reads `paired_documents` (sql/04_paired_documents.sql): the documents of a fingerprint with a
-- pair or with copies, the only ones that can be in a pair. Only pairs with a new (`fresh`)
-- document are listed: against an index, pairs of indexed documents were listed by their own
-- batches; without one every document is new.

-- Documents with a fingerprint another document has: the only ones with a pair at distance 0.
-- Most fingerprints belong to one document, so the self-join below joins these few. Here and
-- below the smaller input comes first: a hash join holds its first input in memory.
CREATE VIEW shared_documents AS
SELECT d.id, d.simhash, d.fresh
FROM (SELECT simhash FROM fingerprints WHERE document_count > 1) f
JOIN paired_documents d ON d.simhash = f.simhash;

COPY (
    -- least / greatest rather than CASE: a CASE over two string columns took 3.8 s of CPU for
    -- 26 million pairs, least and greatest 1.7 s.
    SELECT least(x.id, y.id) AS id_a,
           greatest(x.id, y.id) AS id_b,
           x.distance AS distance,
           x.similarity AS similarity
    -- The planner holds the smaller input in memory. The rows coming into this join (a pair for
    -- each document of its first fingerprint) can far outnumber the documents: a million
    -- generated documents gave 10.6 million rows against 0.9 million documents, and holding
    -- the rows peaked at 2.0 GiB against 0.6 for the documents (measured when this side was
    -- the documents of second fingerprints only).
    FROM paired_documents y
    JOIN (SELECT p.simhash_b, p.distance, p.similarity, d.id, d.fresh
          -- The planner puts the smaller of these two tables on the build side.
          FROM fingerprint_pairs p
          JOIN paired_documents d ON d.simhash = p.simhash_a) x
      ON y.simhash = x.simhash_b
    WHERE x.fresh OR y.fresh
    UNION ALL
    SELECT least(x.id, y.id) AS id_a,
           greatest(x.id, y.id) AS id_b,
           arrow_cast(0, 'UInt8') AS distance,
           -- Documents of one fingerprint are not checked against each other.
           CAST(NULL AS DOUBLE) AS similarity
    FROM shared_documents x
    JOIN shared_documents y ON x.simhash = y.simhash AND x.id <> y.id
    WHERE x.fresh AND (NOT y.fresh OR x.id < y.id)
    -- No ORDER BY: sorting a million documents' 22 million pairs took longer than finding
    -- them and 3.5 GiB (docs/BENCHMARKS.md); the rows come in join order, and a query that
    -- needs an order sorts.
-- zstd at level 1 rather than the other tables' 3: the largest output (two ids a row, a
-- million documents' 32.6 million rows), where level 3 spent a second more for files 6%
-- smaller (docs/BENCHMARKS.md).
) TO ${pairs_dir} STORED AS PARQUET OPTIONS ('format.compression' 'zstd(1)');

CREATE EXTERNAL TABLE pairs STORED AS PARQUET LOCATION ${pairs_dir};
