//! `sketch_similarity(a, b) -> Float64`: the Jaccard similarity of two documents' feature sets,
//! estimated from their sketches (`simhash_sketch(text)['sketch']`, the `sketch` column of
//! `signatures`); NULL when either is NULL, or when neither document has a feature.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{
    Array, ArrayRef, FixedSizeBinaryArray, Float64Array, Float64Builder,
};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::as_fixed_size_binary_array;
use datafusion::common::{ScalarValue, exec_err, utils::take_function_args};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::text::sketch::{SKETCH_BYTES, similarity};

static SIMILARITY: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(SimilarityFunc::new())));

/// The `sketch_similarity` SQL function.
pub fn sketch_similarity_udf() -> Arc<ScalarUDF> {
    Arc::clone(&SIMILARITY)
}

/// The Arrow type of a sketch.
pub fn sketch_type() -> DataType {
    DataType::FixedSizeBinary(SKETCH_BYTES as i32)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SimilarityFunc {
    signature: Signature,
}

impl SimilarityFunc {
    fn new() -> Self {
        // Declared volatile although it is a pure function: the optimizer never copies a
        // volatile call. Otherwise `WHERE similarity >= t` over `sketch_similarity(..) AS
        // similarity` is pushed into the join below as its filter, and every candidate pair's
        // similarity is computed twice, in the join and in the projection (sql/04_verify.sql).
        Self {
            signature: Signature::exact(vec![sketch_type(), sketch_type()], Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for SimilarityFunc {
    fn name(&self) -> &str {
        "sketch_similarity"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [a, b] = take_function_args(self.name(), &args.args)?;
        if let (ColumnarValue::Scalar(a), ColumnarValue::Scalar(b)) = (a, b) {
            let value = match (a, b) {
                (ScalarValue::FixedSizeBinary(_, a), ScalarValue::FixedSizeBinary(_, b)) => {
                    match (a, b) {
                        (Some(a), Some(b)) => similarity(a, b),
                        _ => None,
                    }
                }
                _ => return exec_err!("sketch_similarity expects two sketches"),
            };
            return Ok(ColumnarValue::Scalar(ScalarValue::Float64(value)));
        }
        // One side may be a scalar (one document's sketch against a column): broadcast it.
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (a, b) = (
            as_fixed_size_binary_array(&arrays[0])?,
            as_fixed_size_binary_array(&arrays[1])?,
        );
        let values = similarities(a, b);
        Ok(ColumnarValue::Array(Arc::new(values) as ArrayRef))
    }
}

/// The similarity of each row's two sketches: two popcounts per word of a sketch, once per
/// candidate pair, so the loop is compiled a second time for the CPU's POPCNT and that copy is
/// picked when the CPU has it (as the scan of `band_pairs`, which says why).
fn similarities(a: &FixedSizeBinaryArray, b: &FixedSizeBinaryArray) -> Float64Array {
    let rows = a.len().min(b.len());
    similarities_by(rows, |row| {
        (a.is_valid(row) && b.is_valid(row)).then(|| (a.value(row), b.value(row)))
    })
}

/// The similarity of the two sketches `sketches` gives for each of `rows` rows (NULL where it
/// gives none): `sketch_similarity` over two columns, and verification over sketches held in
/// memory (`crate::job::verify`).
pub(crate) fn similarities_by<'s>(
    rows: usize,
    sketches: impl Fn(usize) -> Option<(&'s [u8], &'s [u8])>,
) -> Float64Array {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT, the only feature the copy assumes.
        return unsafe { similarities_with_popcnt(rows, sketches) };
    }
    similarities_portable(rows, sketches)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn similarities_with_popcnt<'s>(
    rows: usize,
    sketches: impl Fn(usize) -> Option<(&'s [u8], &'s [u8])>,
) -> Float64Array {
    similarities_portable(rows, sketches)
}

/// A loop, not an iterator of closures: a closure would be compiled without the feature (the
/// one given only finds the two sketches; the popcounts are here).
#[inline(always)]
fn similarities_portable<'s>(
    rows: usize,
    sketches: impl Fn(usize) -> Option<(&'s [u8], &'s [u8])>,
) -> Float64Array {
    let mut values = Float64Builder::with_capacity(rows);
    for row in 0..rows {
        let value = match sketches(row) {
            Some((a, b)) => similarity(a, b),
            None => None,
        };
        values.append_option(value);
    }
    values.finish()
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::Float64Type;

    use crate::udf::test_util::sql;

    #[tokio::test]
    async fn similar_texts_score_high_and_different_ones_low() {
        let same = "Debian is a free operating system for your computer, made by volunteers";
        let edited = "Debian is a free operating system for your computers, made by volunteers";
        let other = "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。";
        let batches = sql(&format!(
            "SELECT sketch_similarity(simhash_sketch('{same}')['sketch'], \
                                      simhash_sketch('{same}')['sketch']), \
                    sketch_similarity(simhash_sketch('{same}')['sketch'], \
                                      simhash_sketch('{edited}')['sketch']), \
                    sketch_similarity(simhash_sketch('{same}')['sketch'], \
                                      simhash_sketch('{other}')['sketch']), \
                    sketch_similarity(simhash_sketch('{same}')['sketch'], NULL)"
        ))
        .await;
        let value = |i: usize| batches[0].column(i).as_primitive::<Float64Type>().value(0);
        assert_eq!(value(0), 1.0);
        assert!(value(1) > 0.75 && value(1) < 1.0, "{}", value(1));
        assert!(value(2) < 0.1, "{}", value(2));
        assert!(batches[0].column(3).is_null(0));
    }

    /// The copy compiled for POPCNT and the portable copy give the same value for every row,
    /// NULLs included, and both equal the one-pair function.
    #[test]
    fn the_popcnt_and_portable_loops_agree() {
        use datafusion::arrow::array::FixedSizeBinaryArray;

        use super::{similarities, similarities_portable};
        use crate::text::sketch::{SKETCH_BYTES, similarity};

        let mut random = crate::rng::SplitMix64(0x51A);
        let mut sketch = || {
            let mut bytes = [0u8; SKETCH_BYTES];
            for pair in bytes.chunks_mut(2) {
                // Few distinct values, many empty bins: rows agree and differ in both ways.
                let bin = (random.next_u64() % 4) as u16;
                pair.copy_from_slice(&bin.to_le_bytes());
            }
            bytes
        };
        let rows: Vec<Option<[u8; SKETCH_BYTES]>> =
            (0..300).map(|i| (i % 7 != 0).then(&mut sketch)).collect();
        let column = |rows: &[Option<[u8; SKETCH_BYTES]>]| {
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                rows.iter().map(|r| r.as_ref().map(|b| b.as_slice())),
                SKETCH_BYTES as i32,
            )
            .unwrap()
        };
        let mut shifted = rows.clone();
        shifted.rotate_left(1);
        let (a, b) = (column(&rows), column(&shifted));
        let expected: Vec<Option<f64>> = rows
            .iter()
            .zip(&shifted)
            .map(|(x, y)| similarity(x.as_ref()?, y.as_ref()?))
            .collect();
        assert!(expected.iter().flatten().count() > 200);
        let values =
            |array: datafusion::arrow::array::Float64Array| array.iter().collect::<Vec<_>>();
        assert_eq!(values(similarities(&a, &b)), expected);
        let pair = |row: usize| {
            Some((
                rows[row].as_ref()?.as_slice(),
                shifted[row].as_ref()?.as_slice(),
            ))
        };
        assert_eq!(values(similarities_portable(rows.len(), pair)), expected);
    }
}
