-- Stage 5, union-find (the default clustering, in this process): the fingerprint pairs are
-- streamed out of the engine as edges; src/job/clustering/union_find.rs registers
-- `fingerprint_components (simhash, component)` from them.

SELECT simhash_a, simhash_b FROM fingerprint_pairs;
