//! `simhash(text) -> UInt64`: the 64-bit SimHash of a document (see `crate::text` for the
//! features). NULL for NULL and for text with nothing to fingerprint.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, StringArrayType, UInt64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::{as_large_string_array, as_string_array, as_string_view_array};
use datafusion::common::types::logical_string;
use datafusion::common::{ScalarValue, exec_err, utils::take_function_args};
use datafusion::error::Result;
use datafusion::logical_expr::{
    Coercion, ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignatureClass, Volatility,
};

use crate::fingerprint::SimHasher;
use crate::text;

static SIMHASH: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(SimhashFunc::new())));

/// The `simhash` SQL function.
pub fn simhash_udf() -> Arc<ScalarUDF> {
    Arc::clone(&SIMHASH)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SimhashFunc {
    signature: Signature,
}

impl SimhashFunc {
    fn new() -> Self {
        Self {
            // Text only: a number is not silently turned into a document.
            signature: Signature::coercible(
                vec![Coercion::new_exact(TypeSignatureClass::Native(
                    logical_string(),
                ))],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for SimhashFunc {
    fn name(&self) -> &str {
        "simhash"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [text] = take_function_args(self.name(), args.args)?;
        match text {
            ColumnarValue::Scalar(scalar) => {
                let hash = match &scalar {
                    ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => {
                        s.as_deref().and_then(text::simhash)
                    }
                    ScalarValue::Null => None,
                    other => return exec_err!("simhash expects text, got {}", other.data_type()),
                };
                Ok(ColumnarValue::Scalar(ScalarValue::UInt64(hash)))
            }
            ColumnarValue::Array(array) => {
                let hashes: ArrayRef = match array.data_type() {
                    DataType::Utf8 => Arc::new(simhash_array(as_string_array(&array)?)),
                    DataType::LargeUtf8 => Arc::new(simhash_array(as_large_string_array(&array)?)),
                    DataType::Utf8View => Arc::new(simhash_array(as_string_view_array(&array)?)),
                    DataType::Null => Arc::new(UInt64Array::new_null(array.len())),
                    other => return exec_err!("simhash expects text, got {other}"),
                };
                Ok(ColumnarValue::Array(hashes))
            }
        }
    }
}

/// One hasher reused across the rows of a batch.
fn simhash_array<'a, S: StringArrayType<'a>>(texts: S) -> UInt64Array {
    let mut hasher = SimHasher::default();
    texts
        .iter()
        .map(|t| {
            let t = t?;
            hasher.reset();
            text::add_features(t, &mut hasher);
            hasher.finish()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::UInt64Type;

    use crate::udf::test_util::sql;

    const EN: &str = "Debian is a free operating system for your computer";
    const ZH: &str = "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。";

    async fn one(sql_text: &str) -> Option<u64> {
        let batches = sql(sql_text).await;
        let col = batches[0].column(0).as_primitive::<UInt64Type>();
        assert_eq!(col.len(), 1);
        col.is_valid(0).then(|| col.value(0))
    }

    #[tokio::test]
    async fn golden_fingerprints() {
        // Pinned: a change here silently invalidates every fingerprint users have stored.
        let en = one(&format!("SELECT simhash('{EN}')")).await;
        let zh = one(&format!("SELECT simhash('{ZH}')")).await;
        assert_eq!(en, crate::text::simhash(EN));
        assert_eq!(zh, crate::text::simhash(ZH));
        assert_eq!(en, Some(GOLDEN_EN));
        assert_eq!(zh, Some(GOLDEN_ZH));
    }

    const GOLDEN_EN: u64 = 13470020231536659540;
    const GOLDEN_ZH: u64 = 16606383399977123484;

    #[tokio::test]
    async fn every_string_type_same_answer_and_null_in_null_out() {
        for ty in ["Utf8", "LargeUtf8", "Utf8View"] {
            let batches = sql(&format!(
                "SELECT simhash(arrow_cast(t, '{ty}')) FROM (VALUES ('{EN}'), (NULL), (''), ('{ZH}')) AS v(t)"
            ))
            .await;
            let col = batches[0].column(0).as_primitive::<UInt64Type>();
            let got: Vec<Option<u64>> = col.iter().collect();
            assert_eq!(
                got,
                vec![
                    crate::text::simhash(EN),
                    None,
                    None,
                    crate::text::simhash(ZH)
                ],
                "{ty}"
            );
        }
    }

    #[tokio::test]
    async fn scalar_null_and_empty() {
        assert_eq!(one("SELECT simhash(NULL)").await, None);
        assert_eq!(one("SELECT simhash('')").await, None);
        assert_eq!(
            one("SELECT simhash(arrow_cast('  ', 'LargeUtf8'))").await,
            None
        );
    }

    #[tokio::test]
    async fn wrong_type_is_a_plan_error() {
        let ctx = crate::udf::test_util::context();
        let err = ctx
            .sql("SELECT simhash(42)")
            .await
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("simhash")));
    }
}
