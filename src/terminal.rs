//! Lines for the person at the terminal, on standard error (progress, warnings, errors) or
//! standard output (what a command answers). A stream whose reader went away (`2>&1 | head`
//! closes it once head has read its line) drops them: `eprintln!` and `println!` would panic
//! there, and a second panic in the panic hook's own message aborts the process, leaving a
//! run's staging folder behind. A message must never stop a job.

use std::io::{ErrorKind, Write};

use crate::error::{Error, Result};

/// `eprintln!` that drops the line when standard error cannot take it (whatever the reason:
/// there is nowhere left to say so).
#[macro_export]
macro_rules! to_stderr {
    ($($arg:tt)*) => {
        $crate::terminal::write_stderr(format_args!($($arg)*))
    };
}

/// `println!` for the lines around a job's committed output (its summary, where the tables
/// are), dropped when standard output cannot take them: the output is written either way.
#[macro_export]
macro_rules! to_stdout {
    ($($arg:tt)*) => {
        $crate::terminal::write_stdout_line(format_args!($($arg)*))
    };
}

#[doc(hidden)]
pub fn write_stderr(line: std::fmt::Arguments) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_fmt(line)
        .and_then(|()| stderr.write_all(b"\n"));
}

#[doc(hidden)]
pub fn write_stdout_line(line: std::fmt::Arguments) {
    let _ = write_stdout(format_args!("{line}\n"));
}

#[doc(hidden)]
pub fn write_stdout(text: std::fmt::Arguments) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_fmt(text).and_then(|()| stdout.flush())
}

/// A command's whole answer (`eval`'s scores, `explain`, `plan`, `report`) on standard output.
/// A reader that has gone is no error (`neardup eval ... | head`); any other failure is (a full
/// disk under `> scores.json` must not look like success).
pub fn print_answer(text: &str) -> Result<()> {
    match write_stdout(format_args!("{text}")) {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(Error::io("standard output", e)),
        _ => Ok(()),
    }
}
