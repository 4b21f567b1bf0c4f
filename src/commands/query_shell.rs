//! `neardup query` on a terminal with no SQL: an interactive shell over the same session.
//!
//! Statements may span lines and end with `;`; `\d` lists the tables, `\d NAME` shows one's
//! columns, `\?` the commands, `\q` (or Ctrl-D) leaves. Ctrl-C at the prompt clears the line and
//! during a query stops that query. History is kept in `NEARDUP_HISTORY`, else
//! `~/.neardup_history`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Config, Editor};

use crate::commands::query::{QueryOptions, write_result};
use crate::error::{Error, QueryContext, Result};

/// Entries the history file keeps.
const HISTORY_ENTRIES: usize = 1000;

const HELP: &str = "\
Statements end with ';' and may span lines. Several in one entry all run; the last one's result
is shown. Ctrl-C clears the line or stops the running query.
  \\d         list the tables
  \\d NAME    the columns of table NAME
  \\?         this help
  \\q         quit (or Ctrl-D)";

/// Set while a shell query runs, so that Ctrl-C stops the query instead of the process.
static QUERY_RUNNING: AtomicBool = AtomicBool::new(false);
/// Wakes the running query's wait when Ctrl-C arrives.
static STOP_QUERY: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Called by the Ctrl-C handler: stops the shell's running query and returns true, or returns
/// false when no shell query runs (the handler then ends the process as usual).
pub fn stop_running_query() -> bool {
    if !QUERY_RUNNING.load(Ordering::SeqCst) {
        return false;
    }
    STOP_QUERY.notify_waiters();
    true
}

/// Reads statements from the terminal and prints each result until `\q` or end of input.
pub async fn shell(ctx: &SessionContext, options: &QueryOptions) -> Result<()> {
    let config = Config::builder()
        .max_history_size(HISTORY_ENTRIES)
        .map_err(|e| Error::Usage(format!("cannot start the shell: {e}")))?
        .auto_add_history(true)
        .build();
    let mut editor: Editor<StatementEnd, DefaultHistory> = Editor::with_config(config)
        .map_err(|e| Error::Usage(format!("cannot start the shell on this terminal: {e}")))?;
    editor.set_helper(Some(StatementEnd));
    let history = history_file();
    if let Some(file) = &history {
        // A first session has no history yet; any other problem shows when it is saved.
        let _ = editor.load_history(file);
    }
    println!("{}", banner(ctx));
    loop {
        match editor.readline("neardup> ") {
            Ok(entry) => {
                let entry = entry.trim();
                if entry.is_empty() {
                    continue;
                }
                if let Some(command) = entry.strip_prefix('\\') {
                    match shell_command(ctx, command.trim_end_matches(';').trim()).await {
                        Ok(ShellStep::Continue) => {}
                        Ok(ShellStep::Quit) => break,
                        Err(e) => crate::to_stderr!("neardup: error: {e}"),
                    }
                    continue;
                }
                if let Err(e) = run_entry(ctx, options, entry).await {
                    crate::to_stderr!("neardup: error: {e}");
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                save_history(&mut editor, history.as_deref());
                return Err(Error::io("<terminal>", std::io::Error::other(e)));
            }
        }
    }
    save_history(&mut editor, history.as_deref());
    Ok(())
}

/// The first lines the shell prints: what is registered and how to leave.
fn banner(ctx: &SessionContext) -> String {
    let tables = table_names(ctx);
    let listed = if tables.is_empty() {
        "no tables (query files by path: SELECT * FROM 'file.parquet')".to_string()
    } else {
        format!("tables {}", tables.join(", "))
    };
    format!("neardup query: {listed}\nStatements end with ';'. \\? for help, \\q to quit.")
}

/// Runs one entry's statements, printing the last one's result and how long it took; Ctrl-C
/// stops it.
async fn run_entry(ctx: &SessionContext, options: &QueryOptions, sql: &str) -> Result<()> {
    let started = Instant::now();
    // Created before the flag is set, so a Ctrl-C any time after it is seen.
    let stopped = STOP_QUERY.notified();
    QUERY_RUNNING.store(true, Ordering::SeqCst);
    let run = async {
        let copy_rule = |plan: &LogicalPlan| crate::commands::query::check_copy(plan, options);
        let frame = crate::engine::sql::run_all_but_last(ctx, sql, &copy_rule).await?;
        let sink = BufWriter::new(std::io::stdout());
        write_result(frame, options, sink, Path::new("<standard output>")).await
    };
    let outcome = tokio::select! {
        outcome = run => Some(outcome),
        () = stopped => None,
    };
    QUERY_RUNNING.store(false, Ordering::SeqCst);
    match outcome {
        Some(rows) => {
            let rows = rows?;
            let noun = if rows == 1 { "row" } else { "rows" };
            println!("{rows} {noun} in {:.3} s", started.elapsed().as_secs_f64());
            Ok(())
        }
        None => {
            // The result may have stopped mid-line.
            println!();
            crate::to_stderr!("neardup: query stopped");
            Ok(())
        }
    }
}

enum ShellStep {
    Continue,
    Quit,
}

/// Runs a backslash command (without its backslash).
async fn shell_command(ctx: &SessionContext, command: &str) -> Result<ShellStep> {
    let (name, argument) = match command.split_once(char::is_whitespace) {
        Some((name, argument)) => (name, argument.trim()),
        None => (command, ""),
    };
    match (name, argument) {
        ("q", "") => return Ok(ShellStep::Quit),
        ("?" | "h", "") => println!("{HELP}"),
        ("d", "") => {
            let tables = table_names(ctx);
            if tables.is_empty() {
                println!("no tables");
            }
            for table in tables {
                println!("{table}");
            }
        }
        ("d", table) => describe(ctx, table).await?,
        _ => {
            return Err(Error::Usage(format!(
                "unknown shell command \\{command}; \\? lists the commands"
            )));
        }
    }
    Ok(ShellStep::Continue)
}

/// The tables and views of the default schema, sorted.
fn table_names(ctx: &SessionContext) -> Vec<String> {
    let state = ctx.state();
    let defaults = &state.config().options().catalog;
    let mut names: Vec<String> = ctx
        .catalog(&defaults.default_catalog)
        .and_then(|catalog| catalog.schema(&defaults.default_schema))
        .map(|schema| schema.table_names())
        .unwrap_or_default();
    names.sort();
    names
}

/// Prints a table's columns with their types and whether they may be NULL.
async fn describe(ctx: &SessionContext, table: &str) -> Result<()> {
    let frame = ctx
        .table(table)
        .await
        .context(|| format!("no table {table}; \\d lists the tables"))?;
    let schema = frame.schema();
    let width = schema
        .fields()
        .iter()
        .map(|f| f.name().len())
        .max()
        .unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for field in schema.fields() {
        let null = if field.is_nullable() { "" } else { " NOT NULL" };
        writeln!(out, "{:width$}  {}{null}", field.name(), field.data_type())
            .map_err(|e| Error::io("<standard output>", e))?;
    }
    Ok(())
}

fn history_file() -> Option<PathBuf> {
    if let Some(file) = std::env::var_os("NEARDUP_HISTORY") {
        return Some(PathBuf::from(file));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".neardup_history"))
}

fn save_history(editor: &mut Editor<StatementEnd, DefaultHistory>, file: Option<&Path>) {
    if let Some(file) = file
        && let Err(e) = editor.save_history(file)
    {
        crate::to_stderr!(
            "neardup: warning: cannot save the shell's history to {}: {e}",
            file.display()
        );
    }
}

/// The editor's check of an entry: a statement goes on to the next line until it ends with
/// `;`; a backslash command is one line.
struct StatementEnd;

impl Validator for StatementEnd {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        let input = ctx.input().trim_start();
        if input.is_empty() || input.starts_with('\\') || ends_statement(input) {
            Ok(ValidationResult::Valid(None))
        } else {
            Ok(ValidationResult::Incomplete)
        }
    }
}

impl rustyline::completion::Completer for StatementEnd {
    type Candidate = String;
}
impl rustyline::hint::Hinter for StatementEnd {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for StatementEnd {}
impl rustyline::Helper for StatementEnd {}

/// Whether `sql` ends with a `;` that is outside quotes and comments (only comments and spaces
/// may follow it).
fn ends_statement(sql: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        Quote(char),
        LineComment,
        BlockComment,
    }
    let mut state = In::Code;
    let mut ended = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match state {
            In::Code => match c {
                '\'' | '"' | '`' => {
                    state = In::Quote(c);
                    ended = false;
                }
                '-' if chars.peek() == Some(&'-') => state = In::LineComment,
                '/' if chars.peek() == Some(&'*') => {
                    chars.next();
                    state = In::BlockComment;
                }
                ';' => ended = true,
                c if c.is_whitespace() => {}
                _ => ended = false,
            },
            // A doubled quote inside a quoted text is the quote itself: it leaves and re-enters.
            In::Quote(quote) if c == quote => state = In::Code,
            In::Quote(_) => {}
            In::LineComment if c == '\n' => state = In::Code,
            In::LineComment => {}
            In::BlockComment if c == '*' && chars.peek() == Some(&'/') => {
                chars.next();
                state = In::Code;
            }
            In::BlockComment => {}
        }
    }
    ended && matches!(state, In::Code | In::LineComment)
}

#[cfg(test)]
mod tests {
    use super::ends_statement;

    #[test]
    fn a_statement_ends_at_a_semicolon_outside_quotes_and_comments() {
        assert!(ends_statement("SELECT 1;"));
        assert!(ends_statement("SELECT 1;  \n"));
        assert!(ends_statement("SELECT 1; -- the count"));
        assert!(ends_statement("SELECT 1; /* done */"));
        assert!(ends_statement("SELECT 'a;b';"));
        assert!(ends_statement("SELECT 'it''s';"));
        assert!(ends_statement("SELECT 1; SELECT 2;"));
        assert!(!ends_statement("SELECT 1"));
        assert!(!ends_statement("SELECT 1; SELECT 2"));
        assert!(!ends_statement("SELECT 'a;"));
        assert!(!ends_statement("SELECT \"a;\" FROM t"));
        assert!(!ends_statement("SELECT 1 -- stop here;"));
        assert!(!ends_statement("SELECT 1 /* ; */"));
        assert!(!ends_statement("SELECT 1; /* still open"));
        assert!(!ends_statement(""));
    }
}
