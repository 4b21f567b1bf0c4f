//! Stage 8: the counts summary.json reports, read from the tables the stages wrote
//! (sql/08_count_*.sql), and the check that dedup lost no row.

use datafusion::prelude::SessionContext;

use crate::engine::sql::{count_rows, first_value, query_stage};
use crate::engine::stages;
use crate::error::{Error, Result};
use crate::job::params::{SourceParams, StageParams};
use crate::job::summary::Counts;

/// Counts for the summary. Against an index `groups` also lists indexed documents, and only this
/// batch's documents can be removed from its dedup.
pub async fn count(ctx: &SessionContext, params: &StageParams) -> Result<Counts> {
    let bindings = params.bindings();
    let texts = matches!(params.source, SourceParams::Texts { .. });
    let documents = match texts {
        true => &stages::COUNT_DOCUMENTS,
        false => &stages::COUNT_FINGERPRINTS,
    };
    let documents = query_stage(ctx, documents, &bindings).await?;
    let groups = match params.index {
        None => &stages::COUNT_GROUPS,
        Some(_) => &stages::COUNT_GROUPS_INDEX,
    };
    let groups = query_stage(ctx, groups, &bindings).await?;
    let mut counts = Counts {
        documents: first_value(&documents, 0)?,
        null_texts: first_value(&documents, 1)?,
        empty_texts: first_value(&documents, 4)?,
        short_texts: first_value(&documents, 5)?,
        distinct_fingerprints: first_value(&documents, 3)?,
        candidate_pairs: count_rows(ctx, "candidate_pairs").await?,
        fingerprint_pairs: count_rows(ctx, "fingerprint_pairs").await?,
        pairs: count_rows(ctx, "pairs").await?,
        groups: first_value(&groups, 0)?,
        grouped_documents: first_value(&groups, 1)?,
        documents_removed: first_value(&groups, 2)?,
        documents_kept: None,
    };
    if texts {
        let kept = count_rows(ctx, "dedup").await?;
        if kept + counts.documents_removed != counts.documents {
            return Err(Error::Internal(format!(
                "dedup kept {kept} of {} documents with {} removed: rows were lost",
                counts.documents, counts.documents_removed
            )));
        }
        counts.documents_kept = Some(kept);
    }
    Ok(counts)
}
