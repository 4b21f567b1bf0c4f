//! What a job reads: the corpus checked for the columns the job needs and registered as
//! tables, its ids checked (stage 0), the places it writes checked against the places it reads,
//! and a failure traced to the file that caused it.

use std::collections::BTreeMap;
use std::path::Path;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::cast::as_int64_array;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use futures::StreamExt;

use crate::engine::session::Console;
use crate::engine::sql::{Bindings, query_stage, quote_ident, quote_literal, run_statements};
use crate::engine::stages;
use crate::engine::staging::{OUTPUT_TABLES, refuse_overlap};
use crate::error::{Error, QueryContext, Result};
use crate::index::batch::IndexedBatch;
use crate::input::format::Format;
use crate::input::{self, Corpus};
use crate::job::config::{JobConfig, Source};
use crate::job::ids;
use crate::job::params::SourceParams;
use crate::storage::Place;
use crate::text::Featurizer;

/// What the checks of the corpus found out, for the stages and the summary.
pub struct Checked {
    pub params: SourceParams,
    /// The id column's type, which an index's batches must share.
    pub id_type: DataType,
    /// The files the features read, with their digests (`crate::digest`).
    pub feature_files: BTreeMap<String, String>,
}

/// The column `corpus_ordered` numbers the input's rows in (`register_corpus`).
const INPUT_ORDER_COLUMN: &str = "__neardup_input_order";

/// Checks the corpus has the columns the job reads, of types it can read, before any work.
pub fn check_columns(config: &JobConfig, corpus: &Corpus) -> Result<Checked> {
    if corpus.schema.field_with_name(INPUT_ORDER_COLUMN).is_ok() {
        // Beside the one the job adds, every query naming it would be ambiguous.
        return Err(Error::Input(format!(
            "the input has a column named '{INPUT_ORDER_COLUMN}', a name neardup keeps for the \
             order of the input's rows; rename it (in SQL with neardup query)"
        )));
    }
    corpus.check_id_column(&config.id_column)?;
    let (params, feature_files) = match &config.source {
        Source::Texts {
            text_column,
            features,
            partition_by,
        } => {
            corpus.check_text_column(text_column)?;
            if config.delta.is_some() {
                // The dedup table holds the input's columns.
                crate::delta::types::refuse_names_alike_but_case(&corpus.schema)?;
            }
            let partition_clause = partition_clause(corpus, partition_by)?;
            let canonical = features.to_string();
            Featurizer::cached(&canonical).map_err(|e| Error::Usage(format!("--features: {e}")))?;
            let params = SourceParams::Texts {
                column: text_column.clone(),
                features: canonical,
                min_features: features.min_features,
                partition_clause,
                dedup_columns: dedup_columns(corpus, partition_by),
            };
            (params, Some(features))
        }
        Source::Fingerprints { simhash_column } => {
            corpus.check_simhash_column(simhash_column)?;
            let column = simhash_column.clone();
            (SourceParams::Fingerprints { column }, None)
        }
    };
    let has_texts = matches!(config.source, Source::Texts { .. });
    config.keep.check(corpus, has_texts)?;
    let id_type = corpus.column_type(&config.id_column, "id")?;
    let feature_files = match feature_files {
        Some(features) => crate::digest::feature_files(features)?,
        None => BTreeMap::new(),
    };
    Ok(Checked {
        params,
        id_type,
        feature_files,
    })
}

/// Refuses an output that would replace or swallow what the job reads: an input file or an index
/// inside the output folder, or an output inside an input folder or the index.
pub fn check_places(config: &JobConfig, corpus: &Corpus) -> Result<()> {
    let Place::Local(output) = &config.output else {
        return refuse_remote_overlap(config, corpus);
    };
    for file in &corpus.files {
        if let Place::Local(file) = file {
            refuse_overlap(output, "--input", file)?;
        }
    }
    for given in &config.inputs {
        if let Place::Local(path) = Place::parse(given, "--input")? {
            refuse_overlap(output, "--input", &path)?;
            if pattern_reaches(&path, output) {
                return Err(Error::Usage(format!(
                    "--output {} is where --input {} finds files: a later run over the pattern \
                     would read neardup's tables as documents; choose an output the pattern does \
                     not reach",
                    output.display(),
                    crate::error::echo(given)
                )));
            }
        }
    }
    if let Some(index) = &config.index
        && let Place::Local(dir) = index.place()?
    {
        refuse_overlap(output, "--index", &dir)?;
    }
    Ok(())
}

/// The columns the deduplicated corpus is written with: the corpus's own, each partition
/// column named by the folder it goes to (`hive_partition_value`, src/udf/hive_partition.rs):
/// a NULL as `__HIVE_DEFAULT_PARTITION__` (the Hive convention, which pyarrow, Spark and
/// neardup's own inputs read back as NULL), where DataFusion's writer would put it in the folder
/// of '' (strings) or of 0 (numbers, dates) and the value would be lost; every other value as
/// the writer spells it, so that its folders keep their names from run to run. A column of a
/// type the writer cannot partition by is left to the writer's own error.
fn dedup_columns(corpus: &Corpus, partition_by: &[String]) -> String {
    let replaced: Vec<String> = partition_by
        .iter()
        .filter(|column| {
            corpus
                .schema
                .field_with_name(column)
                .is_ok_and(|f| crate::udf::is_partition_type(f.data_type()))
        })
        .map(|column| {
            let column = quote_ident(column);
            format!("hive_partition_value(c.{column}) AS {column}")
        })
        .collect();
    if replaced.is_empty() {
        return "c.*".into();
    }
    format!("c.* REPLACE ({})", replaced.join(", "))
}

/// Whether a later run over the glob `pattern` would read an output at `output`: whether the
/// pattern matches a file of one of its tables (`<output>/dedup/part-0.parquet`, and up to three
/// partition folders deeper), matched part by part as the input search does (a `*` stays inside
/// one folder; `**` spans any number).
fn pattern_reaches(pattern: &Path, output: &Path) -> bool {
    let text = pattern.to_string_lossy();
    if !text.contains(['*', '?', '[']) {
        return false;
    }
    let (Ok(pattern), Ok(output)) = (std::path::absolute(pattern), std::path::absolute(output))
    else {
        return false;
    };
    let Ok(glob) = glob::Pattern::new(&pattern.to_string_lossy()) else {
        return false;
    };
    let options = glob::MatchOptions {
        require_literal_separator: true,
        ..glob::MatchOptions::new()
    };
    OUTPUT_TABLES.iter().any(|table| {
        let mut folder = output.join(table);
        (0..=3).any(|_| {
            let reached = glob.matches_path_with(&folder.join("part-0.parquet"), options);
            folder.push("key=value");
            reached
        })
    })
}

/// On a store, the same rule by URL: no input under the output prefix, and no output under an
/// input prefix.
fn refuse_remote_overlap(config: &JobConfig, corpus: &Corpus) -> Result<()> {
    let output = config.output.folder();
    let inputs = corpus.files.iter().map(Place::to_string);
    let given = config
        .inputs
        .iter()
        .map(|i| i.trim_end_matches('/').to_string());
    for input in inputs.chain(given) {
        if input.contains(['*', '?', '[']) {
            continue;
        }
        if format!("{input}/").starts_with(&output) {
            return Err(Error::Usage(format!(
                "--input {input} is inside --output {}: writing the output would replace it; \
                 choose an output elsewhere",
                config.output
            )));
        }
        if output.starts_with(&format!("{input}/")) {
            return Err(Error::Usage(format!(
                "--output {} is inside --input {input}: a later run over that prefix would read \
                 neardup's tables as documents; choose an output elsewhere",
                config.output
            )));
        }
    }
    if let Some(index) = &config.index {
        let index = index.place()?.folder();
        if index.starts_with(&output) || output.starts_with(&index) {
            return Err(Error::Usage(format!(
                "--output {} and --index {} overlap: writing one would replace the other; keep \
                 them apart",
                config.output,
                index.trim_end_matches('/')
            )));
        }
    }
    Ok(())
}

/// `PARTITIONED BY (...)` for `--partition-by`, after checking each column exists.
fn partition_clause(corpus: &Corpus, columns: &[String]) -> Result<String> {
    if columns.is_empty() {
        return Ok(String::new());
    }
    // Before any work: DataFusion would refuse these only when dedup is written, at the end.
    let given = crate::error::echo(&columns.join(","));
    if let Some(twice) = columns
        .iter()
        .enumerate()
        .find_map(|(i, c)| columns[..i].contains(c).then_some(c))
    {
        return Err(Error::Usage(format!(
            "--partition-by {given}: column '{}' is named twice; name each column once",
            crate::error::echo(twice)
        )));
    }
    for column in columns {
        if corpus.schema.field_with_name(column).is_err() {
            return Err(Error::Input(format!(
                "--partition-by {given}: {} has no column '{}'; the columns are: {}",
                corpus.files[0],
                crate::error::echo(column),
                corpus.column_names()
            )));
        }
        // DataFusion takes the names in PARTITIONED BY as written, quotes included; and it
        // writes a name of other letters percent-encoded into the folder names (`%E6%97%A5=zh`),
        // which readers of Hive folders, DataFusion's and delta-rs's included, do not decode:
        // the dedup table read as empty, and a Delta table got no files.
        if !column
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(Error::Usage(format!(
                "--partition-by {}: partition columns are written as folder names; use a \
                 column whose name has only ASCII letters, digits and '_' (rename it first \
                 with neardup query)",
                crate::error::echo(column)
            )));
        }
    }
    // The columns are distinct and exist, so as many as the schema has are all of them.
    if columns.len() >= corpus.schema.fields().len() {
        return Err(Error::Usage(format!(
            "--partition-by {given}: these are all the input's columns, so the dedup files \
             would hold no column at all (partition values live only in folder names); leave \
             at least one column out"
        )));
    }
    Ok(format!("PARTITIONED BY ({})", columns.join(", ")))
}

/// Whether `corpus_ordered` numbers rows by their place in the file as the Parquet reader
/// reports it (`file_row_index()`), so that a file's scan may be split across cores and the
/// numbers stay those of the file. Only in this process: a cluster's plans cross the wire
/// through datafusion-proto, which does not carry that function's rewrite into the scan, and
/// JSON Lines and CSV scans have no row index, so those are numbered by one scan in file order.
pub fn rows_numbered_by_file(corpus: &Corpus, on_cluster: bool) -> bool {
    !on_cluster && corpus.all_parquet()
}

/// Registers `corpus` (all files, scanned in parallel) and `corpus_ordered` (the same rows with
/// `__neardup_input_order` = file index * 2^32 + row index; a name no input column has, such as
/// the `input_order` of a run's own signatures: `check_columns` refuses one). Hive partition folders
/// of the files are columns of both, after the files' own. Where the reader numbers the rows,
/// the session's scans may split files from here on. `text_column`: the column `corpus_ordered`
/// reads as string views from Parquet files (`text_as_views`); `corpus` keeps every type.
pub async fn register_corpus(
    ctx: &SessionContext,
    corpus: &Corpus,
    on_cluster: bool,
    text_column: Option<&str>,
) -> Result<()> {
    let by_file_index = rows_numbered_by_file(corpus, on_cluster);
    let paths: Vec<String> = corpus.files.iter().map(Place::to_string).collect();
    let options = || ParquetReadOptions::default().file_extension("");
    let mut plain = Vec::with_capacity(paths.len());
    let mut ordered = Vec::with_capacity(paths.len());
    for (index, (path, format)) in paths.iter().zip(&corpus.formats).enumerate() {
        let table = format!("corpus_file_{index}");
        let frame = format
            .read(ctx, path)
            .await
            .context(|| format!("reading {path}"))?;
        let ordered_table = match text_column {
            Some(text) if format.format == Format::Parquet => {
                text_as_views(ctx, path, frame.schema().as_arrow(), text, index).await?
            }
            _ => None,
        };
        ctx.register_table(&table, frame.into_view())
            .context(|| format!("registering {path}"))?;
        let ordered_table = ordered_table.unwrap_or_else(|| table.clone());
        let mut columns = String::from("*");
        let values = corpus.partition_values.get(index).into_iter().flatten();
        for (name, value) in corpus.partition_columns.iter().zip(values) {
            let value = value
                .as_deref()
                .map_or("CAST(NULL AS VARCHAR)".to_string(), quote_literal);
            columns.push_str(&format!(", {value} AS {}", quote_ident(name)));
        }
        plain.push(format!("SELECT {columns} FROM {table}"));
        let row = if by_file_index {
            "CAST(file_row_index() AS BIGINT)"
        } else {
            "CAST(row_number() OVER () AS BIGINT) - 1"
        };
        ordered.push(format!(
            "SELECT {columns}, {index} * 4294967296 + {row} AS {INPUT_ORDER_COLUMN} \
             FROM {ordered_table}"
        ));
    }
    if corpus.partition_columns.is_empty() && corpus.all_parquet() {
        // One scan over every file, which DataFusion spreads over the cores.
        let all = ctx
            .read_parquet(paths.clone(), options())
            .await
            .context(|| "reading the input files".into())?;
        ctx.register_table("corpus", all.into_view())
            .context(|| "registering the corpus".into())?;
    } else {
        let view = format!("CREATE VIEW corpus AS {}", plain.join(" UNION ALL "));
        run_statements(ctx, &view, "partition columns").await?;
    }
    let view = format!(
        "CREATE VIEW corpus_ordered AS {}",
        ordered.join(" UNION ALL ")
    );
    run_statements(ctx, &view, "input order").await?;
    if by_file_index {
        // The reader numbers the rows, so a file's scan can be split over the cores without
        // moving a row's input order; one scan per file left the id check, the fingerprints
        // and the paired documents of `match` over one file on one core.
        let state = ctx.state_ref();
        let mut state = state.write();
        let options = state.config_mut().options_mut();
        options.optimizer.repartition_file_scans = true;
    }
    Ok(())
}

/// The Parquet file at `path` (columns `schema`) registered again with its `text` column read
/// as string views, which point into the decoded pages instead of copying each text out of
/// them: the signature stage on 200,000 Chinese pages at two threads took a median 0.896 s
/// against 0.992 s (five alternating rounds, docs/BENCHMARKS.md). The table's name, or `None`
/// where the column is not a string.
async fn text_as_views(
    ctx: &SessionContext,
    path: &str,
    schema: &Schema,
    text: &str,
    index: usize,
) -> Result<Option<String>> {
    let Some((at, field)) = schema.column_with_name(text) else {
        return Ok(None);
    };
    if !matches!(field.data_type(), DataType::Utf8 | DataType::LargeUtf8) {
        return Ok(None);
    }
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[at] = field.clone().with_data_type(DataType::Utf8View);
    let viewed = Schema::new_with_metadata(fields, schema.metadata().clone());
    let options = ParquetReadOptions::default()
        .file_extension("")
        .schema(&viewed);
    let frame = ctx
        .read_parquet(path, options)
        .await
        .context(|| format!("reading {path}"))?;
    let table = format!("corpus_text_file_{index}");
    ctx.register_table(&table, frame.into_view())
        .context(|| format!("registering {path}"))?;
    Ok(Some(table))
}

/// Into how many partitions the signature stage splits the reading of the files, if it splits
/// them: when rows are numbered by the reader and there are row groups enough. Four times as
/// many partitions as `threads` where there are as many row groups as partitions (DataFusion
/// deals them out by byte ranges, so one partition may get two and another none), so that a
/// thread whose share was quick to fingerprint (Simplified pages, say, against Traditional
/// ones that need converting) takes another partition instead of waiting for the slowest, and
/// the last partition, which one thread finishes alone, is small: a million generated
/// documents in 59 row groups took 9.8 s at two threads in 8 partitions against 10.2 s in 4,
/// and 200,000 Chinese pages in 8 row groups 1.12 s in 8 partitions against 1.19 s in 4
/// (docs/BENCHMARKS.md). With fewer, as many partitions as threads where each gets two row
/// groups. `None`: the cores take the batches of each file's scan on demand
/// (`crate::engine::on_demand`), a local Parquet file cut into one row range per core; a split
/// by row groups would leave every partition but one idle on a file of one row group.
pub fn split_scans(corpus: &Corpus, on_cluster: bool, threads: usize) -> Option<usize> {
    if !rows_numbered_by_file(corpus, on_cluster) {
        return None;
    }
    let row_groups = corpus.row_groups;
    let threads_u64 = threads as u64;
    if row_groups >= 4 * threads_u64 {
        Some(4 * threads)
    } else if row_groups >= 2 * threads_u64 {
        Some(threads)
    } else {
        None
    }
}

/// Stage 0: ids must be present and unique (pairs, groups and dedup refer to documents by id),
/// and not in the index the batch is matched against, if any. In this process one scan of
/// hashes clears the common case (`crate::job::ids`); the queries that name the bad ids run
/// where it cannot, and always on a cluster.
pub async fn check_ids(
    ctx: &SessionContext,
    corpus: &Corpus,
    bindings: &Bindings,
    batch: Option<&IndexedBatch>,
    id_column: &str,
    on_cluster: bool,
) -> Result<()> {
    // JSON Lines files are read once more for their whole-number columns, on a core of their
    // own while the ids are scanned (a JSON file's scan is one core's). Not for a cluster: this
    // process would read the whole corpus from its store.
    let numbers = tokio::spawn({
        let (ctx, corpus) = (ctx.clone(), corpus.clone());
        async move {
            match on_cluster {
                true => Ok(()),
                false => input::refuse_silent_changes(&ctx, &corpus).await,
            }
        }
    });
    let look = match on_cluster {
        true => None,
        false => Some(ids::look(ctx, bindings).await),
    };
    // First: a value cut to fit may be what made two ids equal.
    numbers
        .await
        .map_err(|e| Error::Internal(format!("checking whole numbers: {e}")))??;
    let clean = look.transpose()? == Some(ids::Look::Clean);
    if !clean {
        name_bad_ids(ctx, corpus, bindings, id_column).await?;
    }
    match batch {
        Some(batch) => batch.check_new_ids(ctx, bindings).await,
        None => Ok(()),
    }
}

/// The error for the first NULL ids or the most repeated ids, if there are any.
async fn name_bad_ids(
    ctx: &SessionContext,
    corpus: &Corpus,
    bindings: &Bindings,
    id_column: &str,
) -> Result<()> {
    let missing = query_stage(ctx, &stages::IDS_MISSING, bindings).await?;
    let mut places = Vec::new();
    for batch in &missing {
        let orders = as_int64_array(batch.column(0)).context(|| "NULL ids".into())?;
        places.extend(orders.iter().flatten().map(|o| corpus.locate(o)));
    }
    if !places.is_empty() {
        return Err(Error::Input(format!(
            "id column '{id_column}' is NULL at {}; every document needs an id",
            places.join(", ")
        )));
    }
    let repeated = query_stage(ctx, &stages::IDS_REPEATED, bindings).await?;
    let mut shown = Vec::new();
    for batch in &repeated {
        let what = || "duplicate ids".to_string();
        let ids = batch.column(0).as_string_opt::<i32>();
        let copies = as_int64_array(batch.column(1)).context(what)?;
        let first = as_int64_array(batch.column(2)).context(what)?;
        let last = as_int64_array(batch.column(3)).context(what)?;
        for row in 0..batch.num_rows() {
            let id = ids.map_or("?", |ids| ids.value(row));
            shown.push(format!(
                "  '{}': {} documents, the first at {}, the last at {}",
                crate::error::echo(id),
                copies.value(row),
                corpus.locate(first.value(row)),
                corpus.locate(last.value(row))
            ));
        }
    }
    if !shown.is_empty() {
        return Err(Error::Input(format!(
            "id column '{id_column}' has duplicate values; ids must be unique. The most \
             repeated:\n{}",
            shown.join("\n")
        )));
    }
    Ok(())
}

/// Reads every input file completely, the way the stages read it, and returns the first that
/// fails with its error. Runs only after a failure, so its cost is paid only then.
async fn find_unreadable_input(ctx: &SessionContext, corpus: &Corpus) -> Option<(String, String)> {
    for (file, format) in corpus.files.iter().zip(&corpus.formats) {
        let location = file.to_string();
        let read = async {
            let frame = format.read(ctx, &location).await?;
            let mut stream = frame.execute_stream().await?;
            while let Some(batch) = stream.next().await {
                batch?;
            }
            Ok::<(), datafusion::error::DataFusionError>(())
        };
        match crate::engine::caught_panics::catch_async(read).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let message = e.to_string();
                let at = input::place_in_file(ctx, &location, *format, &message).await;
                return Some((location, format!("{message}{at}")));
            }
            Err(stopped) => {
                return Some((
                    location,
                    crate::engine::caught_panics::damaged_file(&stopped),
                ));
            }
        }
    }
    None
}

/// A stage failed inside DataFusion: if an input file or a file of the index the job matches
/// against is corrupt, say which one (DataFusion's message does not say which file of many it
/// was reading).
pub async fn name_corrupt_input(
    ctx: &SessionContext,
    error: Error,
    corpus: &Corpus,
    batch: Option<&IndexedBatch>,
    console: &Console,
) -> Error {
    // On a cluster the failure is as likely the cluster's, and reading every file again there
    // would stream the corpus through this process: report the error as it came.
    // A reader that stops on a damaged page panics inside DataFusion's task, which comes back
    // as an internal error.
    let reading_failed = match &error {
        Error::Query { .. } => true,
        Error::Internal(message) => message.contains("panicked"),
        _ => false,
    };
    if !reading_failed || console.cluster.is_some() {
        return error;
    }
    if let Some((file, message)) = find_unreadable_input(ctx, corpus).await {
        return Error::Input(format!("{file} cannot be read: {message}"));
    }
    let error = match batch {
        Some(batch) => batch.index.name_unreadable_file(ctx).await.unwrap_or(error),
        None => error,
    };
    match (error, crate::engine::caught_panics::take_last_place()) {
        (Error::Internal(message), Some(place)) if message.contains("panicked") => {
            Error::Internal(format!("{message} (at {place})"))
        }
        (error, _) => error,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{Field, Schema};

    use super::*;

    #[test]
    fn a_pattern_reaches_an_output_only_where_it_matches_its_tables_files() {
        let reaches =
            |pattern: &str, output: &str| pattern_reaches(Path::new(pattern), Path::new(output));
        // `**` reaches outputs anywhere below its folder, a partitioned dedup included.
        assert!(reaches("/p/corpus/**/*.parquet", "/p/corpus/sub/out"));
        assert!(reaches("/p/corpus/**/*.parquet", "/p/corpus/out"));
        assert!(!reaches("/p/corpus/**/*.parquet", "/p/other/out"));
        // One level per `*`: `*.parquet` beside the output, or `day-*/` folders, never reach
        // its tables' files.
        assert!(!reaches("/p/*.parquet", "/p/out"));
        assert!(!reaches("/data/day-*/*.parquet", "/data/out"));
        assert!(!reaches("/data/*/*.parquet", "/data/out"));
        assert!(reaches("/data/*/*/*.parquet", "/data/out"));
        assert!(reaches("/data/out/dedup/*/*.parquet", "/data/out"));
        // A path without wildcards is no pattern; relative ones are taken from here.
        assert!(!reaches("/p/corpus/run.parquet", "/p/corpus"));
        assert!(reaches("corpus/**/*.parquet", "corpus/sub/out"));
    }

    fn corpus(columns: &[&str]) -> Corpus {
        let fields: Vec<Field> = columns
            .iter()
            .map(|name| Field::new(*name, DataType::Utf8, true))
            .collect();
        Corpus {
            files: vec![Place::Local(PathBuf::from("/data/in.parquet"))],
            formats: vec![Default::default()],
            schema: Arc::new(Schema::new(fields)),
            rows: 0,
            row_groups: 1,
            partition_columns: Vec::new(),
            partition_values: Vec::new(),
            delta_tables: Vec::new(),
        }
    }

    /// Every partition column of a type the writer partitions by is named by its folder, NULL
    /// included; others are left to the writer.
    #[test]
    fn dedup_names_every_partition_column_by_its_folder() {
        let mut typed = corpus(&["id", "text"]);
        let fields: Vec<Field> = [
            ("id", DataType::Int64),
            ("text", DataType::Utf8),
            ("Lang", DataType::Utf8),
            ("day", DataType::Date32),
            ("n", DataType::UInt16),
            ("f", DataType::Float64),
            ("d64", DataType::Date64),
            ("money", DataType::Decimal128(5, 2)),
        ]
        .into_iter()
        .map(|(name, kind)| Field::new(name, kind, true))
        .collect();
        typed.schema = Arc::new(Schema::new(fields));
        let names = |list: &[&str]| list.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        assert_eq!(dedup_columns(&typed, &[]), "c.*");
        assert_eq!(dedup_columns(&typed, &names(&["money"])), "c.*");
        let columns = dedup_columns(&typed, &names(&["Lang", "f", "day", "n", "d64", "money"]));
        assert!(columns.starts_with("c.* REPLACE ("), "{columns}");
        for column in ["\"Lang\"", "\"f\"", "\"day\"", "\"n\"", "\"d64\""] {
            assert!(
                columns.contains(&format!("hive_partition_value(c.{column}) AS {column}")),
                "{columns}"
            );
        }
        assert!(!columns.contains("money"), "{columns}");
    }

    #[test]
    fn partition_columns_are_checked_before_any_work() {
        let lettered = corpus(&["id", "text", "日期", "spr\u{e5}k"]);
        let corpus = corpus(&["id", "text", "dt"]);
        let names = |list: &[&str]| list.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let clause = partition_clause(&corpus, &names(&["dt"])).unwrap();
        assert_eq!(clause, "PARTITIONED BY (dt)");
        assert_eq!(partition_clause(&corpus, &[]).unwrap(), "");
        let err = partition_clause(&corpus, &names(&["nosuch"])).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        let message = err.to_string();
        assert!(
            message.contains("no column 'nosuch'") && message.contains("id, text, dt"),
            "{message}"
        );
        assert!(!message.contains("-column"), "{message}");
        let err = partition_clause(&corpus, &names(&["dt", "dt"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("'dt' is named twice"), "{err}");
        let err = partition_clause(&corpus, &names(&["id", "text", "dt"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("all the input's columns"), "{err}");
        // Names of other letters were written percent-encoded, and read back as no rows.
        for name in ["日期", "spr\u{e5}k"] {
            let err = partition_clause(&lettered, &names(&[name])).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains("only ASCII letters"), "{err}");
        }
    }

    #[test]
    fn scans_split_into_four_partitions_a_thread_where_each_gets_a_row_group() {
        let split = |row_groups: u64, on_cluster: bool, threads: usize| {
            let corpus = Corpus {
                row_groups,
                ..corpus(&["id", "text"])
            };
            split_scans(&corpus, on_cluster, threads)
        };
        // Two threads: 8 partitions from 8 row groups, 2 from 4 (two each), none below.
        assert_eq!(split(59, false, 2), Some(8));
        assert_eq!(split(8, false, 2), Some(8));
        assert_eq!(split(7, false, 2), Some(2));
        assert_eq!(split(4, false, 2), Some(2));
        assert_eq!(split(3, false, 2), None);
        assert_eq!(split(1, false, 2), None);
        assert_eq!(split(600, false, 32), Some(128));
        assert_eq!(split(128, false, 32), Some(128));
        assert_eq!(split(100, false, 32), Some(32));
        assert_eq!(split(63, false, 32), None);
        // A cluster numbers rows by one scan per file: never split.
        assert_eq!(split(59, true, 2), None);
    }
}
