//! Stage 4's verification: each candidate pair of fingerprints kept when the estimated Jaccard
//! similarity of their sketches reaches `--verify` (sql/04_verify.sql says why). In this process
//! the sketches of the candidates' fingerprints are read once into memory, and a SQL function,
//! `candidate_similarity(simhash_a, simhash_b)`, looks up a candidate pair's two and compares
//! them (sql/04_verify_lookup.sql). A cluster's executors do not share this process's memory, so
//! a cluster joins the sketches to the candidates instead (sql/04_verify.sql): the same rows.

use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::as_fixed_size_binary_array;
use datafusion::common::{HashMap, exec_err, utils::take_function_args};
use datafusion::config::ConfigOptions;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use tokio::task::JoinSet;

use crate::engine::sql::{Bindings, run_stage, run_stage_with, stage_frame};
use crate::engine::stages::{self, Stage};
use crate::error::{Error, QueryContext, Result};
use crate::fingerprint::Width;
use crate::job::cores::shard_bits;
use crate::text::sketch::SKETCH_BYTES;
use crate::udf::FingerprintColumn;
use crate::udf::similarity::similarities_by;

/// Name of the SQL function sql/04_verify_lookup.sql calls; registered only while it runs.
const FUNCTION: &str = "candidate_similarity";

/// Writes `fingerprint_pairs` from `candidate_pairs`: in memory here, by joins on a cluster.
pub async fn verify(
    ctx: &SessionContext,
    bindings: &Bindings,
    width: Width,
    on_cluster: bool,
) -> Result<()> {
    if on_cluster {
        // The joins that find the candidates' sketches hold the input written first: the
        // candidates' fingerprints, then (sql/04_verify.sql) the sketches. Left to itself the
        // planner held every document with its sketch instead, whose size it knows from the
        // Parquet footers: at 1M generated documents the sketch lookup alone peaked at 1.1 GiB
        // that way against 0.45.
        let in_order = |options: &mut ConfigOptions| {
            options.optimizer.join_reordering = false;
            Ok(())
        };
        run_stage(ctx, &stages::VERIFY_SKETCHES, bindings).await?;
        return run_stage_with(ctx, &stages::VERIFY, bindings, in_order).await;
    }
    match width {
        Width::Bits64 => verify_in_memory::<u64>(ctx, bindings).await,
        Width::Bits128 => verify_in_memory::<u128>(ctx, bindings).await,
    }
}

/// Runs sql/04_verify_lookup.sql: reads the candidates' sketches into memory, counted against
/// the session's memory pool, and writes `fingerprint_pairs`. The memory is given back when it
/// returns.
async fn verify_in_memory<F: FingerprintColumn>(
    ctx: &SessionContext,
    bindings: &Bindings,
) -> Result<()> {
    let sketches = Arc::new(Sketches::<F>::read(ctx, bindings).await?);
    let function = ScalarUDF::new_from_impl(CandidateSimilarity {
        sketches: Arc::clone(&sketches),
        // Volatile for the reason `sketch_similarity` is (src/udf/similarity.rs): so that the
        // filter on it is not pushed down and the similarity computed twice.
        signature: Signature::exact(vec![F::data_type(), F::data_type()], Volatility::Volatile),
    });
    ctx.register_udf(function);
    let result = run_stage(ctx, &stages::VERIFY_LOOKUP, bindings).await;
    ctx.deregister_udf(FUNCTION);
    result
}

/// No sketch for a fingerprint whose documents have none (`sketch` NULL).
const NO_SKETCH: u32 = u32::MAX;

/// Some candidate fingerprints (those `shard_of` sends here), each with its sketch: its place
/// in `bytes` (`SKETCH_BYTES` each), or `NO_SKETCH`.
struct Shard<F> {
    place: HashMap<F, u32>,
    bytes: Vec<u8>,
    /// The bytes the pool was last told this shard holds.
    told: usize,
}

impl<F> Default for Shard<F> {
    fn default() -> Self {
        Self {
            place: HashMap::default(),
            bytes: Vec::new(),
            told: 0,
        }
    }
}

/// Each candidate fingerprint's sketch, in shards that the cores fill in parallel while
/// `candidate_pairs` and the documents are read: one map filled on one core kept this reading
/// at 1.5 of two cores busy (4.4 s at 10M generated documents, 134 million candidate ends;
/// 3.5-3.7 s and 1.7-1.8 cores in shards).
struct Sketches<F> {
    shards: Vec<Shard<F>>,
    /// `shard_of`'s shift: 64 less the bits of the number of shards.
    shift: u32,
    /// The pool's account of this memory, released when dropped.
    _reservation: MemoryReservation,
}

/// The shard of `fingerprint` among 2^(64 - shift): a multiplicative hash of its bits, since
/// the top bits of similar pages' fingerprints agree.
fn shard_of<F: FingerprintColumn>(fingerprint: F, shift: u32) -> usize {
    let bits = fingerprint.widen();
    let folded = (bits as u64) ^ ((bits >> 64) as u64);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// The shards while the cores fill them, each behind its lock, with the pool's account.
struct Filling<F> {
    shards: Vec<Mutex<Shard<F>>>,
    shift: u32,
    reservation: MemoryReservation,
}

impl<F: FingerprintColumn> Sketches<F> {
    /// Each candidate fingerprint's smallest sketch among its documents'
    /// (sql/04_verify_sketches.sql's `candidate_sketches`), kept in place as the documents
    /// stream by. The aggregate that view plans held every candidate's sketch a second time, as
    /// did its output while this copy was made: at 10M generated documents verification peaked
    /// at 5.7 GiB that way.
    async fn read(ctx: &SessionContext, bindings: &Bindings) -> Result<Self> {
        let cores = ctx.copied_config().target_partitions().max(1);
        let bits = shard_bits(cores);
        let filling = Arc::new(Filling {
            shards: (0..1usize << bits).map(|_| Mutex::default()).collect(),
            shift: 64 - bits,
            reservation: MemoryConsumer::new("verification sketches")
                .register(&ctx.runtime_env().memory_pool),
        });
        // The candidates' two fingerprints, then the documents' fingerprint and sketch.
        let candidates = &stages::VERIFY_CANDIDATE_FINGERPRINTS;
        read_partitions(ctx, bindings, candidates, &filling, &[0, 1], add_candidates).await?;
        let documents = &stages::VERIFY_DOCUMENT_SKETCHES;
        read_partitions(ctx, bindings, documents, &filling, &[0], add_sketches).await?;
        let unshared = || Error::Internal("verification: the sketches are still shared".into());
        let filling = Arc::try_unwrap(filling).map_err(|_| unshared())?;
        let shards = filling
            .shards
            .into_iter()
            .map(|shard| shard.into_inner().map_err(|_| unshared()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            shards,
            shift: filling.shift,
            _reservation: filling.reservation,
        })
    }

    /// The sketch of `fingerprint`: `None` when it has none, an error when it is not a
    /// candidate's (every end of a candidate pair has a document, so it never is).
    fn sketch(&self, fingerprint: &F) -> datafusion::error::Result<Option<&[u8]>> {
        let shard = &self.shards[shard_of(*fingerprint, self.shift)];
        match shard.place.get(fingerprint) {
            Some(&NO_SKETCH) => Ok(None),
            Some(&at) => {
                let start = at as usize * SKETCH_BYTES;
                Ok(shard.bytes.get(start..start + SKETCH_BYTES))
            }
            None => exec_err!("{FUNCTION}: fingerprint {fingerprint:?} is not a candidate's"),
        }
    }
}

/// What a core does with one shard's rows of a batch: `rows` are the row numbers of `batch`
/// whose fingerprints (given with them) belong to `shard`; the last argument names the stage
/// in errors.
type AddRows<F> = fn(&mut Shard<F>, &RecordBatch, &[(usize, F)], &str) -> Result<()>;

/// Runs `stage` with each of its partitions on a core of its own, each batch's rows (by their
/// fingerprints, in the columns `keys`) handed to `add` shard by shard, each shard locked once
/// a batch, and the pool told what the shards hold.
async fn read_partitions<F: FingerprintColumn>(
    ctx: &SessionContext,
    bindings: &Bindings,
    stage: &'static Stage,
    filling: &Arc<Filling<F>>,
    keys: &'static [usize],
    add: AddRows<F>,
) -> Result<()> {
    let what = || stage.name.to_string();
    let frame = stage_frame(ctx, stage, bindings).await?;
    let streams = frame.execute_stream_partitioned().await.context(what)?;
    let mut partitions = JoinSet::new();
    for mut stream in streams {
        let filling = Arc::clone(filling);
        partitions.spawn(async move {
            let shift = filling.shift;
            let mut rows: Vec<Vec<(usize, F)>> = vec![Vec::new(); filling.shards.len()];
            while let Some(batch) = stream.next().await {
                let batch = batch.context(what)?;
                for &key in keys {
                    F::for_each_value(batch.column(key), |row, fingerprint| {
                        rows[shard_of(fingerprint, shift)].push((row, fingerprint));
                    })
                    .context(what)?;
                }
                for (shard, rows) in filling.shards.iter().zip(&mut rows) {
                    if rows.is_empty() {
                        continue;
                    }
                    let mut shard = shard
                        .lock()
                        .map_err(|_| Error::Internal(format!("{}: a core panicked", what())))?;
                    add(&mut shard, &batch, rows, stage.name)?;
                    rows.clear();
                    account(&mut shard, &filling.reservation).context(what)?;
                }
            }
            Ok::<_, Error>(())
        });
    }
    while let Some(done) = partitions.join_next().await {
        done.map_err(|e| Error::Internal(format!("{}: {e}", what())))??;
    }
    Ok(())
}

/// Every candidate's fingerprint, without a sketch so far.
fn add_candidates<F: FingerprintColumn>(
    shard: &mut Shard<F>,
    _batch: &RecordBatch,
    rows: &[(usize, F)],
    _stage: &str,
) -> Result<()> {
    for &(_, fingerprint) in rows {
        shard.place.entry(fingerprint).or_insert(NO_SKETCH);
    }
    Ok(())
}

/// The documents' sketches: a candidate fingerprint's first is copied in, a smaller one later
/// written over it (the order of bytes `min` over Binary gives), whichever core reads it.
fn add_sketches<F: FingerprintColumn>(
    shard: &mut Shard<F>,
    batch: &RecordBatch,
    rows: &[(usize, F)],
    stage: &str,
) -> Result<()> {
    let sketches = as_fixed_size_binary_array(batch.column(1)).context(|| stage.to_string())?;
    if sketches.value_length() != SKETCH_BYTES as i32 {
        return Err(Error::Internal(format!(
            "{stage}: sketches of {} bytes, not {SKETCH_BYTES}",
            sketches.value_length()
        )));
    }
    // Places are u32, NO_SKETCH the largest: checked once per batch, not per row.
    if shard.bytes.len() / SKETCH_BYTES + rows.len() >= NO_SKETCH as usize {
        return Err(Error::Input(format!(
            "{stage}: more than 2^32 - 1 candidate fingerprints in one shard of one process; \
             run on a cluster (--cluster)"
        )));
    }
    let Shard { place, bytes, .. } = shard;
    for &(row, fingerprint) in rows {
        let Some(at) = place.get_mut(&fingerprint) else {
            continue;
        };
        if sketches.is_null(row) {
            continue;
        }
        let sketch = sketches.value(row);
        if *at == NO_SKETCH {
            *at = (bytes.len() / SKETCH_BYTES) as u32;
            bytes.extend_from_slice(sketch);
            continue;
        }
        let start = *at as usize * SKETCH_BYTES;
        let held = &mut bytes[start..start + SKETCH_BYTES];
        if sketch < &*held {
            held.copy_from_slice(sketch);
        }
    }
    Ok(())
}

/// Tells the pool what `shard` holds now: its map's slots (a fingerprint, a place and a control
/// byte each, at most 8/7 full) and its sketches.
fn account<F>(
    shard: &mut Shard<F>,
    reservation: &MemoryReservation,
) -> datafusion::error::Result<()> {
    let held =
        shard.place.capacity() * (std::mem::size_of::<(F, u32)>() + 1) + shard.bytes.capacity();
    if held > shard.told {
        reservation.try_grow(held - shard.told)?;
    } else {
        reservation.shrink(shard.told - held);
    }
    shard.told = held;
    Ok(())
}

/// `candidate_similarity(simhash_a, simhash_b) -> Float64`: `sketch_similarity` of the two
/// fingerprints' sketches; NULL where either has none.
struct CandidateSimilarity<F> {
    sketches: Arc<Sketches<F>>,
    signature: Signature,
}

impl<F> std::fmt::Debug for CandidateSimilarity<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(FUNCTION)
    }
}

// One instance per verification: equal only to itself.
impl<F> PartialEq for CandidateSimilarity<F> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.sketches, &other.sketches)
    }
}

impl<F> Eq for CandidateSimilarity<F> {}

impl<F> std::hash::Hash for CandidateSimilarity<F> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.sketches).hash(state);
    }
}

impl<F: FingerprintColumn> ScalarUDFImpl for CandidateSimilarity<F> {
    fn name(&self) -> &str {
        FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let [a, b] = take_function_args(FUNCTION, &args.args)?;
        let rows = args.number_rows;
        let (a, b) = (a.to_array(rows)?, b.to_array(rows)?);
        let (a, b) = (self.column_sketches(&a)?, self.column_sketches(&b)?);
        let similarities = similarities_by(rows, |row| {
            prefetch(&a, row + PREFETCH_ROWS_AHEAD);
            prefetch(&b, row + PREFETCH_ROWS_AHEAD);
            Some((
                a.get(row).copied().flatten()?,
                b.get(row).copied().flatten()?,
            ))
        });
        Ok(ColumnarValue::Array(Arc::new(similarities) as ArrayRef))
    }
}

/// How many rows ahead the sketches are asked for (`prefetch`).
const PREFETCH_ROWS_AHEAD: usize = 8;

/// Asks the CPU to bring the sketch of `row` into its cache before the comparison needs it.
/// Consecutive candidates' sketches lie anywhere in memory, and waiting for each in turn was
/// most of the comparison's time.
#[inline(always)]
fn prefetch(sketches: &[Option<&[u8]>], row: usize) {
    if let Some(Some(sketch)) = sketches.get(row) {
        crate::prefetch::prefetch(*sketch);
    }
}

impl<F: FingerprintColumn> CandidateSimilarity<F> {
    /// Each row's sketch (`None` for a NULL fingerprint or one without a sketch).
    fn column_sketches<'s>(
        &'s self,
        column: &ArrayRef,
    ) -> datafusion::error::Result<Vec<Option<&'s [u8]>>> {
        let mut sketches = vec![None; column.len()];
        let mut failed = None;
        F::for_each_value(column, |row, fingerprint| {
            match self.sketches.sketch(&fingerprint) {
                Ok(sketch) => sketches[row] = sketch,
                Err(e) => failed = Some(e),
            }
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(sketches),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        Array, AsArray, FixedSizeBinaryArray, RecordBatch, UInt8Array, UInt64Array,
    };
    use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Schema, UInt64Type};
    use datafusion::catalog::MemTable;
    use datafusion::prelude::SessionContext;

    use crate::engine::sql::{Bindings, run_stage};
    use crate::engine::stages;
    use crate::fingerprint::Width;
    use crate::job::keep::Keep;
    use crate::job::params::{SourceParams, StageParams};
    use crate::rng::SplitMix64;
    use crate::storage::Place;
    use crate::text::sketch::{SKETCH_BYTES, SketchBuilder};

    fn bindings_for(dir: &std::path::Path) -> Bindings {
        StageParams {
            dir: Place::Local(dir.to_path_buf()),
            id_column: "id".into(),
            k: 7,
            width: Width::Bits64,
            source: SourceParams::Texts {
                column: "text".into(),
                features: String::new(),
                min_features: 0,
                partition_clause: String::new(),
                dedup_columns: "c.*".into(),
            },
            index: None,
            verify: Some(0.6),
            keep: Keep::First,
        }
        .bindings()
    }

    /// Documents (a fingerprint and its sketch; some fingerprints have two documents, whose
    /// smallest sketch counts, one has no sketch, and one has a sketch in one document only) and candidate pairs among them, some
    /// similar and some not, registered in a fresh context.
    fn context() -> SessionContext {
        let ctx = crate::udf::test_util::context();
        let mut random = SplitMix64(21);
        // Five topics of 60 features; a document takes most of one topic's.
        let mut documents: Vec<(u64, Option<[u8; SKETCH_BYTES]>)> = Vec::new();
        for fingerprint in 1..=300u64 {
            let copies = if fingerprint.is_multiple_of(10) { 2 } else { 1 };
            for copy in 0..copies {
                let topic = fingerprint % 5;
                let mut sketch = SketchBuilder::default();
                for feature in 0..60 {
                    if !random.next_u64().is_multiple_of(5) {
                        sketch.add(topic * 1000 + feature);
                    }
                }
                // 77 has no sketch; of 80's two documents only the second has one.
                let sketch =
                    (fingerprint != 77 && (fingerprint, copy) != (80, 0)).then(|| sketch.finish());
                documents.push((fingerprint, sketch));
            }
        }
        let candidates: Vec<(u64, u64)> = (0..2_000)
            .map(|_| {
                let a = 1 + random.next_u64() % 300;
                let b = 1 + random.next_u64() % 300;
                (a.min(b), a.max(b) + u64::from(a == b))
            })
            .filter(|&(_, b)| b <= 300)
            .collect();
        let documents_schema = Arc::new(Schema::new(vec![
            Field::new("simhash", DataType::UInt64, false),
            Field::new(
                "sketch",
                DataType::FixedSizeBinary(SKETCH_BYTES as i32),
                true,
            ),
        ]));
        // Shuffled, and in three batches: a fingerprint's smaller sketch comes first or later.
        for i in (1..documents.len()).rev() {
            documents.swap(i, (random.next_u64() % (i as u64 + 1)) as usize);
        }
        let documents_batches: Vec<RecordBatch> = documents
            .chunks(documents.len().div_ceil(3))
            .map(|chunk| {
                let sketches = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    chunk.iter().map(|(_, s)| s.as_ref().map(|s| s.as_slice())),
                    SKETCH_BYTES as i32,
                )
                .unwrap();
                RecordBatch::try_new(
                    Arc::clone(&documents_schema),
                    vec![
                        Arc::new(UInt64Array::from_iter_values(chunk.iter().map(|d| d.0))),
                        Arc::new(sketches),
                    ],
                )
                .unwrap()
            })
            .collect();
        let candidates_schema = Arc::new(Schema::new(vec![
            Field::new("simhash_a", DataType::UInt64, false),
            Field::new("simhash_b", DataType::UInt64, false),
            Field::new("distance", DataType::UInt8, false),
        ]));
        // Two partitions of candidates, read by two cores at once.
        let candidates_batches: Vec<RecordBatch> = candidates
            .chunks(candidates.len().div_ceil(2))
            .map(|chunk| {
                RecordBatch::try_new(
                    Arc::clone(&candidates_schema),
                    vec![
                        Arc::new(UInt64Array::from_iter_values(chunk.iter().map(|c| c.0))),
                        Arc::new(UInt64Array::from_iter_values(chunk.iter().map(|c| c.1))),
                        Arc::new(UInt8Array::from_iter_values(chunk.iter().map(|_| 3))),
                    ],
                )
                .unwrap()
            })
            .collect();
        // Each batch a partition of its own: a fingerprint's two documents may be read by
        // two cores.
        for (name, schema, batches) in [
            ("documents", documents_schema, documents_batches),
            ("candidate_pairs", candidates_schema, candidates_batches),
        ] {
            let partitions = batches.into_iter().map(|batch| vec![batch]).collect();
            let table = MemTable::try_new(schema, partitions).unwrap();
            ctx.register_table(name, Arc::new(table)).unwrap();
        }
        ctx
    }

    /// `fingerprint_pairs`, sorted: (simhash_a, simhash_b, similarity).
    async fn fingerprint_pairs(ctx: &SessionContext) -> Vec<(u64, u64, Option<f64>)> {
        let batches = ctx
            .table("fingerprint_pairs")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let mut rows = Vec::new();
        for batch in batches {
            let a = batch.column(0).as_primitive::<UInt64Type>();
            let b = batch.column(1).as_primitive::<UInt64Type>();
            let s = batch.column(3).as_primitive::<Float64Type>();
            for row in 0..batch.num_rows() {
                let similarity = s.is_valid(row).then(|| s.value(row));
                rows.push((a.value(row), b.value(row), similarity));
            }
        }
        rows.sort_by(|x, y| x.partial_cmp(y).unwrap());
        rows
    }

    /// The sketches held in memory keep the rows the relational verification keeps, with the
    /// same similarities: pairs above and below the threshold, fingerprints of two documents
    /// (the smaller sketch), and a fingerprint without a sketch (its pairs dropped).
    #[tokio::test]
    async fn the_sketches_in_memory_keep_the_rows_the_joins_keep() {
        let (joined_dir, looked_up_dir) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let joined = context();
        let bindings = bindings_for(joined_dir.path());
        run_stage(&joined, &stages::VERIFY_SKETCHES, &bindings)
            .await
            .unwrap();
        run_stage(&joined, &stages::VERIFY, &bindings)
            .await
            .unwrap();
        let expected = fingerprint_pairs(&joined).await;

        let looked_up = context();
        let bindings = bindings_for(looked_up_dir.path());
        super::verify_in_memory::<u64>(&looked_up, &bindings)
            .await
            .unwrap();
        let found = fingerprint_pairs(&looked_up).await;

        assert_eq!(found, expected);
        // Both ways of the threshold occur, and the fingerprint without a sketch pairs with no one.
        assert!(found.len() > 100, "{} pairs kept", found.len());
        assert!(
            found.len() < 1_800,
            "{} pairs kept of about 2,000",
            found.len()
        );
        assert!(found.iter().all(|&(a, b, _)| a != 77 && b != 77));
        assert!(found.iter().any(|&(a, b, _)| a == 80 || b == 80));
        // The function is gone once verification is done.
        assert!(
            !looked_up
                .state()
                .scalar_functions()
                .contains_key(super::FUNCTION)
        );
    }
}
