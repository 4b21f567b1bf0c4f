//! Stage 4's first step: `paired_documents`, the documents of a fingerprint with a pair or with
//! copies, which the pairs and the groups read instead of every document. In this process the
//! fingerprints that qualify (sql/04_paired_fingerprints.sql) are held as a set, and each
//! document is kept by a lookup in it, `paired_fingerprint(simhash)`
//! (sql/04_paired_documents_filtered.sql). sql/04_paired_documents.sql, which a cluster runs
//! and which runs here when the pool refuses the set, joins the documents to them instead: every
//! document probes the join's hash table, 0.21 s of CPU of the 0.25 s the statement took at 4M
//! fingerprints.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{HashSet, utils::take_function_args};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use crate::engine::sql::{Bindings, run_stage, stage_frame};
use crate::engine::stages;
use crate::error::{QueryContext, Result};
use crate::fingerprint::Width;
use crate::udf::FingerprintColumn;

/// Name of the SQL function sql/04_paired_documents_filtered.sql calls; registered only while
/// it runs.
const FUNCTION: &str = "paired_fingerprint";

/// Writes `paired_documents`: by the set in this process, by the join on a cluster or when the
/// pool refuses the set.
pub async fn write(
    ctx: &SessionContext,
    bindings: &Bindings,
    width: Width,
    on_cluster: bool,
) -> Result<()> {
    if !on_cluster {
        let filtered = match width {
            Width::Bits64 => filter_by_set::<u64>(ctx, bindings).await?,
            Width::Bits128 => filter_by_set::<u128>(ctx, bindings).await?,
        };
        if filtered {
            return Ok(());
        }
    }
    run_stage(ctx, &stages::PAIRED_DOCUMENTS, bindings).await
}

/// Reads the paired fingerprints into a set and runs sql/04_paired_documents_filtered.sql with
/// `paired_fingerprint` over it; false, having written nothing, when the pool refuses the set.
async fn filter_by_set<F>(ctx: &SessionContext, bindings: &Bindings) -> Result<bool>
where
    F: FingerprintColumn + std::hash::Hash + Eq,
{
    let Some(set) = PairedSet::<F>::read(ctx, bindings).await? else {
        log::debug!("{}: joined instead", stages::PAIRED_DOCUMENTS_FILTERED.name);
        return Ok(false);
    };
    let function = ScalarUDF::new_from_impl(PairedFingerprint {
        set: Arc::new(set),
        // Volatile as `candidate_similarity` is (src/job/verify.rs): the filter stays where it is
        // written and each document is looked up once.
        signature: Signature::exact(vec![F::data_type()], Volatility::Volatile),
    });
    ctx.register_udf(function);
    let result = run_stage(ctx, &stages::PAIRED_DOCUMENTS_FILTERED, bindings).await;
    ctx.deregister_udf(FUNCTION);
    result.map(|()| true)
}

/// The paired fingerprints, with the pool's account of their memory.
struct PairedSet<F> {
    fingerprints: HashSet<F>,
    _reservation: MemoryReservation,
}

impl<F: FingerprintColumn + std::hash::Hash + Eq> PairedSet<F> {
    /// The set, or `None` when the pool refuses its memory.
    async fn read(ctx: &SessionContext, bindings: &Bindings) -> Result<Option<Self>> {
        let stage = &stages::PAIRED_FINGERPRINTS;
        let what = || stage.name.to_string();
        let reservation =
            MemoryConsumer::new("paired fingerprints").register(&ctx.runtime_env().memory_pool);
        let mut fingerprints: HashSet<F> = HashSet::default();
        let frame = stage_frame(ctx, stage, bindings).await?;
        let mut stream = frame.execute_stream().await.context(what)?;
        while let Some(batch) = stream.next().await {
            let batch = batch.context(what)?;
            fingerprints.reserve(batch.num_rows());
            // A slot holds a value and a control byte, and the table is at most 7/8 full.
            let held = fingerprints.capacity() * (size_of::<F>() + 1) * 8 / 7;
            if reservation.try_resize(held).is_err() {
                return Ok(None);
            }
            F::for_each_value(batch.column(0), |_, fingerprint| {
                fingerprints.insert(fingerprint);
            })
            .context(what)?;
        }
        Ok(Some(Self {
            fingerprints,
            _reservation: reservation,
        }))
    }
}

/// `paired_fingerprint(simhash) -> Boolean`: whether the fingerprint is in the set; false for
/// NULL, as the join it stands for leaves a NULL fingerprint out.
struct PairedFingerprint<F> {
    set: Arc<PairedSet<F>>,
    signature: Signature,
}

impl<F> std::fmt::Debug for PairedFingerprint<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(FUNCTION)
    }
}

// One instance per stage: equal only to itself.
impl<F> PartialEq for PairedFingerprint<F> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.set, &other.set)
    }
}

impl<F> Eq for PairedFingerprint<F> {}

impl<F> std::hash::Hash for PairedFingerprint<F> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.set).hash(state);
    }
}

impl<F: FingerprintColumn + std::hash::Hash + Eq> ScalarUDFImpl for PairedFingerprint<F> {
    fn name(&self) -> &str {
        FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let [fingerprints] = take_function_args(FUNCTION, &args.args)?;
        let fingerprints = fingerprints.to_array(args.number_rows)?;
        let mut paired = vec![false; args.number_rows];
        let set = &self.set.fingerprints;
        F::for_each_value(&fingerprints, |row, fingerprint| {
            paired[row] = set.contains(&fingerprint);
        })?;
        Ok(ColumnarValue::Array(
            Arc::new(BooleanArray::from(paired)) as ArrayRef
        ))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::StringArray;
    use datafusion::arrow::datatypes::{Field, SchemaRef};

    use super::*;
    use crate::engine::sql::folder_literal;
    use crate::job::test_session;
    use crate::rng::SplitMix64;
    use crate::storage::Place;

    /// A session with `documents` (row i: id `d{i}`, fingerprint `simhashes[i]`, input order
    /// i), `fingerprints` counted from them and `fingerprint_pairs` of `pairs`, two partitions
    /// each, bound to write into `dir`.
    fn session<F: FingerprintColumn>(
        simhashes: &[Option<F>],
        pairs: &[(F, F)],
        pool: Option<usize>,
        dir: &Place,
    ) -> (SessionContext, Bindings) {
        let ctx = test_session::context(pool);
        let n = simhashes.len();
        test_session::CaseDocuments {
            ids: Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("d{i}")),
            )),
            simhashes,
            batches: vec![0; n],
            input_order: (0..n as i64).collect(),
            fresh: vec![true; n],
        }
        .register(&ctx);
        let fingerprint = |name: &str| Field::new(name, F::data_type(), true);
        let a: Vec<F> = pairs.iter().map(|p| p.0).collect();
        let b: Vec<F> = pairs.iter().map(|p| p.1).collect();
        test_session::register_in_halves(
            &ctx,
            "fingerprint_pairs",
            vec![fingerprint("simhash_a"), fingerprint("simhash_b")],
            vec![F::column(&a).unwrap(), F::column(&b).unwrap()],
        );
        let mut bindings = Bindings::default();
        bindings
            .set(
                "paired_documents_dir",
                folder_literal(&dir.join("paired_documents")),
            )
            .set("work_table_options", test_session::work_table_options());
        (ctx, bindings)
    }

    /// `paired_documents` as text, by input order, and its schema.
    async fn paired_table(ctx: &SessionContext) -> (SchemaRef, String) {
        let sql = "SELECT * FROM paired_documents ORDER BY input_order";
        test_session::table_text(ctx, sql).await
    }

    /// `paired_documents` by the set, and by the join (what a cluster runs).
    async fn both_ways<F: FingerprintColumn>(
        simhashes: &[Option<F>],
        pairs: &[(F, F)],
        width: Width,
    ) -> [(SchemaRef, String); 2] {
        let dir = tempfile::tempdir().unwrap();
        let mut tables = Vec::new();
        for (name, on_cluster) in [("set", false), ("joined", true)] {
            let place = Place::Local(dir.path().join(name));
            let (ctx, bindings) = session(simhashes, pairs, None, &place);
            write(&ctx, &bindings, width, on_cluster).await.unwrap();
            tables.push(paired_table(&ctx).await);
        }
        tables.try_into().unwrap()
    }

    /// The ids of `paired_documents`' rows in a table printed by `paired_table`.
    fn ids(table: &str) -> Vec<&str> {
        table
            .lines()
            .filter_map(|line| line.strip_prefix("| d"))
            .map(|rest| rest.split_whitespace().next().unwrap_or(""))
            .collect()
    }

    #[tokio::test]
    async fn a_hand_checked_case_in_both_widths() {
        // d0 and d3 share 5; 7 and 9 are a pair (d1, d4); 11 (d2) has neither; d5 has no
        // fingerprint.
        let simhashes = [Some(5u64), Some(7), Some(11), Some(5), Some(9), None];
        let [(schema, set), (joined_schema, joined)] =
            both_ways(&simhashes, &[(7, 9)], Width::Bits64).await;
        assert_eq!(ids(&set), ["0", "1", "3", "4"], "{set}");
        assert_eq!((schema, set), (joined_schema, joined));
        let wide: Vec<Option<u128>> = simhashes
            .iter()
            .map(|s| s.map(|v| u128::from(v) << 70))
            .collect();
        let [(schema, set), (joined_schema, joined)] =
            both_ways(&wide, &[(7 << 70, 9 << 70)], Width::Bits128).await;
        assert_eq!(ids(&set), ["0", "1", "3", "4"], "{set}");
        assert_eq!((schema, set), (joined_schema, joined));
    }

    #[tokio::test]
    async fn the_set_keeps_the_documents_the_join_keeps() {
        let mut random = SplitMix64(44);
        let pool: Vec<u64> = (0..30_000).map(|_| random.next_u64()).collect();
        let simhashes: Vec<Option<u64>> = (0..50_000)
            .map(|_| match random.below(50) {
                0 => None,
                _ => Some(pool[random.below(pool.len())]),
            })
            .collect();
        let pairs: Vec<(u64, u64)> = (0..5_000)
            .map(|_| (pool[random.below(pool.len())], random.next_u64()))
            .collect();
        let [(schema, set), (joined_schema, joined)] =
            both_ways(&simhashes, &pairs, Width::Bits64).await;
        assert_eq!(schema, joined_schema);
        assert!(ids(&set).len() > 10_000, "{}", ids(&set).len());
        assert!(set == joined, "the tables differ");
    }

    #[tokio::test]
    async fn without_memory_for_the_set_the_join_runs() {
        // 16 bytes cannot hold the set (a slot of nine bytes, several slots): nothing is
        // filtered, and the join, which cannot run in 16 bytes either, names its stage. 16 MiB
        // hold the set (and the sort that reads the table back).
        let dir = tempfile::tempdir().unwrap();
        let place = Place::Local(dir.path().to_path_buf());
        let simhashes = [Some(5u64), Some(5)];
        let (ctx, bindings) = session(&simhashes, &[], Some(16), &place);
        let e = write(&ctx, &bindings, Width::Bits64, false)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(stages::PAIRED_DOCUMENTS.name), "{e}");
        let (ctx, bindings) = session(&simhashes, &[], Some(16 << 20), &place);
        assert!(filter_by_set::<u64>(&ctx, &bindings).await.unwrap());
        let (_, table) = paired_table(&ctx).await;
        assert_eq!(ids(&table), ["0", "1"], "{table}");
    }
}
