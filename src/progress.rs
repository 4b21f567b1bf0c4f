//! Progress bars on standard error while a stage runs: documents fingerprinted, candidate passes.
//! Shown only on a terminal and without `--quiet`; a bar is cleared before the stage's time line.
//!
//! The text functions count the documents they fingerprint in [`DOCUMENTS_SIGNED`]; a task reads
//! the count a few times a second. (DataFusion gives no per-row progress of a running query, and
//! a counter costs one atomic add per batch.)

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Documents the text functions have fingerprinted in this process.
pub static DOCUMENTS_SIGNED: AtomicU64 = AtomicU64::new(0);

/// Adds a batch's documents to the count.
pub fn count_signed(documents: usize) {
    DOCUMENTS_SIGNED.fetch_add(documents as u64, Ordering::Relaxed);
}

/// A bar for one stage, or nothing (not a terminal, or `--quiet`).
pub struct StageBar {
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl StageBar {
    fn new(total: u64, unit: &str, shown: bool) -> Self {
        if !shown || !std::io::stderr().is_terminal() {
            return Self {
                bar: None,
                ticker: None,
            };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let template =
            format!("neardup: {{prefix:<12}} [{{bar:24}}] {{pos}}/{{len}} {unit}, eta {{eta}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self {
            bar: Some(bar),
            ticker: None,
        }
    }

    /// Documents fingerprinted out of `total`, read from [`DOCUMENTS_SIGNED`] while the stage runs.
    pub fn documents(total: u64, shown: bool) -> Self {
        let mut stage = Self::new(total, "documents", shown);
        let start = DOCUMENTS_SIGNED.load(Ordering::Relaxed);
        if let Some(bar) = &stage.bar {
            bar.set_prefix("signatures");
            let bar = bar.clone();
            stage.ticker = Some(tokio::spawn(async move {
                loop {
                    let done = DOCUMENTS_SIGNED
                        .load(Ordering::Relaxed)
                        .saturating_sub(start);
                    bar.set_position(done.min(bar.length().unwrap_or(done)));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }));
        }
        stage
    }

    /// Candidate passes done out of `total` (shown only when there are several).
    pub fn passes(total: u64, shown: bool) -> Self {
        let stage = Self::new(total, "passes", shown && total > 1);
        if let Some(bar) = &stage.bar {
            bar.set_prefix("candidates");
        }
        stage
    }

    pub fn advance(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }
}

impl Drop for StageBar {
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
