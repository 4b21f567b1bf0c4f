//! What a finished `run` or `match` prints on standard output.

use crate::engine::staging::{OUTPUT_TABLES, SUMMARY_FILE};
use crate::job::choices::PairsListed;
use crate::job::summary::Summary;
use crate::storage::Place;

pub fn report(summary: &Summary, output: &Place) {
    let c = &summary.counts;
    let counted = |n: u64, noun: &str| match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    };
    if summary.command == "match" {
        // Fingerprints given, no texts: nothing was NULL or empty as a text, and nothing was
        // removed, since `match` writes no deduplicated corpus.
        crate::to_stdout!(
            "{}: {} within k = {}, {} holding {}; keeping one per group would remove {}.",
            counted(c.documents, "document"),
            counted(c.pairs, "pair"),
            summary.parameters.k,
            counted(c.groups, "group"),
            counted(c.grouped_documents, "document"),
            c.documents_removed
        );
    } else {
        crate::to_stdout!(
            "{} ({} with NULL text, {} with nothing to fingerprint): {} within k = {}, {} \
             holding {}, {} removed.",
            counted(c.documents, "document"),
            c.null_texts,
            c.empty_texts,
            counted(c.pairs, "pair"),
            summary.parameters.k,
            counted(c.groups, "group"),
            counted(c.grouped_documents, "document"),
            c.documents_removed
        );
    }
    if summary.parameters.pairs == PairsListed::All && c.pairs > 10 * c.documents.max(1) {
        crate::to_stdout!(
            "Note: {} pairs for {} documents: many copies of the same pages. --pairs star lists \
             at most one pair per document (plus one per fingerprint pair) with the same groups.",
            c.pairs,
            c.documents
        );
    }
    crate::to_stdout!("Outputs in {output} ({:.2} s):", summary.total_seconds);
    match output {
        Place::Local(path) => {
            for table in OUTPUT_TABLES {
                if path.join(table).is_dir() {
                    crate::to_stdout!("  {}/", path.join(table).display());
                }
            }
            crate::to_stdout!("  {}", path.join(SUMMARY_FILE).display());
        }
        Place::Remote(_) => crate::to_stdout!(
            "  {} (the manifest: it names the run's tables and {SUMMARY_FILE})",
            output.join("_SUCCESS")
        ),
    }
    crate::to_stdout!(
        "Ask: neardup query --data {} \"SELECT group_id, count(*) AS docs FROM groups GROUP BY 1 ORDER BY 2 DESC LIMIT 10\"",
        for_shell(&output.to_string())
    );
}

/// `text` as one word a POSIX shell reads back as it is: as it is where it holds only
/// characters no shell treats specially, else in single quotes (`out/my run` was two words).
fn for_shell(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:@%+=,-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::for_shell;

    #[test]
    fn a_path_is_quoted_only_where_a_shell_would_split_or_expand_it() {
        assert_eq!(for_shell("out/sample"), "out/sample");
        assert_eq!(for_shell("s3://lake/out-1"), "s3://lake/out-1");
        assert_eq!(for_shell("out/my run"), "'out/my run'");
        assert_eq!(for_shell("out/it's"), r"'out/it'\''s'");
        assert_eq!(for_shell("out/$HOME"), "'out/$HOME'");
    }
}
