//! What a finished `run` or `match` prints on standard output.

use std::path::Path;

use crate::commands::query::OUTPUT_TABLES;
use crate::engine::staging::SUMMARY_FILE;
use crate::job::choices::PairsListed;
use crate::job::summary::Summary;

pub fn report(summary: &Summary, output: &Path) {
    let c = &summary.counts;
    println!(
        "{} documents ({} with NULL text, {} with nothing to fingerprint): {} pairs within k = {}, \
         {} groups holding {} documents, {} removed.",
        c.documents,
        c.null_texts,
        c.empty_texts,
        c.pairs,
        summary.parameters.k,
        c.groups,
        c.grouped_documents,
        c.documents_removed
    );
    if summary.parameters.pairs == PairsListed::All && c.pairs > 10 * c.documents.max(1) {
        println!(
            "Note: {} pairs for {} documents: many copies of the same pages. --pairs star lists \
             at most one pair per document (plus one per fingerprint pair) with the same groups.",
            c.pairs, c.documents
        );
    }
    println!(
        "Outputs in {} ({:.2} s):",
        output.display(),
        summary.total_seconds
    );
    for table in OUTPUT_TABLES {
        if output.join(table).is_dir() {
            println!("  {}/", output.join(table).display());
        }
    }
    println!("  {}", output.join(SUMMARY_FILE).display());
    println!(
        "Ask: neardup query --data {} \"SELECT group_id, count(*) AS docs FROM groups GROUP BY 1 ORDER BY 2 DESC LIMIT 10\"",
        output.display()
    );
}
