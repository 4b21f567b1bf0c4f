//! What `--output-format delta --append` keeps true across runs. An index
//! gives each batch its documents' ids once and its groups ids after the last batch's; without
//! one, each run would add its rows as they are: an id already there a second time, and its
//! groups numbered from 1 again, so that two runs' groups 1 read as one group of both.
//!
//! So an append refuses ids the `signatures` table already holds (before any work, as an index
//! does), and without an index numbers its groups after the largest `group_id` of the `groups`
//! table (when it commits, so the job's stages are the same as any run's). With an index, ids
//! in the tables are in the index too, unless a run stopped after its commits and before it
//! added its batch to the index: the check catches that batch repeated.

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::functions_aggregate::expr_fn::max;
use datafusion::prelude::{DataFrame, SessionContext, col, lit};
use deltalake_core::DeltaTable;

use crate::delta::output::register_table;
use crate::delta::types::from_storable;
use crate::engine::sql::{Bindings, pretty, query_stage};
use crate::engine::stages;
use crate::error::{Error, QueryContext, Result};
use crate::storage::Place;

/// The name the existing `signatures` table is registered under for the check.
const APPENDED_SIGNATURES: &str = "appended_signatures";

/// Refuses the run when ids of its corpus (`corpus`, id column `id_type`) are in the
/// `signatures` table at `place` (the version summary.json records), naming a few, or are of
/// another kind than the table's. `indexed`: the run is a batch of an index, which checked its
/// ids first and did not refuse them.
pub async fn refuse_ids_already_there(
    ctx: &SessionContext,
    place: &Place,
    version: u64,
    id_type: &DataType,
    indexed: bool,
    bindings: &Bindings,
) -> Result<()> {
    register_table(ctx, APPENDED_SIGNATURES, place, version).await?;
    let stored = ctx
        .table(APPENDED_SIGNATURES)
        .await
        .context(|| format!("reading {place}"))?;
    let stored_type = stored
        .schema()
        .field_with_unqualified_name("id")
        .map(|f| f.data_type().clone())
        .ok();
    let taken = match stored_type {
        // The Delta writer would convert the ids to the table's type (a string "1" to the
        // integer 1, or fail on "s1" after the whole run), so they must be of its kind.
        Some(stored) if !same_kind(&stored, id_type) => Err(Error::Input(format!(
            "--append: {place} holds ids of type {stored}, and this run's are {id_type}; one \
             table's ids are of one kind (integers or strings): cast them in the input, or \
             write to another --output"
        ))),
        _ => query_stage(ctx, &stages::IDS_APPENDED, bindings).await,
    };
    let _ = ctx.deregister_table(APPENDED_SIGNATURES);
    let taken = taken?;
    if taken.iter().all(|b| b.num_rows() == 0) {
        return Ok(());
    }
    if indexed {
        return Err(Error::Input(format!(
            "--append: these ids are in {place} but not in --index: a run added them to the \
             tables but not its batch to the index (it stopped after its commits), so this \
             run would add their rows a second time. Restore each table to the version before \
             that run (summary.json's \"previous\", docs/ROBUSTNESS.md) and repeat it, or \
             leave them out. Some of them:\n{}",
            pretty(&taken)?
        )));
    }
    Err(Error::Input(format!(
        "--append: these ids are already in {place}, from an earlier run; without --index a \
         run's rows are added as they are, so each would be there twice (and in two runs' \
         groups). Leave those documents out of this run, give each document an id of its own, \
         or replace the tables with --overwrite. Some of them:\n{}",
        pretty(&taken)?
    )))
}

/// Strings of any width compare with each other, and integers of any width; other types only
/// with themselves.
fn same_kind(a: &DataType, b: &DataType) -> bool {
    let text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    a == b || (text(a) && text(b)) || (a.is_integer() && b.is_integer())
}

/// `frame`, a run's `groups`, with its group ids moved past the largest that `existing` (the
/// groups table at `place`) holds.
pub async fn group_ids_after(
    ctx: &SessionContext,
    existing: &DeltaTable,
    frame: DataFrame,
    place: &Place,
) -> Result<DataFrame> {
    let what = || format!("reading the largest group_id of {place}");
    let provider = existing.table_provider().await.context(what)?;
    let stored = from_storable(ctx.read_table(provider).context(what)?)?;
    let batches = stored
        .aggregate(vec![], vec![max(col("group_id"))])
        .context(what)?
        .collect()
        .await
        .context(what)?;
    let largest = batches
        .iter()
        .filter_map(|b| b.column(0).as_primitive_opt::<UInt64Type>())
        .flat_map(|values| values.iter().flatten())
        .max()
        .unwrap_or(0);
    if largest == 0 {
        return Ok(frame);
    }
    if largest > crate::index::LARGEST_GROUP_ID {
        return Err(Error::Input(format!(
            "--append: {place} holds group_id {largest}; group ids stay below {}, so this \
             run's groups cannot be numbered after it. Replace the tables with --overwrite",
            crate::index::LARGEST_GROUP_ID
        )));
    }
    frame
        .with_column("group_id", col("group_id") + lit(largest))
        .context(|| format!("numbering the run's groups after {place}'s"))
}
