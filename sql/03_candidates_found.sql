-- Stage 3 in this process, its end: the candidate pairs sql/03_candidates_in_memory.sql's scan
-- finds (`found_candidates`, registered while this runs: simhash_a < simhash_b, distance within
-- k), written to the folder sql/03_candidates_table.sql declares, as one pass of
-- sql/03_candidates_scan.sql writes them. The table is a stream, a partition per core: each
-- core's batches as its scan finds them, so the pairs are written while the scan goes on.

COPY (
    SELECT simhash_a, simhash_b, distance
    FROM found_candidates
) TO ${candidate_pairs_dir} STORED AS PARQUET ${work_table_options};
