//! The column types of a Delta table. Delta has no unsigned integers and no fixed-size binary,
//! both of which neardup's tables hold (`simhash` UInt64, `bucket1` UInt16, `distance` UInt8,
//! `sketch` FixedSizeBinary(256)). Written to Delta, each such column becomes the Delta type
//! that holds every value: UInt8 as short, UInt16 as integer, UInt32 as long, fixed-size binary
//! as binary, and UInt64 as long holding the same 64 bits (`signed_bits`: a numeric cast would
//! fail on every fingerprint with its top bit set). The Arrow type it had is kept in the
//! column's metadata (`neardup.arrow_type`), so that neardup reads the table back with the
//! types of the Parquet outputs, and other readers see plain Delta types.

use std::collections::HashMap;

use datafusion::arrow::datatypes::{DataType, Fields, Schema};
use datafusion::common::Column;
use datafusion::logical_expr::Expr;
use datafusion::prelude::{DataFrame, cast};

use crate::error::{QueryContext, Result};
use crate::udf::{signed_bits_udf, unsigned_bits_udf};

/// The column metadata key that records a converted column's Arrow type.
pub const ARROW_TYPE_KEY: &str = "neardup.arrow_type";

/// Refuses columns whose names differ only in case (`id` and `Id`, at the top or inside a
/// struct), which Delta does not tell apart: delta-rs refuses them at the commit, after the
/// whole run.
pub fn refuse_names_alike_but_case(schema: &Schema) -> crate::error::Result<()> {
    fn check(fields: &Fields, inside: &str) -> crate::error::Result<()> {
        let mut seen: HashMap<String, &str> = HashMap::new();
        for field in fields.iter() {
            if let Some(first) = seen.insert(field.name().to_lowercase(), field.name()) {
                return Err(crate::error::Error::Input(format!(
                    "--output-format delta: the input's columns '{}' and '{}'{inside} differ \
                     only in case, which Delta tables do not tell apart; rename one (in SQL with \
                     neardup query), or write Parquet tables",
                    crate::error::echo(first),
                    crate::error::echo(field.name())
                )));
            }
            let mut data_type = field.data_type();
            // Through lists and maps (a map's entries are a struct of key and value).
            while let DataType::List(item)
            | DataType::LargeList(item)
            | DataType::FixedSizeList(item, _)
            | DataType::Map(item, _) = data_type
            {
                data_type = item.data_type();
            }
            if let DataType::Struct(children) = data_type {
                check(
                    children,
                    &format!(" (inside '{}')", crate::error::echo(field.name())),
                )?;
            }
        }
        Ok(())
    }
    check(schema.fields(), "")
}

/// The Delta-storable type of `data_type`, when it is not storable as it is.
fn storable(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::UInt8 => Some(DataType::Int16),
        DataType::UInt16 => Some(DataType::Int32),
        DataType::UInt32 | DataType::UInt64 => Some(DataType::Int64),
        DataType::FixedSizeBinary(_) => Some(DataType::Binary),
        _ => None,
    }
}

/// `frame` with every column Delta cannot store converted, its Arrow type in its metadata.
pub fn to_storable(frame: DataFrame) -> Result<DataFrame> {
    let schema = frame.schema().as_arrow().clone();
    if !schema
        .fields()
        .iter()
        .any(|f| storable(f.data_type()).is_some())
    {
        return Ok(frame);
    }
    let exprs: Vec<Expr> = schema
        .fields()
        .iter()
        .map(|field| {
            let column = column(field.name());
            match storable(field.data_type()) {
                None => column,
                Some(target) => {
                    let converted = if *field.data_type() == DataType::UInt64 {
                        signed_bits_udf().call(vec![column])
                    } else {
                        cast(column, target)
                    };
                    let metadata = HashMap::from([(
                        ARROW_TYPE_KEY.to_string(),
                        field.data_type().to_string(),
                    )]);
                    converted.alias_with_metadata(field.name(), Some(metadata.into()))
                }
            }
        })
        .collect();
    frame
        .select(exprs)
        .context(|| "converting columns to Delta types".into())
}

/// `frame` (a Delta table neardup wrote, as delta-rs reads it) with its converted columns back at
/// their Arrow types, and view types (which delta-rs reads strings and binaries as) back to
/// the plain types the Parquet outputs have.
pub fn from_storable(frame: DataFrame) -> Result<DataFrame> {
    let schema: Schema = frame.schema().as_arrow().clone();
    let exprs: Vec<Expr> = schema
        .fields()
        .iter()
        .map(|field| {
            let original = field
                .metadata()
                .get(ARROW_TYPE_KEY)
                .and_then(|t| t.parse::<DataType>().ok());
            let plain = match field.data_type() {
                DataType::Utf8View => DataType::Utf8,
                DataType::BinaryView => DataType::Binary,
                other => other.clone(),
            };
            let mut expr = column(field.name());
            if plain != *field.data_type() {
                expr = cast(expr, plain.clone());
            }
            match original {
                None => {}
                Some(DataType::UInt64) if plain == DataType::Int64 => {
                    expr = unsigned_bits_udf().call(vec![expr]);
                }
                Some(data_type) => expr = cast(expr, data_type),
            }
            expr.alias(field.name())
        })
        .collect();
    frame
        .select(exprs)
        .context(|| "reading Delta columns back at their types".into())
}

/// A reference to the column `name`, whatever its case and characters.
fn column(name: &str) -> Expr {
    Expr::Column(Column::new_unqualified(name))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        Array, ArrayRef, FixedSizeBinaryArray, RecordBatch, StringArray, UInt8Array, UInt16Array,
        UInt32Array, UInt64Array,
    };
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::prelude::SessionContext;

    use super::*;

    fn batch() -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt8Array::from(vec![Some(0), Some(255), None])),
            Arc::new(UInt16Array::from(vec![Some(0), Some(65_535), Some(32_768)])),
            Arc::new(UInt32Array::from(vec![Some(u32::MAX), Some(1), None])),
            Arc::new(UInt64Array::from(vec![
                Some(u64::MAX),
                Some(1 << 63),
                Some(7),
            ])),
            Arc::new(
                FixedSizeBinaryArray::try_from_iter([[1u8, 2], [3, 4], [255, 0]].into_iter())
                    .unwrap(),
            ),
            Arc::new(StringArray::from(vec![Some("a"), None, Some("中文")])),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    #[tokio::test]
    async fn every_value_survives_the_delta_types_and_back() {
        let ctx = SessionContext::new();
        let original = batch();
        let frame = ctx.read_batch(original.clone()).unwrap();
        let stored = to_storable(frame).unwrap();
        let types: Vec<DataType> = stored
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            types,
            [
                DataType::Int16,
                DataType::Int32,
                DataType::Int64,
                DataType::Int64,
                DataType::Binary,
                DataType::Utf8
            ]
        );
        let field = stored.schema().field(3);
        assert_eq!(field.metadata().get(ARROW_TYPE_KEY).unwrap(), "UInt64");
        let stored_rows = stored.clone().collect().await.unwrap();
        let signed = stored_rows[0].column(3);
        let signed = signed
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .unwrap();
        assert_eq!(signed.value(0), -1, "the same bits, not a numeric cast");
        let back = from_storable(stored).unwrap().collect().await.unwrap();
        let types = |b: &RecordBatch| -> Vec<(String, DataType)> {
            let schema = b.schema();
            let fields = schema.fields().iter();
            fields
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect()
        };
        assert_eq!(types(&back[0]), types(&original));
        assert_eq!(back[0].columns(), original.columns());
    }
}
