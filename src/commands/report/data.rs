//! What the report shows, gathered from a run's tables before any HTML is written: small
//! aggregates and samples, so the page costs the same whatever the corpus size.

/// Everything `page::render` needs.
#[derive(Debug, Clone)]
pub struct ReportData {
    /// The output folder or URL the report describes.
    pub output: String,
    /// When the report was written (RFC 3339, UTC).
    pub written_at: String,
    /// "The run at a glance": label and value, in order (documents, removed, groups, ...).
    pub glance: Vec<(String, String)>,
    /// The run's parameters as summary.json records them: name and value.
    pub parameters: Vec<(String, String)>,
    /// The stages, in the order they ran.
    pub stages: Vec<StageRow>,
    /// The run's k: distances 0..=k were matched.
    pub k: u32,
    /// Fingerprint width (64 or 128): the x axis of the distance plot ends at k.
    pub fingerprint_bits: u32,
    /// Pairs of documents per Hamming distance, one entry for every distance 0..=k (zeros too).
    pub distances: Vec<DistanceCount>,
    /// `--verify`'s threshold, when the run verified its candidates.
    pub min_similarity: Option<f64>,
    /// Candidate fingerprint pairs within k that verification dropped (0 without it).
    pub dropped_by_verify: u64,
    /// Groups per size: (group size, number of groups), by size ascending.
    pub group_sizes: Vec<(u64, u64)>,
    /// The largest groups, largest first.
    pub largest_groups: Vec<GroupSummary>,
    /// Sample pairs, a few at each distance, by distance ascending.
    pub samples: Vec<SamplePair>,
    /// Precision, recall and F1 against k, with `--truth` or `--labels`.
    pub quality: Option<Quality>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DistanceCount {
    pub distance: u32,
    pub pairs: u64,
}

/// One stage's line of the report.
#[derive(Debug, Clone)]
pub struct StageRow {
    pub stage: String,
    pub seconds: f64,
    /// The cores it kept busy (`StageTime::cores`); `None` where summary.json has no CPU time
    /// (a cluster's run, or one from before it was recorded) or the stage was too short.
    pub cores: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct GroupSummary {
    pub group_id: u64,
    pub size: u64,
    pub representative_id: String,
    /// The beginning of the representative's text (already cut to a few hundred characters).
    pub representative_text: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SamplePair {
    pub distance: u32,
    pub id_a: String,
    pub id_b: String,
    /// The estimated Jaccard similarity the pair was verified with, if it was.
    pub similarity: Option<f64>,
    /// The two cleaned texts (what the features were taken from), cut to a few thousand
    /// characters each; `None` when the input no longer has the row.
    pub text_a: Option<String>,
    pub text_b: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Quality {
    /// The truth or labels file scored against.
    pub against: String,
    pub rows: Vec<QualityRow>,
    /// The k with the best F1, if any row has one.
    pub best_k: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QualityRow {
    pub k: u32,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
}
