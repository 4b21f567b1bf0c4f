//! `signed_bits(UInt64) -> Int64` and `unsigned_bits(Int64) -> UInt64`: the same 64 bits read
//! as the other type (two's complement), not a numeric cast, which would fail on half of all
//! fingerprints. Table formats without unsigned integers (Delta Lake) store a fingerprint as
//! its signed bits; `hamming` and `bucket` need it back as UInt64.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, Int64Array, UInt64Array};
use datafusion::arrow::compute::unary;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::{as_int64_array, as_uint64_array};
use datafusion::common::{ScalarValue, exec_err, utils::take_function_args};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

static SIGNED: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(BitsFunc::new(Direction::ToSigned))));
static UNSIGNED: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(BitsFunc::new(
        Direction::ToUnsigned,
    )))
});

/// The `signed_bits` SQL function.
pub fn signed_bits_udf() -> Arc<ScalarUDF> {
    Arc::clone(&SIGNED)
}

/// The `unsigned_bits` SQL function.
pub fn unsigned_bits_udf() -> Arc<ScalarUDF> {
    Arc::clone(&UNSIGNED)
}

#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Direction {
    ToSigned,
    ToUnsigned,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BitsFunc {
    direction: Direction,
    signature: Signature,
}

impl BitsFunc {
    fn new(direction: Direction) -> Self {
        let from = match direction {
            Direction::ToSigned => DataType::UInt64,
            Direction::ToUnsigned => DataType::Int64,
        };
        Self {
            direction,
            signature: Signature::exact(vec![from], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for BitsFunc {
    fn name(&self) -> &str {
        match self.direction {
            Direction::ToSigned => "signed_bits",
            Direction::ToUnsigned => "unsigned_bits",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.direction {
            Direction::ToSigned => DataType::Int64,
            Direction::ToUnsigned => DataType::UInt64,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = take_function_args(self.name(), args.args)?;
        match (self.direction, value) {
            (Direction::ToSigned, ColumnarValue::Scalar(ScalarValue::UInt64(v))) => Ok(
                ColumnarValue::Scalar(ScalarValue::Int64(v.map(|v| v as i64))),
            ),
            (Direction::ToUnsigned, ColumnarValue::Scalar(ScalarValue::Int64(v))) => Ok(
                ColumnarValue::Scalar(ScalarValue::UInt64(v.map(|v| v as u64))),
            ),
            (Direction::ToSigned, ColumnarValue::Array(array)) => {
                let signed: Int64Array = unary(as_uint64_array(&array)?, |v| v as i64);
                Ok(ColumnarValue::Array(Arc::new(signed) as ArrayRef))
            }
            (Direction::ToUnsigned, ColumnarValue::Array(array)) => {
                let unsigned: UInt64Array = unary(as_int64_array(&array)?, |v| v as u64);
                Ok(ColumnarValue::Array(Arc::new(unsigned) as ArrayRef))
            }
            (_, ColumnarValue::Scalar(other)) => {
                exec_err!("{} got a {} value", self.name(), other.data_type())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

    use crate::udf::test_util::sql;

    #[tokio::test]
    async fn bits_round_trip_through_the_signed_type() {
        let batches = sql(
            "SELECT signed_bits(CAST(18446744073709551615 AS BIGINT UNSIGNED)) AS s, \
             signed_bits(CAST(5 AS BIGINT UNSIGNED)) AS five, \
             unsigned_bits(signed_bits(CAST(9223372036854775808 AS BIGINT UNSIGNED))) AS back",
        )
        .await;
        let batch = &batches[0];
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), -1);
        assert_eq!(batch.column(1).as_primitive::<Int64Type>().value(0), 5);
        assert_eq!(
            batch.column(2).as_primitive::<UInt64Type>().value(0),
            9_223_372_036_854_775_808
        );
    }
}
