//! `neardup plan`: every band plan exact for k, estimated, the planner's choice first.

use datafusion::arrow::datatypes::DataType;

use crate::engine::session::session_context;
use crate::engine::sql::{count_rows, quote_ident, run_statements};
use crate::error::{Error, Result};
use crate::fingerprint::Width;
use crate::input;
use crate::job::config::check_k;
use crate::job::matching::passes;
use crate::job::plan_sample::sample_fingerprints;
use crate::job::source::register_corpus;

/// What `neardup plan` is asked to compare.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    pub docs: Option<u64>,
    pub k: u32,
    pub bits: u32,
    pub signatures: Vec<String>,
    pub simhash_column: String,
}

/// `neardup plan`: every plan exact for k, estimated, the planner's choice first.
pub async fn compare_plans(options: &PlanOptions) -> Result<String> {
    let bits = options.bits;
    let width = Width::from_bits(bits)
        .ok_or_else(|| Error::Usage(format!("--bits {bits}: fingerprints have 64 or 128 bits")))?;
    check_k(options.k, width)?;
    let (mut n, mut sample, mut source) = (1_000_000, Vec::new(), "assumed".to_string());
    if !options.signatures.is_empty() {
        if width != Width::Bits64 {
            return Err(Error::Usage(
                "--signatures samples 64-bit (UInt64) fingerprints only; plan 128-bit ones by \
                 their number instead: neardup plan --bits 128 --docs N --k K"
                    .into(),
            ));
        }
        let corpus = input::inspect(
            input::resolve_inputs(&options.signatures, None, "signatures")
                .await?
                .files,
        )
        .await?;
        if let Ok(DataType::FixedSizeBinary(16)) =
            corpus.column_type(&options.simhash_column, "simhash")
        {
            return Err(Error::Usage(format!(
                "--signatures {}: column '{}' holds 128-bit fingerprints, which plan does not \
                 sample; plan them by their number instead: neardup plan --bits 128 --docs N \
                 --k K",
                options.signatures.join(" "),
                options.simhash_column
            )));
        }
        corpus.check_simhash_column(&options.simhash_column)?;
        let ctx = session_context()?;
        register_corpus(&ctx, &corpus, false, None).await?;
        let column = quote_ident(&options.simhash_column);
        // Not a stage of the job: the fingerprints straight from the file, to count and sample.
        run_statements(
            &ctx,
            &format!(
                "CREATE VIEW fingerprints AS SELECT DISTINCT {column} AS simhash FROM corpus \
                 WHERE {column} IS NOT NULL"
            ),
            "distinct fingerprints",
        )
        .await?;
        n = count_rows(&ctx, "fingerprints").await?;
        sample = sample_fingerprints(&ctx, Width::Bits64).await?;
        source = format!(
            "in {} file(s), {} sampled",
            corpus.files.len(),
            sample.len()
        );
    }
    if let Some(docs) = options.docs {
        n = docs;
        source = if sample.is_empty() {
            "given".into()
        } else {
            format!("given; {} sampled from --signatures", sample.len())
        };
    }
    let estimates =
        crate::planner::estimate(crate::planner::plans_for(options.k, bits), n, &sample);
    let mut out = format!(
        "k = {}, {n} distinct {bits}-bit fingerprints ({source})\n",
        options.k
    );
    out.push_str(&crate::planner::table(&estimates));
    if let Some(best) = estimates.first() {
        let (tables_per_pass, passes) = passes(n, best.plan.tables());
        out.push_str(&format!(
            "{} runs in {passes} pass(es) of at most {tables_per_pass} tables. Force a plan with \
             --plan {}.\n",
            best.plan, best.plan
        ));
    }
    Ok(out)
}
