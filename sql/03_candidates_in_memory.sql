-- Stage 3 in this process (src/job/candidate_scan.rs), the default for a run on its own: the
-- distinct fingerprints, read into memory once. Each table of the plan is then cut into the
-- same kind of key slices as sql/03_candidates_scan.sql groups by, and each slice sorted and
-- scanned by `band_pairs`'s own code, the tables shared out among the cores; what it finds is
-- written by sql/03_candidates_found.sql. A cluster, an index with batches, 128-bit
-- fingerprints and a memory pool without room for the fingerprints run
-- sql/03_candidates_scan.sql instead: the same pairs.

SELECT simhash FROM fingerprints;
