//! `RUST_LOG` and `--verbose`: log records on standard error, e.g. `RUST_LOG=neardup=debug`
//! (each stage's SQL as it runs, the planner's comparison) or `RUST_LOG=datafusion=debug`.
//!
//! Written here rather than taken from `env_logger`: that crate switches on the `log` crate's
//! `std` feature, which rebuilds DataFusion's whole dependency tree (35 minutes on the project's
//! machine) for a filter of a few lines.

use std::sync::OnceLock;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// `target=level` directives (or a bare level for every target), most specific first.
struct Logger {
    directives: Vec<(String, LevelFilter)>,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

impl Logger {
    fn level_for(&self, target: &str) -> LevelFilter {
        self.directives
            .iter()
            .find(|(prefix, _)| target.starts_with(prefix.as_str()))
            .map_or(LevelFilter::Off, |(_, level)| *level)
    }
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= self.level_for(metadata.target())
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            let level = match record.level() {
                Level::Error => "ERROR",
                Level::Warn => "WARN",
                Level::Info => "INFO",
                Level::Debug => "DEBUG",
                Level::Trace => "TRACE",
            };
            crate::to_stderr!("[{level} {}] {}", record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Parses `RUST_LOG`-style directives: `debug`, `neardup=debug,datafusion=info`. Unknown levels
/// are skipped.
fn parse(spec: &str) -> Vec<(String, LevelFilter)> {
    let mut directives: Vec<(String, LevelFilter)> = spec
        .split(',')
        .filter_map(|part| {
            let part = part.trim();
            let (target, level) = match part.split_once('=') {
                Some((target, level)) => (target.trim(), level.trim()),
                None => ("", part),
            };
            level.parse().ok().map(|level| (target.to_string(), level))
        })
        .collect();
    // Longest target first, so `neardup::job=trace` wins over `neardup=info`.
    directives.sort_by_key(|(target, _)| std::cmp::Reverse(target.len()));
    directives
}

/// What a job logs without `RUST_LOG`: `neardup=debug` with `--verbose`, else nothing.
pub fn job_default(verbose: bool) -> &'static str {
    if verbose { "neardup=debug" } else { "" }
}

/// What the scheduler and executors log without `RUST_LOG`: warnings, and Ballista's
/// registrations and tasks.
pub const SERVER_DEFAULT: &str = "warn,ballista=info";

/// Installs the logger once: `RUST_LOG` if set, else `default`.
pub fn init(default: &str) {
    let spec = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default.to_string());
    let directives = parse(&spec);
    let max = directives
        .iter()
        .map(|(_, level)| *level)
        .max()
        .unwrap_or(LevelFilter::Off);
    let logger = LOGGER.get_or_init(|| Logger { directives });
    if log::set_logger(logger).is_ok() {
        log::set_max_level(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_pick_the_most_specific_target() {
        let logger = Logger {
            directives: parse("warn, neardup=debug, neardup::pipeline=trace, bogus=loud"),
        };
        assert_eq!(logger.level_for("neardup::pipeline"), LevelFilter::Trace);
        assert_eq!(logger.level_for("neardup::job"), LevelFilter::Debug);
        assert_eq!(
            logger.level_for("datafusion::physical_plan"),
            LevelFilter::Warn
        );
        assert_eq!(
            Logger {
                directives: parse("")
            }
            .level_for("neardup"),
            LevelFilter::Off
        );
    }
}
