//! Stopping an executor's running tasks when their job is cancelled. Under pull scheduling
//! Ballista's scheduler hands a cancelled job no more tasks but cannot reach the tasks already
//! running: executors only ever call it. So neardup's executor runs every task through
//! [`CancellableEngine`], and while any runs it asks the scheduler which jobs were cancelled
//! (`GET /neardup/cancelled`, served next to the cancel route in `super::ballista`) and stops
//! their tasks. Dropping a task's future would not do: Ballista drives a stage's partitions on
//! tasks of their own. Instead every leaf of the task's plan (its scans and shuffle reads) is
//! wrapped in [`StopWhenCancelled`], whose stream fails once the job is cancelled; the failure
//! runs up through every operator, so the task's work ends within a batch. The task reports the
//! failure, which the scheduler ignores for a job it has cancelled, and the job's shuffle files
//! go with Ballista's job cleanup.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ballista_core::JobId;
use ballista_core::serde::protobuf::{
    RuntimeStatsReport, ShuffleWritePartition, TaskColumnStats, WindowStateReport,
};
use ballista_executor::execution_engine::{ExecutionEngine, QueryStageExecutor};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use datafusion::prelude::SessionConfig;
use futures::Stream;

/// How often an executor with running tasks asks which jobs were cancelled.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);

/// How long after a cancel an executor's tasks of the job have stopped: a few asks, each
/// answered in milliseconds on a working cluster, and a batch of work.
pub const TASKS_STOP_WITHIN: Duration = Duration::from_secs(2);

/// How long a scheduler lists a cancelled job: long past any task that was running then.
const REMEMBER_FOR: Duration = Duration::from_secs(600);

/// The tasks an executor runs now, each with the job it belongs to and its stop flag.
#[derive(Debug, Default)]
pub struct RunningTasks {
    next: AtomicU64,
    tasks: Mutex<HashMap<u64, (String, Arc<AtomicBool>)>>,
}

impl RunningTasks {
    fn add(&self, job: &str, stop: Arc<AtomicBool>) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.insert(key, (job.to_string(), stop));
        }
        key
    }

    fn remove(&self, key: u64) {
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.remove(&key);
        }
    }

    /// Whether any task runs (the executor asks the scheduler only then).
    pub fn any(&self) -> bool {
        self.tasks.lock().is_ok_and(|tasks| !tasks.is_empty())
    }

    /// Stops the running tasks of the jobs in `cancelled`; returns how many it newly stopped.
    pub fn stop_jobs<'a>(&self, cancelled: impl IntoIterator<Item = &'a str>) -> usize {
        let cancelled: Vec<&str> = cancelled.into_iter().collect();
        let Ok(tasks) = self.tasks.lock() else {
            return 0;
        };
        tasks
            .values()
            .filter(|(job, _)| cancelled.contains(&job.as_str()))
            .filter(|(_, stop)| !stop.swap(true, Ordering::SeqCst))
            .count()
    }
}

/// The jobs a scheduler cancelled lately, for executors to stop their running tasks.
#[derive(Debug, Default)]
pub struct CancelledJobs {
    jobs: Mutex<Vec<(Instant, String)>>,
}

impl CancelledJobs {
    pub fn add(&self, job: &str) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.retain(|(when, _)| when.elapsed() < REMEMBER_FOR);
            jobs.push((Instant::now(), job.to_string()));
        }
    }

    /// The answer to `GET /neardup/cancelled`: one job id a line.
    pub fn listing(&self) -> String {
        let Ok(jobs) = self.jobs.lock() else {
            return String::new();
        };
        jobs.iter()
            .filter(|(when, _)| when.elapsed() < REMEMBER_FOR)
            .map(|(_, job)| format!("{job}\n"))
            .collect()
    }
}

/// Reads [`CancelledJobs::listing`].
pub fn parse_listing(body: &str) -> Vec<&str> {
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// The error a stopped task's streams end with.
fn cancelled_error(job: &str) -> DataFusionError {
    DataFusionError::Execution(format!("job {job} was cancelled"))
}

/// A leaf of a task's plan, unchanged until its job is cancelled; from then on its streams
/// fail. Never serialised: executors wrap the plans they have decoded.
#[derive(Debug)]
pub struct StopWhenCancelled {
    input: Arc<dyn ExecutionPlan>,
    stop: Arc<AtomicBool>,
    job: String,
}

impl DisplayAs for StopWhenCancelled {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "StopWhenCancelled")
    }
}

impl ExecutionPlan for StopWhenCancelled {
    fn name(&self) -> &str {
        "StopWhenCancelled"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(format!(
                "StopWhenCancelled takes one input, not {}",
                children.len()
            )));
        }
        Ok(Arc::new(Self {
            input: children.swap_remove(0),
            stop: Arc::clone(&self.stop),
            job: self.job.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if self.stop.load(Ordering::SeqCst) {
            return Err(cancelled_error(&self.job));
        }
        Ok(Box::pin(StoppableStream {
            input: self.input.execute(partition, context)?,
            stop: Arc::clone(&self.stop),
            job: self.job.clone(),
            ended: false,
        }))
    }
}

/// A leaf's stream that fails, once, when its job's stop flag is set, and then ends.
struct StoppableStream {
    input: SendableRecordBatchStream,
    stop: Arc<AtomicBool>,
    job: String,
    ended: bool,
}

impl Stream for StoppableStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.stop.load(Ordering::SeqCst) {
            self.ended = true;
            return Poll::Ready(Some(Err(cancelled_error(&self.job))));
        }
        self.input.as_mut().poll_next(cx)
    }
}

impl RecordBatchStream for StoppableStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

/// `plan` with each leaf wrapped in [`StopWhenCancelled`] on `stop`.
fn stoppable(
    plan: Arc<dyn ExecutionPlan>,
    stop: &Arc<AtomicBool>,
    job: &str,
) -> Result<Arc<dyn ExecutionPlan>> {
    let wrapped = plan.transform_up(|node| {
        if !node.children().is_empty() {
            return Ok(Transformed::no(node));
        }
        Ok(Transformed::yes(Arc::new(StopWhenCancelled {
            input: node,
            stop: Arc::clone(stop),
            job: job.to_string(),
        }) as Arc<dyn ExecutionPlan>))
    })?;
    Ok(wrapped.data)
}

/// Ballista's engine, with every task's plan stoppable through [`RunningTasks`].
pub struct CancellableEngine {
    inner: Arc<dyn ExecutionEngine>,
    running: Arc<RunningTasks>,
}

impl CancellableEngine {
    pub fn new(inner: Arc<dyn ExecutionEngine>, running: Arc<RunningTasks>) -> Self {
        Self { inner, running }
    }
}

impl ExecutionEngine for CancellableEngine {
    fn create_query_stage_exec(
        &self,
        job_id: JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> Result<Arc<dyn QueryStageExecutor>> {
        let job = job_id.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let inner = self.inner.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            stoppable(plan, &stop, &job)?,
            work_dir,
            config,
        )?;
        Ok(Arc::new(CancellableStage {
            inner,
            job,
            stage_id,
            stop,
            running: Arc::clone(&self.running),
        }))
    }
}

/// One task's stage executor: Ballista's, over a plan whose leaves stop on `stop`, listed in
/// [`RunningTasks`] while it runs. Every report the task sends with its result comes from the
/// inner executor.
#[derive(Debug)]
struct CancellableStage {
    inner: Arc<dyn QueryStageExecutor>,
    job: String,
    stage_id: usize,
    stop: Arc<AtomicBool>,
    running: Arc<RunningTasks>,
}

impl std::fmt::Display for CancellableStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

#[async_trait::async_trait]
impl QueryStageExecutor for CancellableStage {
    async fn execute_query_stage(
        &self,
        task_id: usize,
        context: Arc<TaskContext>,
    ) -> Result<Vec<ShuffleWritePartition>> {
        let key = self.running.add(&self.job, Arc::clone(&self.stop));
        let outcome = self.inner.execute_query_stage(task_id, context).await;
        self.running.remove(key);
        if outcome.is_err() && self.stop.load(Ordering::SeqCst) {
            // Said once the work has ended: Ballista awaits every partition of the task.
            crate::to_stderr!(
                "neardup: stopped task {task_id} of stage {} of job {}: the job was cancelled",
                self.stage_id,
                self.job
            );
        }
        outcome
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        self.inner.collect_plan_metrics()
    }

    fn collect_runtime_stats_reports(&self) -> Vec<RuntimeStatsReport> {
        self.inner.collect_runtime_stats_reports()
    }

    fn collect_window_state_reports(&self) -> Result<Vec<WindowStateReport>> {
        self.inner.collect_window_state_reports()
    }

    fn collect_column_stats(&self) -> Vec<TaskColumnStats> {
        self.inner.collect_column_stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_jobs_are_listed_one_a_line_and_read_back() {
        let jobs = CancelledJobs::default();
        assert_eq!(jobs.listing(), "");
        jobs.add("aBc1");
        jobs.add("x2");
        assert_eq!(parse_listing(&jobs.listing()), ["aBc1", "x2"]);
        assert!(parse_listing("\n \n").is_empty());
    }

    /// A plan of the shape a task gets: its leaves are wrapped, and once the job's flag is set
    /// a running stream fails and the next ones fail at once.
    #[tokio::test]
    async fn a_cancelled_jobs_tasks_stop_and_only_theirs() {
        use datafusion::physical_plan::collect;
        use futures::StreamExt;

        let ctx = datafusion::prelude::SessionContext::new();
        // A new physical plan for each run: a plan's repartitions run once.
        let plan = || async {
            let sql = "SELECT a.value FROM generate_series(1, 100000) a \
                       JOIN generate_series(1, 10) b ON a.value = b.value";
            let frame = ctx.sql(sql).await.unwrap();
            frame.create_physical_plan().await.unwrap()
        };
        let running = RunningTasks::default();
        let (stop_a, stop_b) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let a = stoppable(plan().await, &stop_a, "job-a").unwrap();
        let b = stoppable(plan().await, &stop_b, "job-b").unwrap();
        let mut leaves = 0;
        a.apply(|node| {
            if node.children().is_empty() {
                leaves += 1;
            }
            if node.name() == "StopWhenCancelled" {
                assert!(
                    node.children()[0].children().is_empty(),
                    "only leaves are wrapped"
                );
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .unwrap();
        assert!(leaves >= 2, "both sides of the join");
        let key = running.add("job-a", Arc::clone(&stop_a));
        running.add("job-b", Arc::clone(&stop_b));
        assert!(running.any());

        let mut stream = a.execute(0, ctx.task_ctx()).unwrap();
        assert_eq!(running.stop_jobs(["job-a", "job-z"]), 1);
        assert_eq!(running.stop_jobs(["job-a"]), 0, "already stopped");
        let mut failed = false;
        while let Some(batch) = stream.next().await {
            if let Err(e) = batch {
                assert!(e.to_string().contains("job job-a was cancelled"), "{e}");
                failed = true;
                break;
            }
        }
        assert!(failed, "job-a's running stream failed");
        let a_again = stoppable(plan().await, &stop_a, "job-a").unwrap();
        assert!(collect(a_again, ctx.task_ctx()).await.is_err());
        let rows: usize = collect(b, ctx.task_ctx())
            .await
            .unwrap()
            .iter()
            .map(RecordBatch::num_rows)
            .sum();
        assert_eq!(rows, 10, "job-b runs to the end");
        running.remove(key);
        assert!(running.any());
    }
}
