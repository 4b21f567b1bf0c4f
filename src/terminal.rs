//! Lines for the person at the terminal, on standard error (progress, warnings, errors) or
//! standard output (what a command answers). A stream whose reader went away (`2>&1 | head`
//! closes it once head has read its line) drops them: `eprintln!` and `println!` would panic
//! there, and a second panic in the panic hook's own message aborts the process, leaving a
//! run's staging folder behind. A message must never stop a job.

use std::io::Write;

/// `eprintln!` that drops the line when standard error cannot take it.
#[macro_export]
macro_rules! to_stderr {
    ($($arg:tt)*) => {
        $crate::terminal::write_stderr(format_args!($($arg)*))
    };
}

/// `println!` that drops the line when standard output cannot take it.
#[macro_export]
macro_rules! to_stdout {
    ($($arg:tt)*) => {
        $crate::terminal::write_stdout(format_args!($($arg)*), true)
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
pub fn write_stdout(text: std::fmt::Arguments, newline: bool) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_fmt(text)
        .and_then(|()| {
            if newline {
                stdout.write_all(b"\n")
            } else {
                Ok(())
            }
        })
        .and_then(|()| stdout.flush());
}

/// `print!` of a command's whole answer, dropped likewise.
pub fn print_answer(text: &str) {
    write_stdout(format_args!("{text}"), false);
}
