//! The band plan in SQL (`crate::plan`), for UInt64 or FixedSizeBinary(16) fingerprints:
//!
//! - `band_key(simhash, band, plan) -> UInt64`: the key of table `band` (1-based); two
//!   fingerprints that share the table have equal keys. The matching groups and joins on it.
//! - `shared_band(a, b, plan) -> Int64`: the first table two fingerprints share, or NULL; a
//!   pair is kept only from that table, so it is found once.
//!
//! `plan` is a literal canonical plan, e.g. `'bands:4'`, `'mih:4:1'`, `'permutation:11:8'`.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, UInt64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::{as_fixed_size_binary_array, as_int64_array, as_uint64_array};
use datafusion::common::{ScalarValue, exec_err, utils::take_function_args};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

use crate::plan::BandPlan;
use crate::udf::hamming::wide_value;

static BAND_KEY: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(BandKeyFunc::new())));
static SHARED_BAND: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(SharedBandFunc::new())));

/// The `band_key` SQL function.
pub fn band_key_udf() -> Arc<ScalarUDF> {
    Arc::clone(&BAND_KEY)
}

/// The `shared_band` SQL function.
pub fn shared_band_udf() -> Arc<ScalarUDF> {
    Arc::clone(&SHARED_BAND)
}

const WIDTHS: [DataType; 2] = [DataType::UInt64, DataType::FixedSizeBinary(16)];

/// The plan named by a literal argument, for fingerprints of the given type.
fn plan_of(function: &str, plan: &ColumnarValue, fingerprint: &DataType) -> Result<Arc<BandPlan>> {
    let bits = if *fingerprint == DataType::FixedSizeBinary(16) {
        128
    } else {
        64
    };
    match plan {
        ColumnarValue::Scalar(ScalarValue::Utf8(Some(spec))) => {
            match BandPlan::cached(spec, bits) {
                Ok(plan) => Ok(plan),
                Err(e) => exec_err!("{function}: {e}"),
            }
        }
        other => exec_err!(
            "{function}: the plan must be a text literal such as 'bands:4', got a {} {}",
            other.data_type(),
            if matches!(other, ColumnarValue::Array(_)) {
                "column"
            } else {
                "value"
            }
        ),
    }
}

/// A fingerprint column widened to u128 (NULL stays NULL).
fn widened(array: &ArrayRef) -> Result<Vec<Option<u128>>> {
    if *array.data_type() == DataType::FixedSizeBinary(16) {
        Ok(as_fixed_size_binary_array(array)?
            .iter()
            .map(|v| v.and_then(wide_value))
            .collect())
    } else {
        Ok(as_uint64_array(array)?
            .iter()
            .map(|v| v.map(u128::from))
            .collect())
    }
}

/// Turns the result back into a scalar when every argument was one.
fn shaped(all_scalar: bool, array: ArrayRef) -> Result<ColumnarValue> {
    if all_scalar {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
            &array, 0,
        )?))
    } else {
        Ok(ColumnarValue::Array(array))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BandKeyFunc {
    signature: Signature,
}

impl BandKeyFunc {
    fn new() -> Self {
        let with = |f: DataType| TypeSignature::Exact(vec![f, DataType::Int64, DataType::Utf8]);
        Self {
            signature: Signature::one_of(WIDTHS.map(with).to_vec(), Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for BandKeyFunc {
    fn name(&self) -> &str {
        "band_key"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let [fingerprint, band, plan] = take_function_args(self.name(), args.args)?;
        let plan = plan_of(self.name(), &plan, &fingerprint.data_type())?;
        let all_scalar = matches!(
            (&fingerprint, &band),
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
        );
        let fingerprints = widened(&fingerprint.into_array(rows)?)?;
        let band = band.into_array(rows)?;
        let bands = as_int64_array(&band)?;
        let mut keys = Vec::with_capacity(fingerprints.len());
        for (f, band) in fingerprints.into_iter().zip(bands.iter()) {
            let (Some(f), Some(band)) = (f, band) else {
                keys.push(None);
                continue;
            };
            match usize::try_from(band).ok().and_then(|b| plan.key(f, b)) {
                Some(key) => keys.push(Some(key)),
                None => {
                    return exec_err!(
                        "band_key: band {band} is not a table of plan {plan} (1..={})",
                        plan.tables()
                    );
                }
            }
        }
        shaped(all_scalar, Arc::new(UInt64Array::from(keys)))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SharedBandFunc {
    signature: Signature,
}

impl SharedBandFunc {
    fn new() -> Self {
        let with = |f: DataType| TypeSignature::Exact(vec![f.clone(), f, DataType::Utf8]);
        Self {
            signature: Signature::one_of(WIDTHS.map(with).to_vec(), Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for SharedBandFunc {
    fn name(&self) -> &str {
        "shared_band"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let [a, b, plan] = take_function_args(self.name(), args.args)?;
        let plan = plan_of(self.name(), &plan, &a.data_type())?;
        let all_scalar = matches!(
            (&a, &b),
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
        );
        let a = widened(&a.into_array(rows)?)?;
        let b = widened(&b.into_array(rows)?)?;
        let shared: Int64Array = a
            .into_iter()
            .zip(b)
            .map(|(a, b)| plan.first_shared_band(a?, b?).map(|band| band as i64))
            .collect();
        shaped(all_scalar, Arc::new(shared))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

    use crate::udf::test_util::{context, sql};

    #[tokio::test]
    async fn keys_match_on_the_shared_band_only() {
        // Differ in the lowest bit: they share bands 1-3 of four, not band 4.
        let batches = sql(
            "SELECT band_key(arrow_cast(1229801703532086340, 'UInt64'), b, 'bands:4') = \
                    band_key(arrow_cast(1229801703532086341, 'UInt64'), b, 'bands:4'), \
                    shared_band(arrow_cast(1229801703532086340, 'UInt64'), \
                                arrow_cast(1229801703532086341, 'UInt64'), 'bands:4') \
             FROM (VALUES (1), (2), (3), (4)) AS t(b) ORDER BY b",
        )
        .await;
        let equal: Vec<bool> = batches[0]
            .column(0)
            .as_boolean()
            .iter()
            .map(|v| v.unwrap())
            .collect();
        assert_eq!(equal, [true, true, true, false]);
        assert_eq!(batches[0].column(1).as_primitive::<Int64Type>().value(0), 1);
    }

    #[tokio::test]
    async fn wide_fingerprints_and_nulls() {
        let batches = sql(
            "SELECT shared_band(arrow_cast(x'00000000000000000000000000000001', 'FixedSizeBinary(16)'), \
                                arrow_cast(x'80000000000000000000000000000000', 'FixedSizeBinary(16)'), \
                                'bands:8'), \
                    band_key(arrow_cast(NULL, 'UInt64'), 1, 'bands:4')",
        )
        .await;
        // Bands 1 and 8 differ; band 2 is the first shared.
        assert_eq!(batches[0].column(0).as_primitive::<Int64Type>().value(0), 2);
        assert!(batches[0].column(1).as_primitive::<UInt64Type>().is_null(0));
    }

    #[tokio::test]
    async fn bad_plans_and_bands_are_named() {
        for (query, needle) in [
            (
                "SELECT band_key(arrow_cast(1, 'UInt64'), 5, 'bands:4')",
                "band 5",
            ),
            (
                "SELECT band_key(arrow_cast(1, 'UInt64'), 1, 'lsh:3')",
                "unknown plan",
            ),
            (
                "SELECT band_key(arrow_cast(1, 'UInt64'), 1, 'mih')",
                "must name all its numbers",
            ),
        ] {
            let err = async { context().sql(query).await?.collect().await }
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{query}: {err}");
        }
    }
}
