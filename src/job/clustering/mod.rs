//! How fingerprint pairs become components: union-find in this process, or SQL rounds that
//! never collect the pairs (for a cluster). Both label each fingerprint with the smallest
//! fingerprint of its component, so they give the same groups.

pub mod sql_rounds;
pub mod union_find;

use datafusion::prelude::SessionContext;

use crate::error::Result;
use crate::fingerprint::Width;
use crate::job::choices::Clustering;
use crate::job::params::StageParams;

/// Registers `fingerprint_components (simhash, component)` from `fingerprint_pairs`, the way
/// `clustering` says; against an index (`indexed`) also `group_components (group_id, component)`
/// for the indexed groups the batch's fingerprints belong to.
pub async fn components(
    ctx: &SessionContext,
    clustering: Clustering,
    params: &StageParams,
    indexed: bool,
) -> Result<()> {
    let bindings = params.bindings();
    if clustering == Clustering::Sql {
        let work = params.components_dir();
        let rounds = sql_rounds::sql_components(ctx, &work, indexed.then_some(&bindings)).await?;
        log::debug!("components in {rounds} SQL rounds");
        return Ok(());
    }
    match (params.width, indexed) {
        (Width::Bits128, false) => union_find::cluster_fingerprints::<u128>(ctx).await,
        (Width::Bits64, false) => union_find::cluster_fingerprints::<u64>(ctx).await,
        (Width::Bits128, true) => union_find::cluster_against_index::<u128>(ctx, &bindings).await,
        (Width::Bits64, true) => union_find::cluster_against_index::<u64>(ctx, &bindings).await,
    }
}
