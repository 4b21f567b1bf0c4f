//! The command line: `args` defines what the user can type, `values` parses flag values,
//! `report` prints what a job did; `execute` runs one command.

pub mod args;
mod report;
pub mod values;

pub use args::{Cli, Command};

use crate::commands::{
    eval, explain, generate, generate_fingerprints, plan, query, report as html_report,
};
use crate::engine::ballista;
use crate::error::Result;
use crate::job::summary::Summary;
use crate::job::{self, JobRequest};
use report::report;

/// Runs one command; the caller turns an error into a message and an exit code.
pub async fn execute(cli: Cli) -> Result<()> {
    let logged = match &cli.command {
        Command::Run(args) => crate::logging::job_default(args.console.verbose),
        Command::Match(args) => crate::logging::job_default(args.console.verbose),
        Command::Scheduler(_) | Command::Executor(_) => crate::logging::SERVER_DEFAULT,
        _ => crate::logging::job_default(false),
    };
    crate::logging::init(logged);
    match cli.command {
        Command::Run(args) => {
            let quiet = args.console.quiet;
            run_job(args.request(), quiet).await?
        }
        Command::Match(args) => {
            let quiet = args.console.quiet;
            run_job(args.request(), quiet).await?
        }
        Command::Eval(args) => crate::terminal::print_answer(&eval::eval(&args.options()).await?)?,
        Command::Explain(args) => {
            crate::terminal::print_answer(&explain::explain(&args.options()?).await?)?
        }
        Command::Report(args) => {
            crate::terminal::print_answer(&html_report::report(&args.options()).await?)?
        }
        Command::Generate(args) => {
            let options = args.options();
            let (sources, documents) = generate::generate_corpus(&options).await?;
            crate::to_stdout!(
                "{documents} documents from {sources} sources in {}; truth in {}",
                options.output.display(),
                options.truth.display()
            );
        }
        Command::GenerateFingerprints(args) => {
            let options = args.options();
            let planted = generate_fingerprints::write_fingerprints(&options)?;
            crate::to_stdout!(
                "{} fingerprints ({planted} planted neighbours) in {}",
                options.count,
                options.output.display()
            );
        }
        Command::Plan(args) => {
            crate::terminal::print_answer(&plan::compare_plans(&args.options()).await?)?
        }
        Command::Scheduler(args) => {
            let access = args.access.access()?;
            ballista::run_scheduler(
                &args.bind,
                args.executor_timeout,
                &access,
                args.access.insecure,
            )
            .await?
        }
        Command::Executor(args) => ballista::run_executor(&args.options()?).await?,
        Command::Query(args) => query::query(&args.options()?).await?,
    }
    Ok(())
}

/// `run` and `match`: the job, then what it did (unless `--quiet`).
async fn run_job(request: JobRequest, quiet: bool) -> Result<()> {
    let (summary, config) = resolve_and_run(request).await?;
    if !quiet {
        report(&summary, &config.output);
    }
    Ok(())
}

async fn resolve_and_run(mut request: JobRequest) -> Result<(Summary, job::JobConfig)> {
    if let Some(index) = &mut request.index {
        index.recorded = crate::index::IndexMeta::of_existing(&index.place()?).await?;
    }
    let config = request.resolve()?;
    let summary = job::run(&config).await?;
    Ok((summary, config))
}

/// Runs a parsed `run` or `match` and returns its summary without printing the report: the
/// job for callers other than the terminal (the Python bindings). Other commands are refused.
pub async fn job_summary(cli: Cli) -> Result<Summary> {
    let (request, verbose) = match cli.command {
        Command::Run(args) => {
            let verbose = args.console.verbose;
            (args.request(), verbose)
        }
        Command::Match(args) => {
            let verbose = args.console.verbose;
            (args.request(), verbose)
        }
        _ => {
            return Err(crate::Error::Usage(
                "only `run` and `match` return a summary".into(),
            ));
        }
    };
    crate::logging::init(crate::logging::job_default(verbose));
    Ok(resolve_and_run(request).await?.0)
}
