//! Batches handed to whichever partition asks next, instead of dealt out in turn.
//!
//! DataFusion spreads a scan of fewer partitions than cores with a round-robin repartition:
//! batch i goes to partition i mod n, decided as the batches are read. When the work per batch
//! varies (long pages, Traditional pages that need converting) a partition that drew the costly
//! ones is still busy after the others ran dry, and the cores it leaves idle are the difference
//! between the stage on one core and on two. Here every output partition pulls its next batch
//! itself when it is ready for one: from its own input partition first, then, once that is
//! done, from the others. Input partitions are read one caller at a time, so the reading
//! (decoding) of one input partition is serialised; with as many input partitions as outputs
//! (`crate::engine::row_slices`) each output reads its own until it runs dry, and with fewer
//! (`OnDemand::slices`, the signature stage's two outputs per core) the outputs that share an
//! input take its batches in turn.
//!
//! A batch of many bytes is cut into pieces of about `PIECE_BYTES` of text before it is handed
//! out, and the pieces not taken at once wait for whichever output asks next: batches are cut
//! by rows, and one of 256 long pages can be ten times the median's bytes, which left one core
//! on it alone at the end of the stage.
//!
//! `DealOnDemand`, a physical optimizer rule, puts `OnDemandExec` in place of each round-robin
//! repartition of a plan, over the input cut into row ranges where it is a Parquet scan. Only
//! where the session option `OnDemand::enabled` is on: the signature stage, where each batch is
//! seconds of fingerprinting that vary from batch to batch; elsewhere batches cost about the
//! same and DataFusion's repartition is left alone.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result as DataFusionResult};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};
use futures::StreamExt;
use futures::lock::Mutex as AsyncMutex;

use crate::engine::row_slices;

extensions_options! {
    /// Session option read by `DealOnDemand`.
    pub struct OnDemand {
        /// Whether round-robin repartitions become `OnDemandExec`.
        pub enabled: bool, default = false
        /// Into how many row ranges a Parquet scan under one is cut, at most; 0 for as many as
        /// the repartition has outputs. Fewer ranges than outputs: each range read once.
        pub slices: usize, default = 0
    }
}

impl ConfigExtension for OnDemand {
    const PREFIX: &'static str = "neardup_on_demand";
}

/// Replaces each round-robin repartition with an `OnDemandExec` of as many partitions, whose
/// input is cut into as many row ranges where it is a Parquet scan (`row_slices::sliced`). It
/// runs after DataFusion's rules, when the repartitions are in place and the scans read their
/// row numbers themselves.
#[derive(Debug)]
pub struct DealOnDemand {
    /// Where the scans' object stores are, for the readers of their row ranges.
    runtime: Arc<RuntimeEnv>,
}

impl DealOnDemand {
    pub fn new(runtime: Arc<RuntimeEnv>) -> Self {
        Self { runtime }
    }
}

impl PhysicalOptimizerRule for DealOnDemand {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DataFusionResult<Arc<dyn ExecutionPlan>> {
        let Some(on_demand) = config
            .extensions
            .get::<OnDemand>()
            .filter(|on_demand| on_demand.enabled)
        else {
            return Ok(plan);
        };
        let most_slices = on_demand.slices;
        plan.transform_up(|node| {
            let Some(repartition) = node.downcast_ref::<RepartitionExec>() else {
                return Ok(Transformed::no(node));
            };
            let &Partitioning::RoundRobinBatch(outputs) = repartition.partitioning() else {
                return Ok(Transformed::no(node));
            };
            if repartition.preserve_order() {
                return Ok(Transformed::no(node));
            }
            let input = repartition.input();
            let slices = match most_slices {
                0 => outputs,
                most => most.min(outputs),
            };
            let input = row_slices::sliced(input, slices, &self.runtime)
                .unwrap_or_else(|| Arc::clone(input));
            Ok(Transformed::yes(
                Arc::new(OnDemandExec::new(input, outputs)) as _,
            ))
        })
        .data()
    }

    fn name(&self) -> &str {
        "deal_on_demand"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Spreads the batches of `input` over `outputs` partitions on demand. Rows keep no order
/// across or within partitions, as with a round-robin repartition.
#[derive(Debug)]
pub struct OnDemandExec {
    input: Arc<dyn ExecutionPlan>,
    outputs: usize,
    properties: Arc<PlanProperties>,
    /// The input streams of the execution under way, shared by its output partitions; the
    /// first output partition executed opens them.
    run: Mutex<Option<Run>>,
}

/// One execution: what its output partitions share, and how many have been executed so far.
#[derive(Debug)]
struct Run {
    inputs: Arc<Inputs>,
    started: usize,
}

/// What the output partitions of one execution pull from: the pieces of a cut batch not handed
/// out yet, then the input partitions' streams (`None` once a stream has ended).
#[derive(Debug)]
struct Inputs {
    pieces: Mutex<VecDeque<RecordBatch>>,
    streams: Vec<AsyncMutex<Option<SendableRecordBatchStream>>>,
}

/// Bytes of variable-width values (text) per piece a batch is cut into. At the signature
/// stage's 90-100 MB/s per core a piece is a few milliseconds of work, small enough for the
/// cores to finish together and large enough that the per-batch costs do not show.
const PIECE_BYTES: usize = 256 * 1024;

impl Inputs {
    fn next_piece(&self) -> DataFusionResult<Option<RecordBatch>> {
        Ok(self.lock_pieces()?.pop_front())
    }

    /// `batch` cut into pieces: the first to hand out now, the rest queued for any output.
    fn cut(&self, batch: RecordBatch) -> DataFusionResult<RecordBatch> {
        let mut pieces = cut_by_bytes(batch, PIECE_BYTES).into_iter();
        let first = pieces.next();
        self.lock_pieces()?.extend(pieces);
        first
            .ok_or_else(|| DataFusionError::Internal("OnDemandExec: a batch cut to nothing".into()))
    }

    fn lock_pieces(&self) -> DataFusionResult<std::sync::MutexGuard<'_, VecDeque<RecordBatch>>> {
        self.pieces.lock().map_err(|_| {
            DataFusionError::Internal(
                "OnDemandExec: a partition panicked holding the pieces".into(),
            )
        })
    }
}

/// `batch` cut into contiguous slices (no copy) of about `piece_bytes` of variable-width values
/// each, a row never split; the batch itself when it holds no more than that.
fn cut_by_bytes(batch: RecordBatch, piece_bytes: usize) -> Vec<RecordBatch> {
    let sizes = row_bytes(&batch);
    if sizes.iter().sum::<usize>() <= piece_bytes {
        return vec![batch];
    }
    let mut pieces = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (row, size) in sizes.iter().enumerate() {
        bytes += size;
        if bytes >= piece_bytes {
            pieces.push(batch.slice(start, row + 1 - start));
            (start, bytes) = (row + 1, 0);
        }
    }
    if start < batch.num_rows() {
        pieces.push(batch.slice(start, batch.num_rows() - start));
    }
    pieces
}

/// Each row's bytes of string and binary values, the columns that make rows differ in size
/// (fixed-width columns are left out: the same for every row).
fn row_bytes(batch: &RecordBatch) -> Vec<usize> {
    let mut sizes = vec![0usize; batch.num_rows()];
    for column in batch.columns() {
        let mut add = |lengths: &mut dyn Iterator<Item = usize>| {
            for (size, length) in sizes.iter_mut().zip(lengths) {
                *size += length;
            }
        };
        match column.data_type() {
            DataType::Utf8View => add(&mut column
                .as_string_view()
                .views()
                .iter()
                .map(|&view| view as u32 as usize)),
            DataType::BinaryView => add(&mut column
                .as_binary_view()
                .views()
                .iter()
                .map(|&view| view as u32 as usize)),
            DataType::Utf8 => add(&mut column.as_string::<i32>().offsets().lengths()),
            DataType::LargeUtf8 => add(&mut column.as_string::<i64>().offsets().lengths()),
            DataType::Binary => add(&mut column.as_binary::<i32>().offsets().lengths()),
            DataType::LargeBinary => add(&mut column.as_binary::<i64>().offsets().lengths()),
            _ => {}
        }
    }
    sizes
}

impl OnDemandExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, outputs: usize) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            Partitioning::UnknownPartitioning(outputs),
            input.pipeline_behavior(),
            input.boundedness(),
        );
        Self {
            input,
            outputs,
            properties: Arc::new(properties),
            run: Mutex::new(None),
        }
    }

    /// The input streams an output partition's stream pulls from: those of the execution
    /// under way, or new ones when every output of the last execution has been started.
    fn inputs(&self, context: &Arc<TaskContext>) -> DataFusionResult<Arc<Inputs>> {
        let mut run = self.run.lock().map_err(|_| {
            DataFusionError::Internal(
                "OnDemandExec: a partition panicked while opening the inputs".into(),
            )
        })?;
        let current = match run.take() {
            Some(current) if current.started < self.outputs => current,
            _ => {
                let partitions = self.input.output_partitioning().partition_count();
                let streams = (0..partitions)
                    .map(|p| {
                        let stream = self.input.execute(p, Arc::clone(context))?;
                        Ok(AsyncMutex::new(Some(stream)))
                    })
                    .collect::<DataFusionResult<Vec<_>>>()?;
                Run {
                    inputs: Arc::new(Inputs {
                        pieces: Mutex::default(),
                        streams,
                    }),
                    started: 0,
                }
            }
        };
        let inputs = Arc::clone(&current.inputs);
        *run = Some(Run {
            started: current.started + 1,
            ..current
        });
        Ok(inputs)
    }
}

impl DisplayAs for OnDemandExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "OnDemandExec: outputs={}, input_partitions={}",
            self.outputs,
            self.input.output_partitioning().partition_count()
        )
    }
}

impl ExecutionPlan for OnDemandExec {
    fn name(&self) -> &'static str {
        "OnDemandExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false]
    }

    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DataFusionResult<TreeNodeRecursion>,
    ) -> DataFusionResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DataFusionResult<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(input), true) => Ok(Arc::new(Self::new(input, self.outputs))),
            _ => Err(DataFusionError::Internal(
                "OnDemandExec has one input".into(),
            )),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DataFusionResult<SendableRecordBatchStream> {
        let inputs = self.inputs(&context)?;
        let count = inputs.streams.len();
        // Output p starts on input p (mod the inputs) and moves on as each runs dry; a piece
        // of a batch cut before comes first.
        let order: Vec<usize> = (0..count).map(|i| (partition + i) % count).collect();
        let batches =
            futures::stream::unfold((inputs, order, 0), |(inputs, order, mut at)| async move {
                loop {
                    match inputs.next_piece() {
                        Ok(Some(piece)) => return Some((Ok(piece), (inputs, order, at))),
                        Ok(None) => {}
                        Err(e) => return Some((Err(e), (inputs, order, at))),
                    }
                    let &input = order.get(at)?;
                    let mut slot = inputs.streams[input].lock().await;
                    let next = match slot.as_mut() {
                        Some(stream) => stream.next().await,
                        None => None,
                    };
                    match next {
                        Some(batch) => {
                            // Cut while the input is held, so that an output that finds the
                            // input ended afterwards finds the pieces queued.
                            let piece = batch.and_then(|batch| inputs.cut(batch));
                            drop(slot);
                            return Some((piece, (inputs, order, at)));
                        }
                        None => {
                            *slot = None;
                            at += 1;
                        }
                    }
                }
            });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.input.schema(),
            batches,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::row_slices::tests::{session_with_rule, sorted_first_column};
    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_plan::collect_partitioned;
    use datafusion::prelude::SessionContext;

    /// `partitions` input partitions of `batches` batches of 10 rows each, numbered 0, 1, ...
    fn numbered(partitions: usize, batches: usize) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let mut next = 0;
        let data = (0..partitions)
            .map(|_| {
                (0..batches)
                    .map(|_| {
                        let values = Int64Array::from_iter_values(next..next + 10);
                        next += 10;
                        RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values)]).unwrap()
                    })
                    .collect()
            })
            .collect::<Vec<Vec<RecordBatch>>>();
        MemorySourceConfig::try_new_exec(&data, schema, None).unwrap()
    }

    /// Oracle: the rows of the input, counted one by one. Every row comes out once, whatever
    /// the number of inputs and outputs, and twice over when the plan is executed twice.
    #[tokio::test]
    async fn every_row_comes_out_once() {
        let ctx = SessionContext::new();
        for (inputs, outputs) in [(1, 1), (1, 4), (3, 2), (2, 2), (4, 3)] {
            let plan: Arc<dyn ExecutionPlan> =
                Arc::new(OnDemandExec::new(numbered(inputs, 7), outputs));
            assert_eq!(plan.output_partitioning().partition_count(), outputs);
            for _ in 0..2 {
                let partitions = collect_partitioned(Arc::clone(&plan), ctx.task_ctx())
                    .await
                    .unwrap();
                assert_eq!(partitions.len(), outputs);
                let rows = sorted_first_column(&partitions);
                let expected: Vec<i64> = (0..(inputs * 7 * 10) as i64).collect();
                assert_eq!(rows, expected, "{inputs} inputs, {outputs} outputs");
            }
        }
    }

    /// A batch of texts of the given lengths, rows numbered from `first`, as Utf8 or Utf8View.
    fn texts(first: i64, lengths: &[usize], view: bool) -> RecordBatch {
        use datafusion::arrow::array::{ArrayRef, StringArray, StringViewArray};
        let values: Vec<String> = lengths.iter().map(|&n| "x".repeat(n)).collect();
        let (text, data_type): (ArrayRef, DataType) = if view {
            (
                Arc::new(StringViewArray::from_iter_values(&values)),
                DataType::Utf8View,
            )
        } else {
            (
                Arc::new(StringArray::from_iter_values(&values)),
                DataType::Utf8,
            )
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("text", data_type, false),
        ]));
        let rows = Int64Array::from_iter_values(first..first + lengths.len() as i64);
        RecordBatch::try_new(schema, vec![Arc::new(rows), text]).unwrap()
    }

    /// Oracle: the pieces put end to end are the batch, and each piece is the shortest run of
    /// rows from where it starts that reaches the piece size (the last may fall short).
    #[test]
    fn a_batch_is_cut_where_its_text_reaches_the_piece_size() {
        let mut rng = crate::rng::SplitMix64(7);
        for view in [false, true] {
            for _ in 0..50 {
                let rows = rng.below(40);
                let lengths: Vec<usize> = (0..rows).map(|_| rng.below(300)).collect();
                let batch = texts(0, &lengths, view);
                let pieces = cut_by_bytes(batch.clone(), 500);
                let joined =
                    datafusion::arrow::compute::concat_batches(&batch.schema(), &pieces).unwrap();
                assert_eq!(joined, batch);
                let mut start = 0;
                for (i, piece) in pieces.iter().enumerate() {
                    assert!(piece.num_rows() > 0 || rows == 0);
                    let sizes = &lengths[start..start + piece.num_rows()];
                    let total: usize = sizes.iter().sum();
                    if i + 1 < pieces.len() {
                        assert!(total >= 500, "{sizes:?}");
                        assert!(total - sizes[sizes.len() - 1] < 500, "{sizes:?}");
                    } else if pieces.len() > 1 || total > 500 {
                        assert!(total - sizes.last().unwrap_or(&0) < 500, "{sizes:?}");
                    }
                    start += piece.num_rows();
                }
                assert_eq!(start, rows);
            }
        }
    }

    /// Oracle: the row numbers, counted. Batches far over the piece size are cut, and every
    /// row still comes out once, with its own text, over any number of outputs.
    #[tokio::test]
    async fn cut_batches_come_out_whole() {
        let ctx = SessionContext::new();
        let lengths: Vec<usize> = (0..600).map(|i| (i * 7919) % (PIECE_BYTES / 8)).collect();
        let batches: Vec<RecordBatch> = lengths
            .chunks(100)
            .enumerate()
            .map(|(i, chunk)| texts(i as i64 * 100, chunk, false))
            .collect();
        let schema = batches[0].schema();
        let input = MemorySourceConfig::try_new_exec(
            &[batches[..3].to_vec(), batches[3..].to_vec()],
            schema,
            None,
        )
        .unwrap();
        for outputs in [1, 2, 3] {
            let plan: Arc<dyn ExecutionPlan> = Arc::new(OnDemandExec::new(input.clone(), outputs));
            let partitions = collect_partitioned(plan, ctx.task_ctx()).await.unwrap();
            let pieces: usize = partitions.iter().map(Vec::len).sum();
            assert!(pieces > 6, "{pieces} pieces: the batches were not cut");
            let mut rows: Vec<(i64, usize)> = partitions
                .iter()
                .flatten()
                .flat_map(|batch| {
                    let n = batch
                        .column(0)
                        .as_primitive::<Int64Type>()
                        .values()
                        .to_vec();
                    let text = batch.column(1).as_string::<i32>();
                    n.into_iter()
                        .zip(text.iter().map(|t| t.unwrap().len()))
                        .collect::<Vec<_>>()
                })
                .collect();
            rows.sort_unstable();
            let want: Vec<(i64, usize)> = lengths
                .iter()
                .enumerate()
                .map(|(i, &n)| (i as i64, n))
                .collect();
            assert_eq!(rows, want, "{outputs} outputs");
        }
    }

    /// A partition that asks for more takes more: one output read to the end before the other
    /// asks gets every batch, which a round-robin deal would have split evenly.
    #[tokio::test]
    async fn the_partition_that_asks_gets_the_batch() {
        let ctx = SessionContext::new();
        let plan = OnDemandExec::new(numbered(1, 6), 2);
        let mut first = plan.execute(0, ctx.task_ctx()).unwrap();
        let mut second = plan.execute(1, ctx.task_ctx()).unwrap();
        let mut taken = 0;
        while let Some(batch) = first.next().await {
            taken += batch.unwrap().num_rows();
        }
        assert_eq!(taken, 60);
        assert!(second.next().await.is_none());
    }

    /// The rule in a session: a one-row-group file's round-robin repartition becomes an
    /// `OnDemandExec` over the file cut into row ranges (as many as its outputs, or as the
    /// option says when fewer), and every row comes out once.
    #[tokio::test]
    async fn a_one_row_group_file_is_dealt_on_demand_over_row_ranges() {
        use datafusion::prelude::{ParquetReadOptions, SessionConfig};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.parquet");
        let rows = 20_000;
        crate::engine::row_slices::tests::one_row_group_file(&path, rows);
        for (enabled, slices) in [(false, 0), (true, 0), (true, 2)] {
            let mut config = SessionConfig::new()
                .with_target_partitions(3)
                .with_batch_size(256);
            config.options_mut().optimizer.repartition_file_scans = false;
            config
                .options_mut()
                .extensions
                .insert(OnDemand { enabled, slices });
            let ctx = session_with_rule(config, |runtime| Arc::new(DealOnDemand::new(runtime)));
            ctx.register_parquet("t", path.to_str().unwrap(), ParquetReadOptions::default())
                .await
                .unwrap();
            // `n * 2` is worth spreading over the cores: the planner puts a repartition under it.
            // (The job's row numbers through the rule: tests/it/input_order.rs.)
            let plan = ctx
                .sql("SELECT n * 2 AS twice, n FROM t")
                .await
                .unwrap()
                .create_physical_plan()
                .await
                .unwrap();
            let mut on_demand = Vec::new();
            plan.apply(|node| {
                if let Some(exec) = node.downcast_ref::<OnDemandExec>() {
                    let inputs = exec.input.output_partitioning().partition_count();
                    on_demand.push((exec.outputs, inputs));
                }
                Ok(TreeNodeRecursion::Continue)
            })
            .unwrap();
            let expected: &[(usize, usize)] = match (enabled, slices) {
                (false, _) => &[],
                (true, 0) => &[(3, 3)],
                (true, _) => &[(3, 2)],
            };
            assert_eq!(on_demand, expected, "enabled {enabled}, slices {slices}");
            let mut seen: Vec<(i64, i64)> = collect_partitioned(plan, ctx.task_ctx())
                .await
                .unwrap()
                .iter()
                .flatten()
                .flat_map(|batch| {
                    let twice = batch
                        .column(0)
                        .as_primitive::<Int64Type>()
                        .values()
                        .to_vec();
                    let row = batch
                        .column(1)
                        .as_primitive::<Int64Type>()
                        .values()
                        .to_vec();
                    twice.into_iter().zip(row)
                })
                .collect();
            seen.sort_unstable();
            let want: Vec<(i64, i64)> = (0..rows).map(|n| (n * 2, n)).collect();
            assert_eq!(seen, want, "enabled {enabled}, slices {slices}");
        }
    }
}
