//! Stage times: reported on standard error as each stage finishes, and kept for summary.json.

use std::time::Instant;

use crate::error::Result;
use crate::job::summary::{StageTime, peak_rss_bytes, process_cpu_seconds};

/// Times stages and reports them on stderr as they finish.
pub struct Stopwatch {
    pub started: Instant,
    /// The process's CPU time when the job started; `None` when its work runs elsewhere (a
    /// cluster), where this process's CPU says nothing of the stages.
    pub started_cpu: Option<f64>,
    pub stages: Vec<StageTime>,
    pub quiet: bool,
}

impl Stopwatch {
    /// `in_process`: the stages run in this process, so its CPU time is theirs.
    pub fn new(quiet: bool, in_process: bool) -> Self {
        Self {
            started: Instant::now(),
            started_cpu: in_process.then(process_cpu_seconds).flatten(),
            stages: Vec::new(),
            quiet,
        }
    }

    /// The process's CPU seconds since `since` (a reading of `process_cpu_seconds`, `None`
    /// when the CPU is not counted).
    pub fn cpu_since(since: Option<f64>) -> Option<f64> {
        Some((process_cpu_seconds()? - since?).max(0.0))
    }

    pub async fn time<T>(
        &mut self,
        stage: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let start = Instant::now();
        let start_cpu = self.started_cpu.and(process_cpu_seconds());
        let value = work.await?;
        let seconds = start.elapsed().as_secs_f64();
        let time = StageTime {
            stage: stage.to_string(),
            seconds,
            rows: None,
            peak_rss_bytes: peak_rss_bytes(),
            cpu_seconds: Self::cpu_since(start_cpu),
        };
        if !self.quiet {
            match time.cores() {
                Some(cores) => {
                    crate::to_stderr!("neardup: {stage:<12} {seconds:>8.2} s {cores:>6.2} cores")
                }
                None => crate::to_stderr!("neardup: {stage:<12} {seconds:>8.2} s"),
            }
        }
        self.stages.push(time);
        faults_for_tests(stage);
        Ok(value)
    }
}

/// Fault injection for the tests: `NEARDUP_PAUSE_AFTER_STAGE=<stage>` holds the run for a
/// minute after that stage, so a test can kill it at a known point;
/// `NEARDUP_PANIC_AFTER_STAGE=<stage>` panics there, as a bug in neardup would.
fn faults_for_tests(stage: &str) {
    if std::env::var("NEARDUP_PAUSE_AFTER_STAGE").is_ok_and(|s| s == stage) {
        crate::to_stderr!("neardup: pausing after {stage} (NEARDUP_PAUSE_AFTER_STAGE)");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
    if std::env::var("NEARDUP_PANIC_AFTER_STAGE").is_ok_and(|s| s == stage) {
        panic!("injected by NEARDUP_PANIC_AFTER_STAGE after {stage}");
    }
}
