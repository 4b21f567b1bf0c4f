//! `bucket(simhash, n) -> UInt16`: the n-th 16-bit band of a fingerprint, band 1 being the top
//! 16 bits; n in 1..=4 for UInt64 fingerprints, 1..=8 for 128-bit ones (FixedSizeBinary(16)).
//! The matching joins on these columns.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, UInt16Array};
use datafusion::arrow::compute::unary;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::{as_fixed_size_binary_array, as_uint64_array};
use datafusion::common::{ScalarValue, exec_err, utils::take_function_args};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

use crate::fingerprint::{BANDS, Fingerprint, band};
use crate::udf::hamming::wide_value;

static BUCKET: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(BucketFunc::new())));

/// The `bucket` SQL function.
pub fn bucket_udf() -> Arc<ScalarUDF> {
    Arc::clone(&BUCKET)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BucketFunc {
    signature: Signature,
}

impl BucketFunc {
    fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::UInt64, DataType::Int64]),
                    TypeSignature::Exact(vec![DataType::FixedSizeBinary(16), DataType::Int64]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for BucketFunc {
    fn name(&self) -> &str {
        "bucket"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt16)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [fingerprint, index] = take_function_args(self.name(), args.args)?;
        let wide = fingerprint.data_type() == DataType::FixedSizeBinary(16);
        let bands = if wide {
            <u128 as Fingerprint>::BANDS
        } else {
            BANDS
        };
        let index = match index {
            ColumnarValue::Scalar(ScalarValue::Int64(Some(i)))
                if (1..=bands as i64).contains(&i) =>
            {
                i as usize
            }
            other => {
                return exec_err!(
                    "bucket(simhash, n): n must be a literal in 1..={bands}, got {other:?}"
                );
            }
        };
        if wide {
            let scalar = matches!(fingerprint, ColumnarValue::Scalar(_));
            let array = fingerprint.into_array(1)?;
            let bands: UInt16Array = as_fixed_size_binary_array(&array)?
                .iter()
                .map(|f| wide_value(f?)?.band(index))
                .collect();
            if scalar {
                return Ok(ColumnarValue::Scalar(ScalarValue::UInt16(
                    bands.iter().next().flatten(),
                )));
            }
            return Ok(ColumnarValue::Array(Arc::new(bands) as ArrayRef));
        }
        // `band` cannot fail for an index checked above; the shift is computed once.
        let shift = 16 * (BANDS - index);
        match fingerprint {
            ColumnarValue::Scalar(ScalarValue::UInt64(f)) => Ok(ColumnarValue::Scalar(
                ScalarValue::UInt16(f.and_then(|f| band(f, index))),
            )),
            ColumnarValue::Array(array) => {
                let bands: UInt16Array = unary(as_uint64_array(&array)?, |f| (f >> shift) as u16);
                Ok(ColumnarValue::Array(Arc::new(bands) as ArrayRef))
            }
            ColumnarValue::Scalar(other) => {
                exec_err!(
                    "bucket expects a UInt64 or FixedSizeBinary(16) fingerprint, got {}",
                    other.data_type()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::UInt16Type;

    use crate::udf::test_util::{context, sql};

    #[tokio::test]
    async fn four_bands_top_first() {
        // 0x1111222233334444 = 1229801703532086340
        let batches = sql(
            "SELECT bucket(f, 1), bucket(f, 2), bucket(f, 3), bucket(f, 4) \
             FROM (VALUES (arrow_cast(1229801703532086340, 'UInt64')), (arrow_cast(NULL, 'UInt64'))) AS v(f)",
        )
        .await;
        let b = &batches[0];
        let got: Vec<Vec<Option<u16>>> = (0..4)
            .map(|c| b.column(c).as_primitive::<UInt16Type>().iter().collect())
            .collect();
        assert_eq!(
            got,
            vec![
                vec![Some(0x1111), None],
                vec![Some(0x2222), None],
                vec![Some(0x3333), None],
                vec![Some(0x4444), None]
            ]
        );
    }

    #[tokio::test]
    async fn eight_bands_of_a_wide_fingerprint() {
        let wide = "arrow_cast(X'11112222333344445555666677778888', 'FixedSizeBinary(16)')";
        let columns: Vec<String> = (1..=8).map(|n| format!("bucket(f, {n})")).collect();
        let batches = sql(&format!(
            "SELECT {} FROM (VALUES ({wide})) AS v(f)",
            columns.join(", ")
        ))
        .await;
        let got: Vec<u16> = (0..8)
            .map(|c| batches[0].column(c).as_primitive::<UInt16Type>().value(0))
            .collect();
        assert_eq!(
            got,
            [
                0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666, 0x7777, 0x8888
            ]
        );
        let scalar = sql(&format!("SELECT bucket({wide}, 8)")).await;
        assert_eq!(
            scalar[0].column(0).as_primitive::<UInt16Type>().value(0),
            0x8888
        );
    }

    #[tokio::test]
    async fn scalar_fingerprint() {
        let batches = sql("SELECT bucket(arrow_cast(1229801703532086340, 'UInt64'), 2)").await;
        assert_eq!(
            batches[0].column(0).as_primitive::<UInt16Type>().value(0),
            0x2222
        );
    }

    #[tokio::test]
    async fn band_index_out_of_range_is_an_error() {
        let ctx = context();
        for n in [0, 5] {
            let result = match ctx
                .sql(&format!("SELECT bucket(arrow_cast(1, 'UInt64'), {n})"))
                .await
            {
                Ok(df) => df.collect().await.map(|_| ()),
                Err(e) => Err(e),
            };
            let err = result.expect_err("out-of-range band").to_string();
            assert!(err.contains("1..=4"), "{err}");
        }
    }
}
