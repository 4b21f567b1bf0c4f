-- Stage 3, before the candidates: a sample of the distinct fingerprints, from which the planner
-- counts real key sizes to choose the band plan (src/planner.rs). The table is grouped, so its
-- first rows are in no useful order. ${sample_size} is `planner::SAMPLE`, bound by
-- `sample_fingerprints` in src/job/matching.rs (which `neardup plan` runs too).

SELECT simhash FROM fingerprints LIMIT ${sample_size};
