-- Stage 3, before the candidates: the distinct fingerprints, from which the planner keeps a
-- sample to count real key sizes and choose the band plan (src/planner.rs). The sample is the
-- `planner::SAMPLE` fingerprints with the smallest mixed value (`sample_fingerprints` in
-- src/job/plan_sample.rs, which `neardup plan` runs too), not the first rows: a grouping that
-- spilled under --memory-limit writes its rows sorted, and the smallest fingerprints share
-- their leading bits. Where this process counted the fingerprints it kept the same sample on
-- the way, and this query does not run.

SELECT simhash FROM fingerprints;
