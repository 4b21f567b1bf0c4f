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
//! (`crate::engine::row_slices`) each output reads its own until it runs dry.
//!
//! `DealOnDemand`, a physical optimizer rule, puts `OnDemandExec` in place of each round-robin
//! repartition of a plan, over the input cut into row ranges where it is a Parquet scan. Only
//! where the session option `OnDemand::enabled` is on: the signature stage, where each batch is
//! seconds of fingerprinting that vary from batch to batch; elsewhere batches cost about the
//! same and DataFusion's repartition is left alone.

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result as DataFusionResult};
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
    }
}

impl ConfigExtension for OnDemand {
    const PREFIX: &'static str = "neardup_on_demand";
}

/// Replaces each round-robin repartition with an `OnDemandExec` of as many partitions, whose
/// input is cut into as many row ranges where it is a Parquet scan (`row_slices::sliced`). It
/// runs after DataFusion's rules, when the repartitions are in place and the scans read their
/// row numbers themselves.
#[derive(Debug, Default)]
pub struct DealOnDemand;

impl PhysicalOptimizerRule for DealOnDemand {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DataFusionResult<Arc<dyn ExecutionPlan>> {
        if !config
            .extensions
            .get::<OnDemand>()
            .is_some_and(|on_demand| on_demand.enabled)
        {
            return Ok(plan);
        }
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
            let input = row_slices::sliced(input, outputs).unwrap_or_else(|| Arc::clone(input));
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

/// One execution: the input partitions' streams, `None` once a stream has ended, and how
/// many output partitions have been executed so far.
#[derive(Debug)]
struct Run {
    inputs: Arc<Inputs>,
    started: usize,
}

type Inputs = Vec<AsyncMutex<Option<SendableRecordBatchStream>>>;

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
                    inputs: Arc::new(streams),
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
        let count = inputs.len();
        // Output p starts on input p (mod the inputs) and moves on as each runs dry.
        let order: Vec<usize> = (0..count).map(|i| (partition + i) % count).collect();
        let batches =
            futures::stream::unfold((inputs, order, 0), |(inputs, order, mut at)| async move {
                while let Some(&input) = order.get(at) {
                    let mut slot = inputs[input].lock().await;
                    let next = match slot.as_mut() {
                        Some(stream) => stream.next().await,
                        None => None,
                    };
                    match next {
                        Some(batch) => {
                            drop(slot);
                            return Some((batch, (inputs, order, at)));
                        }
                        None => {
                            *slot = None;
                            at += 1;
                        }
                    }
                }
                None
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
                let mut rows: Vec<i64> = partitions
                    .iter()
                    .flatten()
                    .flat_map(|batch| {
                        batch
                            .column(0)
                            .as_primitive::<Int64Type>()
                            .values()
                            .to_vec()
                    })
                    .collect();
                rows.sort_unstable();
                let expected: Vec<i64> = (0..(inputs * 7 * 10) as i64).collect();
                assert_eq!(rows, expected, "{inputs} inputs, {outputs} outputs");
            }
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
    /// `OnDemandExec` over the file cut into row ranges, and every row comes out once.
    #[tokio::test]
    async fn a_one_row_group_file_is_dealt_on_demand_over_row_ranges() {
        use datafusion::execution::SessionStateBuilder;
        use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
        use datafusion::prelude::{ParquetReadOptions, SessionConfig};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.parquet");
        let rows = 20_000;
        crate::engine::row_slices::tests::one_row_group_file(&path, rows);
        for enabled in [false, true] {
            let mut config = SessionConfig::new()
                .with_target_partitions(3)
                .with_batch_size(256);
            config.options_mut().optimizer.repartition_file_scans = false;
            config.options_mut().extensions.insert(OnDemand { enabled });
            let mut rules = PhysicalOptimizer::new().rules;
            rules.push(Arc::new(DealOnDemand));
            let state = SessionStateBuilder::new()
                .with_config(config)
                .with_default_features()
                .with_physical_optimizer_rules(rules)
                .build();
            let ctx = SessionContext::new_with_state(state);
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
                    on_demand.push(exec.input.output_partitioning().partition_count());
                }
                Ok(TreeNodeRecursion::Continue)
            })
            .unwrap();
            let expected: &[usize] = if enabled { &[3] } else { &[] };
            assert_eq!(on_demand, expected, "enabled {enabled}");
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
            assert_eq!(seen, want, "enabled {enabled}");
        }
    }
}
