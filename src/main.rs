use std::process::ExitCode;

use clap::Parser;
use neardup::cli::{Cli, execute};

fn main() -> ExitCode {
    // A panic is a bug: say so plainly instead of printing Rust's message, and exit non-zero.
    // A reader's panic on a damaged file, which a caught section turns into an error naming
    // the file, is reported as that error instead.
    std::panic::set_hook(Box::new(|info| {
        if let Some(place) = info.location()
            && neardup::engine::caught_panics::reported_as_error(place.file())
        {
            neardup::engine::caught_panics::record_place(place.to_string());
            return;
        }
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let place = info
            .location()
            .map(|l| format!(" ({}:{})", l.file(), l.line()))
            .unwrap_or_default();
        neardup::to_stderr!(
            "neardup: internal error, a bug in neardup; please report it: {message}{place}"
        );
    }));
    // Ctrl-C or SIGTERM: no half-written output may stay behind. The process ends without
    // unwinding, so the staging folders are removed here rather than by `Drop`.
    if let Err(e) = ctrlc::set_handler(|| {
        // In `query`'s shell, Ctrl-C stops the running query and the shell goes on.
        if neardup::commands::query_shell::stop_running_query() {
            return;
        }
        // A second interrupt while the commits wind down: stop now, as `kill` would.
        if neardup::engine::staging::interrupt_deferred() {
            neardup::to_stderr!(
                "neardup: interrupted again; stopping now: tables this run committed may stay \
                 ahead of summary.json, and the next run over the output names them"
            );
            neardup::engine::staging::remove_live_staging();
            neardup::engine::work_folder::remove_live();
            std::process::exit(130);
        }
        neardup::engine::staging::mark_interrupted();
        // Delta tables being committed one by one: the commits stop before the next table and
        // put back those committed, and `main` ends the process.
        if neardup::engine::staging::defer_interrupt_to_commits() {
            neardup::to_stderr!(
                "neardup: interrupted while the Delta tables are committed; stopping after the \
                 table in hand and putting back those committed"
            );
            return;
        }
        // A job on a cluster first: no more of its tasks start, so no more files are written.
        let removed = if neardup::engine::ballista::cancel_live_job() {
            neardup::to_stderr!("neardup: interrupted; the cluster job was cancelled");
            // Its running tasks stop within a moment, and may write until then.
            let pause = neardup::engine::task_cancel::TASKS_STOP_WITHIN;
            neardup::engine::staging::remove_live_staging_twice(pause)
        } else {
            neardup::engine::staging::remove_live_staging()
        };
        if removed {
            neardup::to_stderr!(
                "neardup: interrupted; nothing was written (an earlier output is untouched)"
            );
        } else {
            neardup::to_stderr!("neardup: interrupted");
        }
        // Shuffle and spill files last, just before the exit: the tasks of a job in this
        // process (`--cluster standalone`) run until then and may create their folders again.
        neardup::engine::work_folder::remove_live();
        std::process::exit(130);
    }) {
        neardup::to_stderr!(
            "neardup: warning: cannot handle Ctrl-C ({e}); an interrupted run may leave a staging folder"
        );
    }
    let cli = Cli::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = cli.local_threads() {
        if threads > neardup::cli::args::MOST_LOCAL_THREADS {
            neardup::to_stderr!(
                "neardup: error: --threads {threads}: at most {} in one process (this machine \
                 has {} cores); each is a thread with its own buffers, and thousands of them \
                 exhaust the memory before the job starts",
                neardup::cli::args::MOST_LOCAL_THREADS,
                std::thread::available_parallelism().map_or(1, usize::from)
            );
            return ExitCode::from(2);
        }
        builder.worker_threads(threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            neardup::to_stderr!("neardup: error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Fault injection for the test of this very handler.
        if std::env::var_os("NEARDUP_PANIC_FOR_TESTS").is_some() {
            panic!("injected by NEARDUP_PANIC_FOR_TESTS");
        }
        runtime.block_on(execute(cli))
    }));
    match outcome {
        Ok(Ok(())) if neardup::engine::staging::interrupt_deferred() => {
            neardup::to_stderr!("neardup: interrupted; the output was already committed whole");
            ExitCode::from(130)
        }
        Ok(Ok(())) => ExitCode::SUCCESS,
        // The interrupt came while Delta tables were committed; those were put back, and the
        // handler left the rest of the clean-up here.
        Ok(Err(_)) if neardup::engine::staging::interrupt_deferred() => {
            neardup::engine::staging::remove_live_staging();
            neardup::engine::work_folder::remove_live();
            neardup::to_stderr!(
                "neardup: interrupted; the run's Delta commits stopped, and the tables it had \
                 committed were put back where the lines above say so"
            );
            ExitCode::from(130)
        }
        // The interrupt handler is cleaning up and exits with 130; the job's error (its cluster
        // job cancelled, say) is the interrupt's, not the user's to read.
        Ok(Err(_)) if neardup::engine::staging::interrupted() => {
            std::thread::sleep(std::time::Duration::from_secs(15));
            ExitCode::from(130)
        }
        Ok(Err(error)) => {
            neardup::to_stderr!("neardup: error: {error}");
            ExitCode::from(error.exit_code() as u8)
        }
        Err(_) => ExitCode::from(1),
    }
}
