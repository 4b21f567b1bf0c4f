use std::process::ExitCode;

use clap::Parser;
use neardup::cli::{Cli, execute};

fn main() -> ExitCode {
    // A panic is a bug: say so plainly instead of printing Rust's message, and exit non-zero.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("neardup: internal error (a bug in neardup, please report it): {info}");
    }));
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("neardup: error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(execute(cli))
    }));
    match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("neardup: error: {error}");
            ExitCode::from(error.exit_code() as u8)
        }
        Err(_) => ExitCode::from(1),
    }
}
