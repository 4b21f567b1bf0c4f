//! The job's SQL files, compiled into the binary, in the order the job runs them; each file's
//! header says what it does. `crate::engine::sql` renders and runs them.

/// One SQL file of the job.
#[derive(Debug, Clone, Copy)]
pub struct Stage {
    pub name: &'static str,
    pub sql: &'static str,
}

/// Declares a stage for each file of `sql/`, and `ALL` listing them (a test checks it lists
/// every file).
macro_rules! stages {
    ($($name:ident = $file:literal;)*) => {
        $(pub const $name: Stage = Stage {
            name: concat!("sql/", $file),
            sql: include_str!(concat!("../../sql/", $file)),
        };)*
        /// Every stage, in the order of their files.
        pub const ALL: &[Stage] = &[$($name),*];
    };
}

stages! {
    IDS_APPENDED = "00_ids_appended.sql";
    IDS_HASHED = "00_ids_hashed.sql";
    IDS_INDEXED = "00_ids_indexed.sql";
    IDS_MISSING = "00_ids_missing.sql";
    IDS_REPEATED = "00_ids_repeated.sql";
    INDEX_GROUPS = "00_index_groups.sql";
    SIGNATURES = "01_signatures.sql";
    SIGNATURES_GIVEN = "01_signatures_given.sql";
    DOCUMENTS = "02_documents.sql";
    FINGERPRINT_VALUES = "02_fingerprint_values.sql";
    FINGERPRINTS = "02_fingerprints.sql";
    FINGERPRINTS_COUNTED = "02_fingerprints_counted.sql";
    FINGERPRINTS_INDEX = "02_fingerprints_index.sql";
    CANDIDATES_FOUND = "03_candidates_found.sql";
    CANDIDATES_IN_MEMORY = "03_candidates_in_memory.sql";
    CANDIDATES_INDEX = "03_candidates_index.sql";
    CANDIDATES_INDEX_JOIN = "03_candidates_index_join.sql";
    CANDIDATES_JOIN = "03_candidates_join.sql";
    CANDIDATES_SCAN = "03_candidates_scan.sql";
    CANDIDATES_TABLE = "03_candidates_table.sql";
    PLAN_SAMPLE = "03_plan_sample.sql";
    PAIRED_DOCUMENTS = "04_paired_documents.sql";
    PAIRED_DOCUMENTS_FILTERED = "04_paired_documents_filtered.sql";
    PAIRED_FINGERPRINTS = "04_paired_fingerprints.sql";
    PAIRS = "04_pairs.sql";
    PAIRS_EXPANDED = "04_pairs_expanded.sql";
    PAIRS_STAR = "04_pairs_star.sql";
    VERIFY = "04_verify.sql";
    VERIFY_CANDIDATE_FINGERPRINTS = "04_verify_candidate_fingerprints.sql";
    VERIFY_DOCUMENT_SKETCHES = "04_verify_document_sketches.sql";
    VERIFY_LOOKUP = "04_verify_lookup.sql";
    VERIFY_NONE = "04_verify_none.sql";
    VERIFY_SKETCHES = "04_verify_sketches.sql";
    COMPONENTS_EDGES = "05_components_edges.sql";
    COMPONENTS_INDEX_GROUPS = "05_components_index_groups.sql";
    COMPONENTS_INDEX_LABELS = "05_components_index_labels.sql";
    COMPONENTS_INDEX_START = "05_components_index_start.sql";
    COMPONENTS_LABELS = "05_components_labels.sql";
    COMPONENTS_ROUND = "05_components_round.sql";
    COMPONENTS_SETTLED = "05_components_settled.sql";
    COMPONENTS_SMALL = "05_components_small.sql";
    COMPONENTS_START = "05_components_start.sql";
    GROUP_MEMBERS = "05_group_members.sql";
    GROUPS = "05_groups.sql";
    GROUPS_INDEX = "05_groups_index.sql";
    GROUPS_NUMBERED = "05_groups_numbered.sql";
    DEDUP = "06_dedup.sql";
    DEDUP_KEPT = "06_dedup_kept.sql";
    DEDUP_REMOVED = "06_dedup_removed.sql";
    INDEX_BATCH = "07_index_batch.sql";
    INDEX_NEXT_GROUP = "07_index_next_group.sql";
    COUNT_DOCUMENTS = "08_count_documents.sql";
    COUNT_FINGERPRINTS = "08_count_fingerprints.sql";
    COUNT_GROUPS = "08_count_groups.sql";
    COUNT_GROUPS_INDEX = "08_count_groups_index.sql";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_sql_is_a_stage() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/sql");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| format!("sql/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        files.sort();
        let stages: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        assert_eq!(stages, files);
    }
}
