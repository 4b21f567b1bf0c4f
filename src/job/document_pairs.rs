//! Stage 4's document pairs in this process: the rows of sql/04_pairs.sql (`--pairs all`) or
//! sql/04_pairs_star.sql (`--pairs star`) without their joins. `paired_documents` is read once
//! and held by fingerprint (for star, each fingerprint's head, its first document in input
//! order, first);
//! each core takes its share of `fingerprint_pairs` and lists, for each pair, the documents of
//! its first fingerprint against those of its second (star: the two heads), then its share of
//! the fingerprints several documents have, every two of their documents at distance 0 (star:
//! each new document with its head). A pair is listed when either document is new (`fresh`;
//! star's documents with their head: when the document is), smaller id first, as the joins
//! list it. sql/04_pairs_expanded.sql writes the rows. The joins copied every id out of each
//! join and again through least / greatest; here each id is copied once, into its output
//! column.
//!
//! The held documents are counted against the session's pool: where it refuses them, and on a
//! cluster, sql/04_pairs.sql runs instead.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, DynComparator, RecordBatch, UInt8Array, UInt32Array, make_comparator,
    new_empty_array, new_null_array,
};
use datafusion::arrow::compute::{SortOptions, cast, concat, take};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::common::HashMap;
use datafusion::common::cast::as_boolean_array;
use datafusion::error::{DataFusionError, Result as DataFusionResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use rayon::iter::{IntoParallelRefIterator, ParallelIterator};
use rayon::slice::ParallelSlice;

use crate::engine::sql::{Bindings, run_stage};
use crate::engine::stages;
use crate::error::{QueryContext, Result};
use crate::fingerprint::Width;
use crate::job::choices::PairsListed;
use crate::job::cores::{on_every_core, shard_bits};
use crate::udf::FingerprintColumn;

/// The table sql/04_pairs_expanded.sql reads.
const TABLE: &str = "expanded_pairs";

/// A fingerprint width as held here: a hash key, and a key of the radix sort.
trait Held: FingerprintColumn + std::hash::Hash + Eq + radsort::Key {}

impl<F: FingerprintColumn + std::hash::Hash + Eq + radsort::Key> Held for F {}

/// Writes `pairs` from `paired_documents` and `fingerprint_pairs` in this process. False, with
/// nothing written, when the pool refuses the documents: the listing's SQL must run.
pub async fn write(
    ctx: &SessionContext,
    bindings: &Bindings,
    width: Width,
    listed: PairsListed,
) -> Result<bool> {
    match width {
        Width::Bits64 => write_with::<u64>(ctx, bindings, listed).await,
        Width::Bits128 => write_with::<u128>(ctx, bindings, listed).await,
    }
}

async fn write_with<F: Held>(
    ctx: &SessionContext,
    bindings: &Bindings,
    listed: PairsListed,
) -> Result<bool> {
    let stage = &stages::PAIRS_EXPANDED;
    let what = || stage.name.to_string();
    let started = Instant::now();
    let Some(documents) = HeldDocuments::<F>::read(ctx, listed).await.context(what)? else {
        log::debug!("{}: joined instead", stage.name);
        return Ok(false);
    };
    log::debug!(
        "{}: {} documents held in {:.3} s",
        stage.name,
        documents.fresh.len(),
        started.elapsed().as_secs_f64()
    );
    let documents = Arc::new(documents);
    let frame = ctx.table("fingerprint_pairs").await.context(what)?;
    let mut inputs = frame.execute_stream_partitioned().await.context(what)?;
    if inputs.is_empty() {
        // No partition to read still leaves the pairs of shared fingerprints to list.
        let empty = futures::stream::empty::<DataFusionResult<RecordBatch>>();
        let schema = Arc::new(Schema::empty());
        inputs.push(Box::pin(RecordBatchStreamAdapter::new(schema, empty)));
    }
    let schema = output_schema(documents.ids.data_type());
    let shares = inputs.len();
    let batch_rows = ctx.copied_config().batch_size().max(1);
    let streams: Vec<Arc<dyn PartitionStream>> = inputs
        .into_iter()
        .enumerate()
        .map(|(share, input)| {
            Arc::new(Share {
                schema: Arc::clone(&schema),
                state: Mutex::new(Some(ShareState {
                    input,
                    documents: Arc::clone(&documents),
                    share,
                    shares,
                    batch_rows,
                })),
            }) as Arc<dyn PartitionStream>
        })
        .collect();
    let table = StreamingTable::try_new(schema, streams).context(what)?;
    ctx.register_table(TABLE, Arc::new(table)).context(what)?;
    let written = run_stage(ctx, stage, bindings).await;
    ctx.deregister_table(TABLE).context(what)?;
    written.map(|()| true)
}

/// The columns of `TABLE`, as sql/04_pairs.sql writes them: the ids in their own type.
fn output_schema(id_type: &DataType) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id_a", id_type.clone(), true),
        Field::new("id_b", id_type.clone(), true),
        Field::new("distance", DataType::UInt8, true),
        Field::new("similarity", DataType::Float64, true),
    ]))
}

/// `paired_documents` held by fingerprint: the documents of a fingerprint are a run of `order`
/// (for star, its head first).
struct HeldDocuments<F> {
    listed: PairsListed,
    ids: ArrayRef,
    fresh: Vec<bool>,
    /// Row numbers (into `ids` and `fresh`) by fingerprint.
    order: Vec<u32>,
    /// A fingerprint's run in `order`: start and length, in the shard of its top
    /// `shard_bits` bits.
    runs: Vec<HashMap<F, Run>>,
    shard_bits: u32,
    /// The runs of two documents or more, which hold pairs at distance 0.
    shared: Vec<Run>,
    /// Orders two rows' ids as least / greatest order them.
    compare: DynComparator,
    _reservation: MemoryReservation,
}

impl<F: Held> HeldDocuments<F> {
    /// The documents, or `None` when the pool refuses their memory (or they are too many for
    /// 32-bit row numbers).
    async fn read(ctx: &SessionContext, listed: PairsListed) -> DataFusionResult<Option<Self>> {
        let reservation =
            MemoryConsumer::new("paired documents").register(&ctx.runtime_env().memory_pool);
        // Star needs each run's head, so each row's place in input order; every pair does not.
        let heads = listed == PairsListed::Star;
        let columns: &[&str] = match heads {
            true => &["id", "simhash", "fresh", "batch", "input_order"],
            false => &["id", "simhash", "fresh"],
        };
        let frame = ctx
            .table("paired_documents")
            .await?
            .select_columns(columns)?;
        let id_type = frame.schema().field(0).data_type().clone();
        let mut stream = frame.execute_stream().await?;
        let (mut ids, mut fresh, mut keyed) = (Vec::new(), Vec::new(), Vec::new());
        // Each row's place in input order (star), while the heads are found.
        let mut places: Vec<(i64, i64)> = Vec::new();
        // Per row: its fingerprint and row number, twice while they are sorted, its place in
        // input order (star), its place in `order`, its `fresh` and its run (a table slot, the
        // table at most 7/8 full). The ids twice: as read, and in one array.
        let per_row = 2 * size_of::<(F, usize)>()
            + usize::from(heads) * size_of::<(i64, i64)>()
            + size_of::<u32>()
            + 1
            + (size_of::<F>() + 9) * 8 / 7;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let held = 2 * batch.column(0).get_array_memory_size() + batch.num_rows() * per_row;
            if reservation.try_grow(held).is_err() {
                return Ok(None);
            }
            let first = fresh.len();
            F::for_each_value(batch.column(1), |row, fingerprint| {
                keyed.push((fingerprint, first + row));
            })?;
            let column = as_boolean_array(batch.column(2))?;
            fresh.extend(column.iter().map(|f| f == Some(true)));
            ids.push(Arc::clone(batch.column(0)));
            if !heads {
                continue;
            }
            let number = |column: usize| cast(batch.column(column), &DataType::Int64);
            let (batches, orders) = (number(3)?, number(4)?);
            let batches = batches.as_primitive::<Int64Type>();
            let orders = orders.as_primitive::<Int64Type>();
            let place = |row: usize| (batches.value(row), orders.value(row));
            places.extend((0..batch.num_rows()).map(place));
        }
        if u32::try_from(fresh.len()).is_err() {
            return Ok(None);
        }
        let ids = match ids.as_slice() {
            [] => new_empty_array(&id_type),
            [one] => Arc::clone(one),
            many => concat(&many.iter().map(AsRef::as_ref).collect::<Vec<_>>())?,
        };
        // By fingerprint, a radix sort (the largest part of this read at 100M generated
        // fingerprints: 18 million documents); a fingerprint's rows stay in the order read.
        // rayon's comparison sort on both cores was no faster at ten million (BENCHMARKS).
        let sorting = Instant::now();
        radsort::sort_by_key(&mut keyed, |&(fingerprint, _)| fingerprint);
        log::debug!(
            "paired documents: sorted in {:.3} s",
            sorting.elapsed().as_secs_f64()
        );
        // The map in shards by the fingerprints' top bits: each shard a contiguous part of
        // `keyed`, filled on a core of its own.
        let shard_bits = shard_bits(ctx.copied_config().target_partitions());
        let bounds: Vec<usize> = (0..=1usize << shard_bits)
            .map(|shard| keyed.partition_point(|&(f, _)| top_bits_shard(f, shard_bits) < shard))
            .collect();
        let map = move || {
            let shards: Vec<_> = bounds
                .par_windows(2)
                .map(|bounds| runs_of(&keyed[bounds[0]..bounds[1]], bounds[0]))
                .collect();
            let order: Vec<u32> = keyed.par_iter().map(|&(_, row)| row as u32).collect();
            let (runs, shared): (Vec<_>, Vec<Vec<_>>) = shards.into_iter().unzip();
            (runs, shared.concat(), order)
        };
        let (runs, shared, mut order) = on_every_core(ctx, "holding the paired documents", map)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        // Star: each run's head (first in input order, as sql/04_pairs_star.sql's
        // `first_value`) to its front.
        if heads {
            for &(start, len) in &shared {
                let run = &mut order[start as usize..(start + len) as usize];
                let head = (0..run.len()).min_by_key(|&i| places[run[i] as usize]);
                run.swap(0, head.unwrap_or(0));
            }
        }
        drop(places);
        let compare = make_comparator(&ids, &ids, SortOptions::default())?;
        Ok(Some(Self {
            listed,
            ids,
            fresh,
            order,
            runs,
            shard_bits,
            shared,
            compare,
            _reservation: reservation,
        }))
    }

    /// The rows of a fingerprint's documents that its pairs list: all, or (star) its head;
    /// none when no document has it.
    fn documents_of(&self, fingerprint: Option<F>) -> &[u32] {
        let runs = |f: F| self.runs[top_bits_shard(f, self.shard_bits)].get(&f);
        match fingerprint.and_then(runs) {
            Some(&(start, len)) => {
                let len = match self.listed {
                    PairsListed::All => len,
                    PairsListed::Star => len.min(1),
                };
                &self.order[start as usize..(start + len) as usize]
            }
            None => &[],
        }
    }
}

/// The shard of a fingerprint: its top `bits` bits. Not a hash of it (as verification's shards
/// are): by the top bits, the documents sorted by fingerprint fill the shards in order, each
/// shard a contiguous part of them.
fn top_bits_shard<F: Held>(fingerprint: F, bits: u32) -> usize {
    let top = fingerprint.widen().checked_shr(F::BITS - bits);
    top.unwrap_or(0) as usize
}

/// A run of one fingerprint's documents in `HeldDocuments::order`: its start and length.
type Run = (u32, u32);

/// The runs of one fingerprint each in `keyed` (part of the sorted documents, from `first`
/// on): each fingerprint's run, and those of two documents or more.
fn runs_of<F: Held>(keyed: &[(F, usize)], first: usize) -> (HashMap<F, Run>, Vec<Run>) {
    let mut runs = HashMap::with_capacity(keyed.len());
    let mut shared = Vec::new();
    let mut start = first;
    for run in keyed.chunk_by(|a, b| a.0 == b.0) {
        let place = (start as u32, run.len() as u32);
        runs.insert(run[0].0, place);
        if run.len() > 1 {
            shared.push(place);
        }
        start += run.len();
    }
    (runs, shared)
}

impl<F> HeldDocuments<F> {
    /// Whether either document is new: a pair of two indexed documents was listed by their
    /// own batch.
    #[inline]
    fn either_new(&self, x: u32, y: u32) -> bool {
        self.fresh[x as usize] || self.fresh[y as usize]
    }
}

/// One output partition of `TABLE`: a partition of `fingerprint_pairs` expanded, then every
/// `shares`-th run of shared fingerprints from the `share`-th.
struct Share<F> {
    schema: SchemaRef,
    /// Taken by the one statement that reads the table.
    state: Mutex<Option<ShareState<F>>>,
}

struct ShareState<F> {
    input: SendableRecordBatchStream,
    documents: Arc<HeldDocuments<F>>,
    share: usize,
    shares: usize,
    batch_rows: usize,
}

impl<F> std::fmt::Debug for Share<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(TABLE)
    }
}

impl<F: Held> PartitionStream for Share<F> {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let schema = Arc::clone(&self.schema);
        let Some(state) = state else {
            let read_twice = DataFusionError::Internal(format!("{TABLE} read twice"));
            let once = futures::stream::once(async { Err(read_twice) });
            return Box::pin(RecordBatchStreamAdapter::new(schema, once));
        };
        let ShareState {
            input,
            documents,
            share,
            shares,
            batch_rows,
        } = state;
        let shared = SharedPairs {
            documents: Arc::clone(&documents),
            schema: Arc::clone(&schema),
            next_run: share,
            step: shares,
            i: 0,
            j: 1,
            batch_rows,
        };
        let out = Arc::clone(&schema);
        let across = input.flat_map(move |batch| {
            let rows: Box<dyn Iterator<Item = DataFusionResult<RecordBatch>> + Send> = match batch
                .and_then(|batch| {
                    PairsAcross::new(&batch, Arc::clone(&documents), &out, batch_rows)
                }) {
                Ok(across) => Box::new(across),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            futures::stream::iter(rows)
        });
        let rows = across.chain(futures::stream::iter(shared));
        Box::pin(RecordBatchStreamAdapter::new(schema, rows))
    }
}

/// Output rows being gathered: two documents' rows, the smaller id first, and the fingerprint
/// pair's row they come from.
struct Picks {
    low: Vec<u32>,
    high: Vec<u32>,
    from: Vec<u32>,
}

impl Picks {
    fn new(capacity: usize) -> Self {
        Self {
            low: Vec::with_capacity(capacity),
            high: Vec::with_capacity(capacity),
            from: Vec::with_capacity(capacity),
        }
    }

    fn len(&self) -> usize {
        self.low.len()
    }

    /// Adds documents `x` and `y`, the smaller id first.
    #[inline]
    fn push<F>(&mut self, documents: &HeldDocuments<F>, x: u32, y: u32, from: u32) {
        let (xs, ys) = (x as usize, y as usize);
        let (low, high) = match (documents.compare)(xs, ys) {
            Ordering::Greater => (y, x),
            _ => (x, y),
        };
        self.low.push(low);
        self.high.push(high);
        self.from.push(from);
    }

    /// The two id columns, and the rows the pairs come from.
    fn columns<F>(self, documents: &HeldDocuments<F>) -> DataFusionResult<[ArrayRef; 3]> {
        let (low, high) = (UInt32Array::from(self.low), UInt32Array::from(self.high));
        Ok([
            take(&documents.ids, &low, None)?,
            take(&documents.ids, &high, None)?,
            Arc::new(UInt32Array::from(self.from)),
        ])
    }
}

/// The document pairs of one batch of `fingerprint_pairs`, `batch_rows` at a time: a pair
/// whose fingerprints both have many documents can hold far more rows than the batch.
struct PairsAcross<F> {
    documents: Arc<HeldDocuments<F>>,
    schema: SchemaRef,
    first: Vec<Option<F>>,
    second: Vec<Option<F>>,
    distance: ArrayRef,
    similarity: ArrayRef,
    /// Where the listing goes on: fingerprint pair, document of the first, of the second.
    row: usize,
    i: usize,
    j: usize,
    batch_rows: usize,
}

impl<F: Held> PairsAcross<F> {
    fn new(
        batch: &RecordBatch,
        documents: Arc<HeldDocuments<F>>,
        schema: &SchemaRef,
        batch_rows: usize,
    ) -> DataFusionResult<Self> {
        let column = |name: &str| {
            batch.column_by_name(name).cloned().ok_or_else(|| {
                DataFusionError::Internal(format!("fingerprint_pairs has no column {name}"))
            })
        };
        let values = |name: &str| -> DataFusionResult<Vec<Option<F>>> {
            let mut values = vec![None; batch.num_rows()];
            F::for_each_value(&column(name)?, |row, value| values[row] = Some(value))?;
            Ok(values)
        };
        Ok(Self {
            documents,
            schema: Arc::clone(schema),
            first: values("simhash_a")?,
            second: values("simhash_b")?,
            distance: cast(&column("distance")?, &DataType::UInt8)?,
            similarity: cast(&column("similarity")?, &DataType::Float64)?,
            row: 0,
            i: 0,
            j: 0,
            batch_rows,
        })
    }

    fn batch(&self, picks: Picks) -> DataFusionResult<RecordBatch> {
        let [id_a, id_b, from] = picks.columns(&self.documents)?;
        let columns = vec![
            id_a,
            id_b,
            take(&self.distance, &from, None)?,
            take(&self.similarity, &from, None)?,
        ];
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

impl<F: Held> Iterator for PairsAcross<F> {
    type Item = DataFusionResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let documents = Arc::clone(&self.documents);
        let mut picks = Picks::new(self.batch_rows);
        while self.row < self.first.len() {
            let xs = documents.documents_of(self.first[self.row]);
            let ys = documents.documents_of(self.second[self.row]);
            while self.i < xs.len() {
                while self.j < ys.len() {
                    if picks.len() == self.batch_rows {
                        return Some(self.batch(picks));
                    }
                    let (x, y) = (xs[self.i], ys[self.j]);
                    if documents.either_new(x, y) {
                        picks.push(&*documents, x, y, self.row as u32);
                    }
                    self.j += 1;
                }
                (self.i, self.j) = (self.i + 1, 0);
            }
            (self.row, self.i) = (self.row + 1, 0);
        }
        (picks.len() > 0).then(|| self.batch(picks))
    }
}

/// The pairs at distance 0 of every `step`-th run of shared fingerprints from `next_run`:
/// each two documents of the run, once.
struct SharedPairs<F> {
    documents: Arc<HeldDocuments<F>>,
    schema: SchemaRef,
    next_run: usize,
    step: usize,
    i: usize,
    j: usize,
    batch_rows: usize,
}

impl<F> SharedPairs<F> {
    fn batch(&self, picks: Picks) -> DataFusionResult<RecordBatch> {
        let rows = picks.len();
        let [id_a, id_b, _] = picks.columns(&self.documents)?;
        // Documents of one fingerprint are not checked against each other: no similarity.
        let columns = vec![
            id_a,
            id_b,
            Arc::new(UInt8Array::from(vec![0; rows])) as ArrayRef,
            new_null_array(&DataType::Float64, rows),
        ];
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

impl<F> Iterator for SharedPairs<F> {
    type Item = DataFusionResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let documents = Arc::clone(&self.documents);
        let mut picks = Picks::new(self.batch_rows);
        // Star pairs each document with its run's head only, and lists it when it is new.
        let star = documents.listed == PairsListed::Star;
        while let Some(&(start, len)) = documents.shared.get(self.next_run) {
            let run = &documents.order[start as usize..(start + len) as usize];
            let firsts = if star { 1 } else { run.len() };
            while self.i < firsts {
                while self.j < run.len() {
                    if picks.len() == self.batch_rows {
                        return Some(self.batch(picks));
                    }
                    let (x, y) = (run[self.i], run[self.j]);
                    let listed = match star {
                        true => documents.fresh[y as usize],
                        false => documents.either_new(x, y),
                    };
                    if listed {
                        picks.push(&*documents, x, y, 0);
                    }
                    self.j += 1;
                }
                self.i += 1;
                self.j = self.i + 1;
            }
            (self.next_run, self.i, self.j) = (self.next_run + self.step, 0, 1);
        }
        (picks.len() > 0).then(|| self.batch(picks))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};

    use super::*;
    use crate::engine::sql::folder_literal;
    use crate::job::{paired_documents, test_session};
    use crate::rng::SplitMix64;
    use crate::storage::Place;

    /// Documents of a case: id, fingerprint (NULL where none), new in this run (batch 1) or
    /// indexed (batch 0), place in input order.
    struct Case<F> {
        ids: ArrayRef,
        simhashes: Vec<Option<F>>,
        fresh: Vec<bool>,
        input_order: Vec<i64>,
        /// Fingerprint pairs: two fingerprints, their distance and similarity.
        pairs: Vec<(F, F, u8, Option<f64>)>,
    }

    impl<F: Held> Case<F> {
        /// A session over the case's tables (two partitions each), `paired_documents` written,
        /// batches of `batch_rows`, bound to write into `dir`.
        async fn session(
            &self,
            pool: Option<usize>,
            batch_rows: usize,
            dir: &Place,
        ) -> (SessionContext, Bindings) {
            let ctx = test_session::context(pool);
            ctx.sql(&format!(
                "SET datafusion.execution.batch_size = {batch_rows}"
            ))
            .await
            .unwrap();
            test_session::CaseDocuments {
                ids: Arc::clone(&self.ids),
                simhashes: &self.simhashes,
                batches: self.fresh.iter().map(|&f| i64::from(f)).collect(),
                input_order: self.input_order.clone(),
                fresh: self.fresh.clone(),
            }
            .register(&ctx);
            let fingerprint = |name: &str| Field::new(name, F::data_type(), true);
            let first: Vec<Option<F>> = self.pairs.iter().map(|p| Some(p.0)).collect();
            let second: Vec<Option<F>> = self.pairs.iter().map(|p| Some(p.1)).collect();
            test_session::register_in_halves(
                &ctx,
                "fingerprint_pairs",
                vec![
                    fingerprint("simhash_a"),
                    fingerprint("simhash_b"),
                    Field::new("distance", DataType::UInt8, true),
                    Field::new("similarity", DataType::Float64, true),
                ],
                vec![
                    test_session::fingerprint_column(&first),
                    test_session::fingerprint_column(&second),
                    Arc::new(UInt8Array::from_iter_values(self.pairs.iter().map(|p| p.2))),
                    Arc::new(Float64Array::from_iter(self.pairs.iter().map(|p| p.3))),
                ],
            );
            let mut bindings = Bindings::default();
            bindings
                .set(
                    "paired_documents_dir",
                    folder_literal(&dir.join("paired_documents")),
                )
                .set("pairs_dir", folder_literal(&dir.join("pairs")))
                .set("work_table_options", test_session::work_table_options());
            paired_documents::write(&ctx, &bindings, width::<F>(), false)
                .await
                .unwrap();
            (ctx, bindings)
        }

        /// `pairs` written here and by the listing's SQL joins: their schemas and their rows
        /// in order.
        async fn both_ways(
            &self,
            listed: PairsListed,
            batch_rows: usize,
        ) -> [(SchemaRef, String); 2] {
            let dir = tempfile::tempdir().unwrap();
            let mut tables = Vec::new();
            for (name, here) in [("here", true), ("joined", false)] {
                let place = Place::Local(dir.path().join(name));
                let (ctx, bindings) = self.session(None, batch_rows, &place).await;
                match here {
                    true => assert!(write(&ctx, &bindings, width::<F>(), listed).await.unwrap()),
                    false => run_stage(&ctx, &listed.stage(), &bindings).await.unwrap(),
                }
                tables.push(pairs_table(&ctx).await);
            }
            tables.try_into().unwrap()
        }
    }

    fn width<F: FingerprintColumn>() -> Width {
        match F::BITS {
            64 => Width::Bits64,
            _ => Width::Bits128,
        }
    }

    /// The `pairs` table in order, as text, and its schema.
    async fn pairs_table(ctx: &SessionContext) -> (SchemaRef, String) {
        let sql = "SELECT * FROM pairs ORDER BY id_a, id_b, distance, similarity";
        test_session::table_text(ctx, sql).await
    }

    fn string_ids(n: usize) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("d{i}")),
        ))
    }

    #[tokio::test]
    async fn a_hand_checked_case() {
        // Ids are numbers, so that their order is not the order of their text. Documents of
        // 5: ids 10, 4 (new), 9 and 7 (indexed); of 9: id 2; of 11: id 30, in no pair; id 6
        // has no fingerprint. 5 and 9 are a pair. Every pair is listed but 9-7: both indexed.
        let case = Case {
            ids: Arc::new(Int64Array::from(vec![10, 2, 30, 4, 9, 6, 7])),
            simhashes: vec![
                Some(5u64),
                Some(9),
                Some(11),
                Some(5),
                Some(5),
                None,
                Some(5),
            ],
            fresh: vec![true, true, true, true, false, true, false],
            input_order: (0..7).collect(),
            pairs: vec![(5, 9, 2, Some(0.8))],
        };
        let [(schema, here), (joined_schema, joined)] = case.both_ways(PairsListed::All, 2).await;
        let expected = [
            "+------+------+----------+------------+",
            "| id_a | id_b | distance | similarity |",
            "+------+------+----------+------------+",
            "| 2    | 4    | 2        | 0.8        |",
            "| 2    | 7    | 2        | 0.8        |",
            "| 2    | 9    | 2        | 0.8        |",
            "| 2    | 10   | 2        | 0.8        |",
            "| 4    | 7    | 0        |            |",
            "| 4    | 9    | 0        |            |",
            "| 4    | 10   | 0        |            |",
            "| 7    | 10   | 0        |            |",
            "| 9    | 10   | 0        |            |",
            "+------+------+----------+------------+",
        ];
        assert_eq!(here, expected.join("\n"));
        assert_eq!((schema, here), (joined_schema, joined));
        // Star: the head of 5 is id 9 (indexed, batch 0, first in input order), of 9 id 2. The
        // heads are a pair, and each new document of 5 is paired with its head (7 is not new).
        let [(schema, here), (joined_schema, joined)] = case.both_ways(PairsListed::Star, 2).await;
        let expected = [
            "+------+------+----------+------------+",
            "| id_a | id_b | distance | similarity |",
            "+------+------+----------+------------+",
            "| 2    | 9    | 2        | 0.8        |",
            "| 4    | 9    | 0        |            |",
            "| 9    | 10   | 0        |            |",
            "+------+------+----------+------------+",
        ];
        assert_eq!(here, expected.join("\n"));
        assert_eq!((schema, here), (joined_schema, joined));
    }

    /// Many documents over few fingerprints (runs far longer than a batch), some indexed, a
    /// few without a fingerprint, and fingerprint pairs among them and to absent values.
    fn random_case<F: FingerprintColumn>(seed: u64, value: impl Fn(u64) -> F) -> Case<F> {
        let mut random = SplitMix64(seed);
        let pool: Vec<F> = (0..300).map(|_| value(random.next_u64())).collect();
        let n = 4_000;
        let simhashes = (0..n)
            .map(|_| match random.below(40) {
                0 => None,
                // One fingerprint with a long run.
                1..=4 => Some(pool[0]),
                _ => Some(pool[random.below(pool.len())]),
            })
            .collect();
        let fresh = (0..n).map(|_| random.below(3) != 0).collect();
        // Input order shuffled, so that a run's head is not its first row.
        let mut input_order: Vec<i64> = (0..n as i64).collect();
        for i in (1..n).rev() {
            input_order.swap(i, random.below(i + 1));
        }
        let pairs = (0..400)
            .map(|_| {
                let a = pool[random.below(pool.len())];
                let b = match random.below(10) {
                    0 => value(random.next_u64()),
                    _ => pool[random.below(pool.len())],
                };
                let similarity = (random.below(4) != 0).then(|| random.below(100) as f64 / 100.0);
                (a, b, random.below(8) as u8, similarity)
            })
            .collect();
        Case {
            ids: string_ids(n),
            simhashes,
            fresh,
            input_order,
            pairs,
        }
    }

    #[test]
    fn a_fingerprints_shard_is_its_top_bits() {
        assert_eq!(top_bits_shard(0xF000_0000_0000_0001u64, 3), 7);
        assert_eq!(top_bits_shard(0x2000_0000_0000_0000u64, 3), 1);
        assert_eq!(top_bits_shard(u128::MAX >> 1, 2), 1);
        assert_eq!(top_bits_shard(u64::MAX, 0), 0);
        assert_eq!(top_bits_shard(u128::MAX, 0), 0);
    }

    #[tokio::test]
    async fn every_pair_listed_here_is_the_joins_pairs() {
        for batch_rows in [50, 8192] {
            let case = random_case(45, |v| v);
            let [(schema, here), (joined_schema, joined)] =
                case.both_ways(PairsListed::All, batch_rows).await;
            assert_eq!(schema, joined_schema);
            assert!(here.lines().count() > 100_000, "{}", here.lines().count());
            assert!(
                here == joined,
                "the tables differ at batches of {batch_rows}"
            );
        }
        // Random top bits, so that the fingerprints fill the map's shards (8 at two cores).
        let case = random_case(46, |v| u128::from(v) << 64 | 7);
        let shards: std::collections::HashSet<usize> = (case.simhashes.iter().flatten())
            .map(|&f| top_bits_shard(f, shard_bits(2)))
            .collect();
        assert_eq!(shards.len(), 8);
        let [(schema, here), (joined_schema, joined)] = case.both_ways(PairsListed::All, 100).await;
        assert_eq!(schema, joined_schema);
        assert!(here == joined, "the 128-bit tables differ");
    }

    #[tokio::test]
    async fn star_pairs_listed_here_are_the_joins_pairs() {
        for (seed, batch_rows) in [(48, 5), (49, 8192)] {
            let case = random_case(seed, |v| v);
            let [(schema, here), (joined_schema, joined)] =
                case.both_ways(PairsListed::Star, batch_rows).await;
            assert_eq!(schema, joined_schema);
            assert!(here.lines().count() > 2_000, "{}", here.lines().count());
            assert!(
                here == joined,
                "the tables differ at batches of {batch_rows}"
            );
        }
    }

    #[tokio::test]
    async fn without_memory_for_the_documents_nothing_is_written() {
        let case = random_case(47, |v| v);
        let dir = tempfile::tempdir().unwrap();
        let place = Place::Local(dir.path().to_path_buf());
        let (ctx, bindings) = case.session(Some(64 << 20), 8192, &place).await;
        // All but 16 KiB of the pool taken: room for far fewer than the case's documents.
        let pool = &ctx.runtime_env().memory_pool;
        let taken = MemoryConsumer::new("test").register(pool);
        taken.grow((64 << 20) - pool.reserved() - (16 << 10));
        assert!(
            !write(&ctx, &bindings, Width::Bits64, PairsListed::All)
                .await
                .unwrap()
        );
        assert!(!dir.path().join("pairs").exists());
    }
}
