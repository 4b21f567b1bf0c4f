//! Stage times: reported on standard error as each stage finishes, and kept for summary.json.

use std::time::Instant;

use crate::error::Result;
use crate::job::summary::{StageTime, peak_rss_bytes};

/// Times stages and reports them on stderr as they finish.
pub struct Stopwatch {
    pub started: Instant,
    pub stages: Vec<StageTime>,
    pub quiet: bool,
}

impl Stopwatch {
    pub fn new(quiet: bool) -> Self {
        Self {
            started: Instant::now(),
            stages: Vec::new(),
            quiet,
        }
    }

    pub async fn time<T>(
        &mut self,
        stage: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let start = Instant::now();
        let value = work.await?;
        let seconds = start.elapsed().as_secs_f64();
        if !self.quiet {
            eprintln!("neardup: {stage:<12} {seconds:>8.2} s");
        }
        self.stages.push(StageTime {
            stage: stage.to_string(),
            seconds,
            rows: None,
            peak_rss_bytes: peak_rss_bytes(),
        });
        pause_for_tests(stage);
        Ok(value)
    }
}

/// Fault injection for the interruption tests: `NEARDUP_PAUSE_AFTER_STAGE=<stage>` holds the
/// run for a minute after that stage, so a test can kill it at a known point.
fn pause_for_tests(stage: &str) {
    if std::env::var("NEARDUP_PAUSE_AFTER_STAGE").is_ok_and(|s| s == stage) {
        eprintln!("neardup: pausing after {stage} (NEARDUP_PAUSE_AFTER_STAGE)");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
