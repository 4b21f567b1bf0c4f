//! `hamming(a, b) -> UInt8`: number of differing bits between two fingerprints, both UInt64
//! (64 bits) or both FixedSizeBinary(16) (128 bits).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, UInt8Array};
use datafusion::arrow::compute::binary;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::{as_fixed_size_binary_array, as_uint64_array};
use datafusion::common::{ScalarValue, exec_err, utils::take_function_args};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

use crate::fingerprint::{Fingerprint, hamming};

static HAMMING: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(HammingFunc::new())));

/// The `hamming` SQL function.
pub fn hamming_udf() -> Arc<ScalarUDF> {
    Arc::clone(&HAMMING)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct HammingFunc {
    signature: Signature,
}

impl HammingFunc {
    fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::UInt64, DataType::UInt64]),
                    TypeSignature::Exact(vec![wide(), wide()]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

fn wide() -> DataType {
    DataType::FixedSizeBinary(16)
}

/// A 128-bit fingerprint from its 16 big-endian bytes.
pub(crate) fn wide_value(bytes: &[u8]) -> Option<u128> {
    bytes.try_into().ok().map(u128::from_be_bytes)
}

impl ScalarUDFImpl for HammingFunc {
    fn name(&self) -> &str {
        "hamming"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [a, b] = take_function_args(self.name(), &args.args)?;
        if let (ColumnarValue::Scalar(a), ColumnarValue::Scalar(b)) = (a, b) {
            let distance = match (a, b) {
                (ScalarValue::UInt64(a), ScalarValue::UInt64(b)) => {
                    a.zip(*b).map(|(a, b)| hamming(a, b) as u8)
                }
                (ScalarValue::FixedSizeBinary(16, a), ScalarValue::FixedSizeBinary(16, b)) => {
                    match (
                        a.as_deref().and_then(wide_value),
                        b.as_deref().and_then(wide_value),
                    ) {
                        (Some(a), Some(b)) => Some(a.hamming(b) as u8),
                        _ => None,
                    }
                }
                _ => {
                    return exec_err!(
                        "hamming expects two UInt64 or two FixedSizeBinary(16) fingerprints"
                    );
                }
            };
            return Ok(ColumnarValue::Scalar(ScalarValue::UInt8(distance)));
        }
        // One side may be a scalar (a fingerprint to compare a column with): broadcast it.
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        if arrays[0].data_type() == &wide() {
            let (a, b) = (
                as_fixed_size_binary_array(&arrays[0])?,
                as_fixed_size_binary_array(&arrays[1])?,
            );
            let distances: UInt8Array = a
                .iter()
                .zip(b.iter())
                .map(|(a, b)| {
                    let (a, b) = (wide_value(a?)?, wide_value(b?)?);
                    Some(a.hamming(b) as u8)
                })
                .collect();
            return Ok(ColumnarValue::Array(Arc::new(distances) as ArrayRef));
        }
        let (a, b) = (as_uint64_array(&arrays[0])?, as_uint64_array(&arrays[1])?);
        let distances: UInt8Array = binary(a, b, |a, b| hamming(a, b) as u8)?;
        Ok(ColumnarValue::Array(Arc::new(distances) as ArrayRef))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::UInt8Type;

    use crate::udf::test_util::sql;

    async fn column(sql_text: &str) -> Vec<Option<u8>> {
        let batches = sql(sql_text).await;
        batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_primitive::<UInt8Type>()
                    .iter()
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[tokio::test]
    async fn arrays_scalars_and_nulls() {
        let values = "(VALUES (arrow_cast(0, 'UInt64'), arrow_cast(0, 'UInt64')), \
                      (arrow_cast(0, 'UInt64'), arrow_cast(18446744073709551615, 'UInt64')), \
                      (arrow_cast(10, 'UInt64'), arrow_cast(6, 'UInt64')), \
                      (arrow_cast(NULL, 'UInt64'), arrow_cast(6, 'UInt64'))) AS v(a, b)";
        assert_eq!(
            column(&format!("SELECT hamming(a, b) FROM {values}")).await,
            [Some(0), Some(64), Some(2), None]
        );
        // Array against scalar, both ways round.
        assert_eq!(
            column(&format!(
                "SELECT hamming(a, arrow_cast(3, 'UInt64')) FROM {values}"
            ))
            .await,
            [Some(2), Some(2), Some(2), None]
        );
        assert_eq!(
            column(&format!(
                "SELECT hamming(arrow_cast(3, 'UInt64'), b) FROM {values}"
            ))
            .await,
            [Some(2), Some(62), Some(2), Some(2)]
        );
        assert_eq!(
            column("SELECT hamming(arrow_cast(7, 'UInt64'), arrow_cast(NULL, 'UInt64'))").await,
            [None]
        );
    }

    #[tokio::test]
    async fn wide_fingerprints() {
        // 16 bytes each: all zero, all ones, and zero with the first and last bits set.
        let zero = "arrow_cast(X'00000000000000000000000000000000', 'FixedSizeBinary(16)')";
        let ones = "arrow_cast(X'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF', 'FixedSizeBinary(16)')";
        let ends = "arrow_cast(X'80000000000000000000000000000001', 'FixedSizeBinary(16)')";
        assert_eq!(
            column(&format!("SELECT hamming({zero}, {ones})")).await,
            [Some(128)]
        );
        assert_eq!(
            column(&format!(
                "SELECT hamming(f, {zero}) FROM (VALUES ({zero}), ({ones}), ({ends})) AS v(f)"
            ))
            .await,
            [Some(0), Some(128), Some(2)]
        );
    }
}
