//! `hive_partition_value(value) -> Utf8`: the name of the Hive folder (`column=<name>`) that
//! DataFusion's writer puts a row in for `value`, with NULL named `__HIVE_DEFAULT_PARTITION__`.
//! The writer itself names a NULL's folder after whatever its array holds in that slot ('' for
//! strings, 0 for numbers and dates), so the value would come back as '' or 0; the deduplicated
//! corpus is written through this function instead (src/job/source.rs). Every other value is
//! spelled as the writer spells it (Rust's `Display` for numbers, so 1.0 is `1`; `%Y-%m-%d` for
//! dates), so that a partition keeps its folder from one run to the next.

use std::fmt::Write;
use std::sync::{Arc, LazyLock};

use chrono::NaiveDate;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::common::{exec_err, utils::take_function_args};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::input::{HIVE_NULL, is_string};

static HIVE_PARTITION_VALUE: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(HivePartitionValue::new())));

/// The `hive_partition_value` SQL function.
pub fn hive_partition_value_udf() -> Arc<ScalarUDF> {
    Arc::clone(&HIVE_PARTITION_VALUE)
}

/// Whether `hive_partition_value` names folders for a column of this type: the types DataFusion's
/// writer partitions by, and dictionaries of any string type (the writer takes only those of
/// Utf8; through this function every such column reaches it as Utf8).
pub fn is_partition_type(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => is_string(values),
        other => {
            is_string(other)
                || other.is_integer()
                || other.is_floating()
                || matches!(
                    other,
                    DataType::Boolean | DataType::Date32 | DataType::Date64
                )
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct HivePartitionValue {
    signature: Signature,
}

impl HivePartitionValue {
    fn new() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for HivePartitionValue {
    fn name(&self) -> &str {
        "hive_partition_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [kind] if is_partition_type(kind) || kind == &DataType::Null => Ok(DataType::Utf8),
            [kind] => exec_err!(
                "hive_partition_value: a column of type {kind} cannot name a partition folder"
            ),
            _ => exec_err!("hive_partition_value takes one value"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = take_function_args(self.name(), args.args)?;
        let rows = args.number_rows;
        let array = value.into_array(rows)?;
        Ok(ColumnarValue::Array(folder_names(&array)?))
    }
}

/// Each row's folder name, written into the builder as it goes (no string per row).
fn folder_names(array: &ArrayRef) -> Result<ArrayRef> {
    let rows = array.len();
    let mut names = StringBuilder::with_capacity(rows, rows * 8);
    // Logical nulls: a column of type Null has no validity buffer, yet every row is NULL.
    let nulls = array.logical_nulls();
    let is_null = |row: usize| nulls.as_ref().is_some_and(|n| n.is_null(row));
    // `$name` writes row `row`'s name into `names` (a `fmt::Write`); the row ends after it.
    macro_rules! each_row {
        (|$row:ident| $name:expr) => {
            for $row in 0..rows {
                if !is_null($row) {
                    $name?;
                }
                names.append_value(if is_null($row) { HIVE_NULL } else { "" });
            }
        };
    }
    macro_rules! numbers {
        ($kind:ty) => {{
            let values = array.as_primitive::<$kind>();
            each_row!(|row| write!(names, "{}", values.value(row)).map_err(format_error))
        }};
    }
    match array.data_type() {
        DataType::Null => each_row!(|row| Ok::<(), DataFusionError>(())),
        DataType::Utf8 => {
            let values = array.as_string::<i32>();
            each_row!(|row| names.write_str(values.value(row)).map_err(format_error))
        }
        DataType::LargeUtf8 => {
            let values = array.as_string::<i64>();
            each_row!(|row| names.write_str(values.value(row)).map_err(format_error))
        }
        DataType::Utf8View => {
            let values = array.as_string_view();
            each_row!(|row| names.write_str(values.value(row)).map_err(format_error))
        }
        DataType::Dictionary(_, values) if is_string(values) => {
            // Name each value of the dictionary once, then take the names by key: a NULL
            // key, or a key to a NULL value, takes the name of NULL.
            let dictionary = array.as_any_dictionary();
            let named = folder_names(dictionary.values())?;
            let taken = datafusion::arrow::compute::take(&named, dictionary.keys(), None)?;
            let taken = taken.as_string::<i32>();
            for row in 0..rows {
                if taken.is_null(row) {
                    names.append_value(HIVE_NULL);
                } else {
                    names.append_value(taken.value(row));
                }
            }
        }
        DataType::Boolean => {
            let values = array.as_boolean();
            each_row!(|row| write!(names, "{}", values.value(row)).map_err(format_error))
        }
        DataType::Date32 => {
            let values = array.as_primitive::<Date32Type>();
            each_row!(|row| write_day(&mut names, i64::from(values.value(row))))
        }
        DataType::Date64 => {
            // Whole days of milliseconds, truncated toward zero as the writer divides.
            let values = array.as_primitive::<Date64Type>();
            each_row!(|row| write_day(&mut names, values.value(row) / 86_400_000))
        }
        DataType::Int8 => numbers!(Int8Type),
        DataType::Int16 => numbers!(Int16Type),
        DataType::Int32 => numbers!(Int32Type),
        DataType::Int64 => numbers!(Int64Type),
        DataType::UInt8 => numbers!(UInt8Type),
        DataType::UInt16 => numbers!(UInt16Type),
        DataType::UInt32 => numbers!(UInt32Type),
        DataType::UInt64 => numbers!(UInt64Type),
        DataType::Float16 => numbers!(Float16Type),
        DataType::Float32 => numbers!(Float32Type),
        DataType::Float64 => numbers!(Float64Type),
        other => {
            return exec_err!(
                "hive_partition_value: a column of type {other} cannot name a partition folder"
            );
        }
    }
    Ok(Arc::new(names.finish()))
}

fn format_error(e: std::fmt::Error) -> DataFusionError {
    DataFusionError::Execution(format!("hive_partition_value: {e}"))
}

/// Writes `%Y-%m-%d` of a day counted from 1970-01-01; an error (where the writer would panic)
/// for a day chrono cannot represent.
fn write_day(names: &mut StringBuilder, days_since_epoch: i64) -> Result<()> {
    const EPOCH_DAYS_FROM_CE: i64 = 719_163;
    let day = i32::try_from(EPOCH_DAYS_FROM_CE + days_since_epoch)
        .ok()
        .and_then(NaiveDate::from_num_days_from_ce_opt);
    match day {
        Some(day) => write!(names, "{}", day.format("%Y-%m-%d")).map_err(format_error),
        None => exec_err!(
            "hive_partition_value: day {days_since_epoch} after 1970-01-01 is not a date \
             a partition folder can name"
        ),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};

    use crate::udf::test_util::sql;

    async fn names(select: &str) -> Vec<String> {
        let batches = sql(&format!(
            "SELECT hive_partition_value(v) AS name FROM ({select}) AS t(v)"
        ))
        .await;
        batches
            .iter()
            .flat_map(|b| {
                let names = b.column(0).as_string::<i32>();
                (0..names.len())
                    .map(|i| names.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The names DataFusion's writer gives these values' folders (Rust's `Display` of the
    /// number, the day), and the Hive name of NULL where the writer would say '' or 0.
    #[tokio::test]
    async fn values_are_named_as_the_writer_names_them_and_null_as_hive_does() {
        assert_eq!(
            names("VALUES (1.0), (NULL), (0.0), (2.5), (-0.5)").await,
            ["1", "__HIVE_DEFAULT_PARTITION__", "0", "2.5", "-0.5"]
        );
        assert_eq!(
            names("VALUES ('a'), (NULL), ('')").await,
            ["a", "__HIVE_DEFAULT_PARTITION__", ""]
        );
        assert_eq!(
            names("VALUES (arrow_cast('2026-12-07', 'Date64')), (NULL)").await,
            ["2026-12-07", "__HIVE_DEFAULT_PARTITION__"]
        );
        assert_eq!(
            names("VALUES (DATE '1969-12-31'), (NULL)").await,
            ["1969-12-31", "__HIVE_DEFAULT_PARTITION__"]
        );
        // Before 1970 a Date64 of whole days is its day; a part of a day is cut toward zero,
        // as the writer divides.
        assert_eq!(
            names(
                "VALUES (arrow_cast(arrow_cast(-86400000, 'Int64'), 'Date64')), \
                 (arrow_cast(arrow_cast(-1, 'Int64'), 'Date64'))"
            )
            .await,
            ["1969-12-31", "1970-01-01"]
        );
        // A column of type Null (a NULL literal) is NULL in every row.
        assert_eq!(
            names("VALUES (NULL), (NULL)").await,
            ["__HIVE_DEFAULT_PARTITION__", "__HIVE_DEFAULT_PARTITION__"]
        );
        assert_eq!(
            names("VALUES (arrow_cast(7, 'UInt16')), (NULL)").await,
            ["7", "__HIVE_DEFAULT_PARTITION__"]
        );
        assert_eq!(
            names("VALUES (true), (NULL)").await,
            ["true", "__HIVE_DEFAULT_PARTITION__"]
        );
        assert_eq!(
            names(
                "VALUES (arrow_cast('x', 'Dictionary(Int32, Utf8)')), \
                 (arrow_cast(NULL, 'Dictionary(Int32, Utf8)'))"
            )
            .await,
            ["x", "__HIVE_DEFAULT_PARTITION__"]
        );
    }

    #[tokio::test]
    async fn a_type_no_folder_can_name_is_an_error() {
        let ctx = crate::udf::test_util::context();
        let planned = ctx
            .sql("SELECT hive_partition_value(arrow_cast(1, 'Decimal128(5, 2)'))")
            .await;
        let message = match planned {
            Ok(frame) => frame.collect().await.unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            message.contains("cannot name a partition folder"),
            "{message}"
        );
    }
}
