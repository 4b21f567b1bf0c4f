//! Stopping an executor's running tasks when their job is cancelled. Under pull scheduling
//! Ballista's scheduler hands a cancelled job no more tasks but cannot reach the tasks already
//! running: executors only ever call it. So neardup's executor runs every task through
//! [`CancellableEngine`], which can abort it, and while any runs it asks the scheduler which
//! jobs were cancelled (`GET /neardup/cancelled`, served next to the cancel route in
//! `super::ballista`) and aborts their tasks. Dropping a task's future drops its DataFusion
//! streams, which stops their work; the task reports failure, which the scheduler ignores for a
//! job it has cancelled, and the job's shuffle files go with Ballista's job cleanup.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ballista_core::JobId;
use ballista_core::serde::protobuf::{
    RuntimeStatsReport, ShuffleWritePartition, TaskColumnStats, WindowStateReport,
};
use ballista_executor::execution_engine::{ExecutionEngine, QueryStageExecutor};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::prelude::SessionConfig;
use futures::future::{AbortHandle, Abortable, Aborted};

/// How often an executor with running tasks asks which jobs were cancelled.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);

/// How long a scheduler lists a cancelled job: long past any task that was running then.
const REMEMBER_FOR: Duration = Duration::from_secs(600);

/// The tasks an executor runs now, each with the job it belongs to and its abort handle.
#[derive(Debug, Default)]
pub struct RunningTasks {
    next: AtomicU64,
    tasks: Mutex<HashMap<u64, (String, AbortHandle)>>,
}

impl RunningTasks {
    fn add(&self, job: &str, handle: AbortHandle) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.insert(key, (job.to_string(), handle));
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

    /// Aborts the running tasks of the jobs in `cancelled`; returns how many.
    pub fn abort_jobs<'a>(&self, cancelled: impl IntoIterator<Item = &'a str>) -> usize {
        let cancelled: Vec<&str> = cancelled.into_iter().collect();
        let Ok(tasks) = self.tasks.lock() else {
            return 0;
        };
        let mut aborted = 0;
        for (job, handle) in tasks.values() {
            if cancelled.contains(&job.as_str()) && !handle.is_aborted() {
                handle.abort();
                aborted += 1;
            }
        }
        aborted
    }
}

/// The jobs a scheduler cancelled lately, for executors to abort their running tasks.
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

/// Ballista's engine, with every task abortable through [`RunningTasks`].
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
        let inner = self.inner.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            plan,
            work_dir,
            config,
        )?;
        Ok(Arc::new(CancellableStage {
            inner,
            job,
            stage_id,
            running: Arc::clone(&self.running),
        }))
    }
}

/// One task's stage executor: Ballista's, run so that [`RunningTasks`] can abort it. Every
/// report the task sends with its result comes from the inner executor.
#[derive(Debug)]
struct CancellableStage {
    inner: Arc<dyn QueryStageExecutor>,
    job: String,
    stage_id: usize,
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
        let (handle, registration) = AbortHandle::new_pair();
        let key = self.running.add(&self.job, handle);
        let task = Abortable::new(
            self.inner.execute_query_stage(task_id, context),
            registration,
        );
        let outcome = task.await;
        self.running.remove(key);
        match outcome {
            Ok(result) => result,
            Err(Aborted) => {
                eprintln!(
                    "neardup: stopped task {task_id} of stage {} of job {}: the job was cancelled",
                    self.stage_id, self.job
                );
                Err(DataFusionError::Execution(format!(
                    "job {} was cancelled",
                    self.job
                )))
            }
        }
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

    #[tokio::test]
    async fn only_the_cancelled_jobs_tasks_are_aborted() {
        let running = RunningTasks::default();
        let (a, a_reg) = AbortHandle::new_pair();
        let (b, b_reg) = AbortHandle::new_pair();
        let key_a = running.add("job-a", a);
        running.add("job-b", b);
        assert!(running.any());
        assert_eq!(running.abort_jobs(["job-a", "job-z"]), 1);
        // Already aborted: not counted again.
        assert_eq!(running.abort_jobs(["job-a"]), 0);
        let forever = || futures::future::pending::<()>();
        assert_eq!(Abortable::new(forever(), a_reg).await, Err(Aborted));
        let b_task = Abortable::new(forever(), b_reg);
        let waited = tokio::time::timeout(Duration::from_millis(50), b_task).await;
        assert!(waited.is_err(), "job-b's task still runs");
        running.remove(key_a);
        assert!(running.any());
    }
}
