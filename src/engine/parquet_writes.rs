//! Checks what a statement writes to Parquet (a `COPY ... STORED AS PARQUET`, an `INSERT INTO`
//! a Parquet table) against the writer's settings before anything is written.
//!
//! The Parquet writer accepts any `format.encoding` (or `format.encoding::column`, or the
//! session's `datafusion.execution.parquet.encoding`) and panics when a column cannot be
//! encoded that way (RLE on a string, DELTA_BINARY_PACKED on a double), after it has created the
//! output file; a few sizes of 0 and a Bloom filter probability outside (0, 1) panic the same
//! way, and a write batch of 0 rows never ends. Checked here, each is an error that names the
//! setting (and for an encoding the column, its type and the encodings it takes), and no file
//! is created. The settings are resolved as DataFusion resolves them for the write: the
//! session's, then the COPY's OPTIONS, or the table's from when it was created.

use datafusion::arrow::datatypes::Schema;
use datafusion::common::config::TableParquetOptions;
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::datasource::file_format::parquet::{ParquetFormat, ParquetFormatFactory};
use datafusion::datasource::listing::ListingTable;
use datafusion::datasource::source_as_provider;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{LogicalPlan, WriteOp};
use datafusion::parquet::arrow::ArrowSchemaConverter;
use datafusion::parquet::basic::{Encoding, Type as PhysicalType};

use crate::error::{Error, Result};

/// The option naming every column's encoding.
const ENCODING: &str = "format.encoding";

/// The same for one column: `format.encoding::<column path>`.
const COLUMN_ENCODING: &str = "format.encoding::";

/// What a statement writes to Parquet files, as far as the writer's settings go.
struct ParquetWrite<'a> {
    /// The COPY's destination or the INSERT's table, for the error.
    destination: String,
    schema: &'a Schema,
    options: TableParquetOptions,
    /// Columns that go into folder names instead of the files (Hive partitioning).
    not_in_files: Vec<String>,
    /// An INSERT's table has its options from when it was created; a COPY names its own.
    into_table: bool,
}

/// Fails when `plan` writes Parquet (a COPY, an INSERT into a Parquet table) with settings the
/// writer cannot work with; `what` names the statement in the error. Other plans, and settings
/// DataFusion rejects itself (unknown names, unparsable values), pass.
pub fn check(plan: &LogicalPlan, state: &SessionState, what: &str) -> Result<()> {
    match parquet_write(plan, state) {
        Some(write) => {
            let at = format!("{what}: {}", write.destination);
            check_settings(&write.options, &at)?;
            check_encodings(&write, &at)
        }
        None => Ok(()),
    }
}

fn parquet_write<'a>(plan: &'a LogicalPlan, state: &SessionState) -> Option<ParquetWrite<'a>> {
    let keeps_partition_columns = state.config_options().execution.keep_partition_by_columns;
    match plan {
        LogicalPlan::Copy(copy) => {
            if !copy.file_type.get_ext().eq_ignore_ascii_case("parquet") {
                return None;
            }
            // The factory DataFusion's planner uses for the COPY, on the same options.
            let format = ParquetFormatFactory::new()
                .create(state, &copy.options)
                .ok()?;
            let options = format.downcast_ref::<ParquetFormat>()?.options().clone();
            let keeps_partition_columns = copy
                .options
                .get("execution.keep_partition_by_columns")
                .map_or(keeps_partition_columns, |v| v.eq_ignore_ascii_case("true"));
            Some(ParquetWrite {
                destination: format!("COPY to {}", copy.output_url),
                schema: copy.input.schema().as_arrow(),
                options,
                not_in_files: if keeps_partition_columns {
                    Vec::new()
                } else {
                    copy.partition_by.clone()
                },
                into_table: false,
            })
        }
        LogicalPlan::Dml(dml) if matches!(dml.op, WriteOp::Insert(_)) => {
            let provider = source_as_provider(&dml.target).ok()?;
            let listing = provider.downcast_ref::<ListingTable>()?.options();
            let format = listing.format.downcast_ref::<ParquetFormat>()?;
            Some(ParquetWrite {
                destination: format!("INSERT INTO {}", dml.table_name),
                schema: dml.input.schema().as_arrow(),
                options: format.options().clone(),
                not_in_files: if keeps_partition_columns {
                    Vec::new()
                } else {
                    listing
                        .table_partition_cols
                        .iter()
                        .map(|(name, _)| name.clone())
                        .collect()
                },
                into_table: true,
            })
        }
        _ => None,
    }
}

/// The settings the writer asserts on (a panic) or loops on (a batch of 0 rows).
fn check_settings(options: &TableParquetOptions, at: &str) -> Result<()> {
    let global = &options.global;
    let at_least_one = [
        ("max_row_group_size", Some(global.max_row_group_size)),
        ("write_batch_size", Some(global.write_batch_size)),
        (
            "statistics_truncate_length",
            global.statistics_truncate_length,
        ),
        (
            "column_index_truncate_length",
            global.column_index_truncate_length,
        ),
        (
            "maximum_parallel_row_group_writers",
            Some(global.maximum_parallel_row_group_writers),
        ),
        (
            "maximum_buffered_record_batches_per_stream",
            Some(global.maximum_buffered_record_batches_per_stream),
        ),
    ];
    for (name, value) in at_least_one {
        if value == Some(0) {
            return Err(Error::Usage(format!(
                "{at}: the Parquet writer's {name} is 0 ('format.{name}', or \
                 datafusion.execution.parquet.{name} for the session); it must be at least 1. \
                 Nothing was written"
            )));
        }
    }
    let fpps = std::iter::once((
        "format.bloom_filter_fpp".to_string(),
        global.bloom_filter_fpp,
    ))
    .chain(options.column_specific_options.iter().map(|(column, o)| {
        (
            format!("format.bloom_filter_fpp::{column}"),
            o.bloom_filter_fpp,
        )
    }));
    for (key, fpp) in fpps {
        if let Some(fpp) = fpp
            && !(fpp > 0.0 && fpp < 1.0)
        {
            return Err(Error::Usage(format!(
                "{at}: '{key}' is {fpp}; a Bloom filter's false positive probability is \
                 between 0 and 1, both excluded (e.g. 0.01). Nothing was written"
            )));
        }
    }
    Ok(())
}

fn check_encodings(write: &ParquetWrite, at: &str) -> Result<()> {
    let Ok(parquet_schema) = ArrowSchemaConverter::new().convert(write.schema) else {
        // A type Parquet cannot hold: the writer says so itself, with no panic.
        return Ok(());
    };
    let every_column = write.options.global.encoding.as_ref();
    for column in parquet_schema.columns() {
        let path = column.path().string();
        let top = column.path().parts().first();
        if write.not_in_files.iter().any(|p| Some(p) == top) {
            continue;
        }
        let own = write
            .options
            .column_specific_options
            .iter()
            .find(|(named, _)| named.eq_ignore_ascii_case(&path))
            .and_then(|(_, o)| o.encoding.as_ref())
            .map(|name| (format!("'{COLUMN_ENCODING}{path}'"), name));
        let (key, name) = match (own, every_column) {
            (Some(own), _) => own,
            (None, Some(name)) if write.into_table => (format!("'{ENCODING}'"), name),
            (None, Some(name)) => (
                format!("'{ENCODING}', or the session's 'datafusion.execution.parquet.encoding'"),
                name,
            ),
            (None, None) => continue,
        };
        let Some(encoding) = parse(name) else {
            continue;
        };
        let physical = column.physical_type();
        if !takes(physical, encoding) {
            let remedy = if write.into_table {
                "the table's encodings are fixed when it is created: create it again with \
                 another encoding in its OPTIONS"
                    .to_string()
            } else {
                format!("name another encoding for this column with '{COLUMN_ENCODING}{path}'")
            };
            let mismatch = Mismatch {
                destination: at,
                path: &path,
                physical,
                key: &key,
                name,
                remedy: &remedy,
            };
            return Err(mismatch.error(encoding));
        }
    }
    Ok(())
}

/// The encoding a name stands for, as DataFusion reads `format.encoding` (any case).
fn parse(name: &str) -> Option<Encoding> {
    Some(match name.to_ascii_lowercase().as_str() {
        "plain" => Encoding::PLAIN,
        "plain_dictionary" => Encoding::PLAIN_DICTIONARY,
        "rle" => Encoding::RLE,
        #[allow(deprecated)]
        "bit_packed" => Encoding::BIT_PACKED,
        "delta_binary_packed" => Encoding::DELTA_BINARY_PACKED,
        "delta_length_byte_array" => Encoding::DELTA_LENGTH_BYTE_ARRAY,
        "delta_byte_array" => Encoding::DELTA_BYTE_ARRAY,
        "rle_dictionary" => Encoding::RLE_DICTIONARY,
        "byte_stream_split" => Encoding::BYTE_STREAM_SPLIT,
        _ => return None,
    })
}

/// The encodings the writer takes for values of one Parquet type (the Parquet format allows a
/// few more than the writer implements, and those panic too).
fn encodings_for(physical: PhysicalType) -> &'static [Encoding] {
    use Encoding::*;
    match physical {
        PhysicalType::BOOLEAN => &[PLAIN, RLE],
        PhysicalType::INT32 | PhysicalType::INT64 => {
            &[PLAIN, DELTA_BINARY_PACKED, BYTE_STREAM_SPLIT]
        }
        PhysicalType::FLOAT | PhysicalType::DOUBLE => &[PLAIN, BYTE_STREAM_SPLIT],
        PhysicalType::BYTE_ARRAY => &[PLAIN, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY],
        PhysicalType::FIXED_LEN_BYTE_ARRAY => &[PLAIN, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT],
        PhysicalType::INT96 => &[PLAIN],
    }
}

fn takes(physical: PhysicalType, encoding: Encoding) -> bool {
    encodings_for(physical).contains(&encoding)
}

/// A column and the encoding it cannot take, as the error names them.
struct Mismatch<'a> {
    destination: &'a str,
    path: &'a str,
    physical: PhysicalType,
    key: &'a str,
    name: &'a str,
    remedy: &'a str,
}

impl Mismatch<'_> {
    fn error(&self, encoding: Encoding) -> Error {
        let Mismatch {
            destination,
            path,
            physical,
            key,
            name,
            remedy,
        } = self;
        if matches!(
            encoding,
            Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY
        ) {
            return Error::Usage(format!(
                "{destination}: '{name}' ({key}) is not an encoding the Parquet writer takes \
                 for pages; dictionaries are switched on by 'format.dictionary_enabled' 'true' \
                 (the default), and the encoding for pages where a dictionary is not used is \
                 one such as 'plain'. Nothing was written"
            ));
        }
        let takes: Vec<String> = encodings_for(*physical)
            .iter()
            .map(|e| format!("'{}'", e.to_string().to_ascii_lowercase()))
            .collect();
        Error::Usage(format!(
            "{destination}: column {path} is stored as Parquet {physical}, which the writer \
             cannot encode as '{name}' ({key}); it takes {}. Nothing was written: {remedy}",
            takes.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        ArrayRef, FixedSizeBinaryArray, ListArray, RecordBatch, StringArray, StructArray,
    };
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{DataType, Field, Fields, Int64Type, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;
    use datafusion::prelude::SessionContext;

    use super::*;

    const NAMES: [&str; 9] = [
        "plain",
        "plain_dictionary",
        "rle",
        "bit_packed",
        "delta_binary_packed",
        "delta_length_byte_array",
        "delta_byte_array",
        "rle_dictionary",
        "byte_stream_split",
    ];

    fn types() -> Vec<DataType> {
        vec![
            DataType::Boolean,
            DataType::Int8,
            DataType::Int32,
            DataType::UInt64,
            DataType::Int64,
            DataType::Float32,
            DataType::Float64,
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Utf8View,
            DataType::Binary,
            DataType::FixedSizeBinary(4),
            DataType::Decimal128(5, 2),
            DataType::Decimal128(30, 2),
            DataType::Date32,
            DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None),
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
            DataType::Struct(Fields::from(vec![Field::new("f", DataType::Utf8, true)])),
        ]
    }

    /// Three values of a type, not null: an encoder is handed values to encode.
    fn three_values(data_type: &DataType) -> ArrayRef {
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["1", "0", "1"]));
        match data_type {
            DataType::FixedSizeBinary(_) => Arc::new(
                FixedSizeBinaryArray::try_from_iter([[1u8, 2, 3, 4], [0; 4], [9; 4]].into_iter())
                    .unwrap_or_else(|e| panic!("{e}")),
            ),
            DataType::List(_) => Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>([
                Some(vec![Some(1), Some(2)]),
                Some(vec![]),
                Some(vec![Some(3)]),
            ])),
            DataType::Struct(fields) => {
                Arc::new(StructArray::new(fields.clone(), vec![texts], None))
            }
            other => cast(&texts, other).unwrap_or_else(|e| panic!("{other}: {e}")),
        }
    }

    /// Oracle: the Parquet writer itself. For every encoding and column type, what `takes`
    /// says of the column's leaf type is what happens when the writer writes a row of it with
    /// that encoding: written, or refused (a panic or an error).
    #[test]
    fn the_check_agrees_with_the_writer() {
        for data_type in types() {
            let schema = Arc::new(Schema::new(vec![Field::new("a", data_type.clone(), true)]));
            let parquet = ArrowSchemaConverter::new()
                .convert(&schema)
                .unwrap_or_else(|e| panic!("{data_type}: {e}"));
            let physical = parquet.column(0).physical_type();
            for name in NAMES {
                let encoding = parse(name).unwrap_or_else(|| panic!("{name}"));
                let column = three_values(&data_type);
                let batch = RecordBatch::try_new(schema.clone(), vec![column])
                    .unwrap_or_else(|e| panic!("{e}"));
                let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let properties = WriterProperties::builder()
                        .set_dictionary_enabled(false)
                        .set_encoding(encoding)
                        .build();
                    let mut sink = Vec::new();
                    let mut writer =
                        ArrowWriter::try_new(&mut sink, schema.clone(), Some(properties))?;
                    writer.write(&batch)?;
                    writer.close().map(|_| ())
                }));
                let wrote = matches!(written, Ok(Ok(())));
                assert_eq!(
                    takes(physical, encoding),
                    wrote,
                    "{data_type} ({physical}) with {name}: the writer {}",
                    if wrote { "wrote it" } else { "refused it" }
                );
            }
        }
    }

    async fn plan_of(sql: &str) -> LogicalPlan {
        let ctx = SessionContext::new();
        ctx.state()
            .create_logical_plan(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The check's message for `sql` planned alone, in the session `state`; empty if it passes.
    async fn refusal(sql: &str, state: &SessionState) -> String {
        check(&plan_of(sql).await, state, "statement 1")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_write_names_the_setting_the_writer_cannot_take() {
        let ctx = SessionContext::new();
        let session = ctx.state();
        let copy = |select: &str, options: &str| {
            format!("COPY ({select}) TO '/nowhere/out/' STORED AS PARQUET OPTIONS ({options})")
        };
        let two = "SELECT 1 AS n, 'x' AS text";
        let message = refusal(&copy(two, "'format.encoding' 'rle'"), &session).await;
        assert!(
            message.starts_with("statement 1: COPY to /nowhere/out/"),
            "{message}"
        );
        assert!(
            message.contains("column n is stored as Parquet INT64"),
            "{message}"
        );
        assert!(message.contains("'delta_binary_packed'"), "{message}");

        // A column's own encoding wins over the one for every column.
        let flagged = "SELECT true AS flag, 'x' AS text";
        let own = "'format.encoding' 'rle', 'format.encoding::text' 'delta_byte_array'";
        assert_eq!(refusal(&copy(flagged, own), &session).await, "");
        let own = "'format.encoding::text' 'byte_stream_split'";
        let message = refusal(&copy(flagged, own), &session).await;
        assert!(
            message.contains("column text is stored as Parquet BYTE_ARRAY"),
            "{message}"
        );

        // The session's encoding applies where the COPY names none; a dictionary encoding is
        // refused with what to use instead.
        let encoded = SessionContext::new();
        encoded
            .sql("SET datafusion.execution.parquet.encoding = 'rle_dictionary'")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let plain = "COPY (SELECT 1 AS n) TO '/nowhere/out/' STORED AS PARQUET";
        let message = refusal(plain, &encoded.state()).await;
        assert!(message.contains("format.dictionary_enabled"), "{message}");
        assert!(
            message.contains("'rle_dictionary' ('format.encoding', or the session's"),
            "{message}"
        );

        // Sizes of 0 and a probability outside (0, 1), which the writer panics or loops on.
        for (option, named) in [
            ("'format.max_row_group_size' '0'", "max_row_group_size is 0"),
            ("'format.write_batch_size' '0'", "write_batch_size is 0"),
            (
                "'format.statistics_truncate_length' '0'",
                "statistics_truncate_length is 0",
            ),
            (
                "'format.maximum_parallel_row_group_writers' '0'",
                "maximum_parallel_row_group_writers is 0",
            ),
            (
                "'format.bloom_filter_on_write' 'true', 'format.bloom_filter_fpp' '2'",
                "'format.bloom_filter_fpp' is 2",
            ),
            (
                "'format.bloom_filter_fpp::text' '0'",
                "'format.bloom_filter_fpp::text' is 0",
            ),
        ] {
            let message = refusal(&copy("SELECT 'x' AS text", option), &session).await;
            assert!(message.contains(named), "{option}: {message}");
        }

        // An INSERT into a Parquet table goes by the table's options.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let create = format!(
            "CREATE EXTERNAL TABLE t (n DOUBLE, text VARCHAR) STORED AS PARQUET LOCATION '{}/' \
             OPTIONS ('format.encoding' 'delta_binary_packed', \
             'format.encoding::text' 'delta_byte_array')",
            dir.path().display()
        );
        ctx.sql(&create).await.unwrap_or_else(|e| panic!("{e}"));
        let insert = ctx
            .state()
            .create_logical_plan("INSERT INTO t VALUES (1.5, 'x')")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let message = check(&insert, &ctx.state(), "statement 2")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.starts_with("statement 2: INSERT INTO t: column n is stored as Parquet DOUBLE"),
            "{message}"
        );
        assert!(message.contains("create it again"), "{message}");

        // Other formats and plans are not this check's.
        let csv = "COPY (SELECT 1 AS n) TO '/nowhere/out.csv' STORED AS CSV \
                   OPTIONS ('format.delimiter' ';')";
        assert_eq!(refusal(csv, &session).await, "");
        assert_eq!(refusal("SELECT 1", &session).await, "");
    }
}
