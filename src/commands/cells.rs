//! One value of a query's answer, by column and row, as the commands that print answers read
//! them: `None` for NULL and for a column of another type (the queries cast what they select).

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};

pub fn i64_at(batch: &RecordBatch, column: usize, row: usize) -> Option<i64> {
    let array = batch.column(column);
    match array.data_type() {
        DataType::Int64 if !array.is_null(row) => {
            Some(array.as_primitive::<Int64Type>().value(row))
        }
        _ => None,
    }
}

pub fn f64_at(batch: &RecordBatch, column: usize, row: usize) -> Option<f64> {
    let array = batch.column(column);
    match array.data_type() {
        DataType::Float64 if !array.is_null(row) => {
            Some(array.as_primitive::<Float64Type>().value(row))
        }
        _ => None,
    }
}

pub fn string_at(batch: &RecordBatch, column: usize, row: usize) -> Option<String> {
    let array = batch.column(column);
    match array.data_type() {
        DataType::Utf8 if !array.is_null(row) => {
            Some(array.as_string::<i32>().value(row).to_string())
        }
        _ => None,
    }
}
