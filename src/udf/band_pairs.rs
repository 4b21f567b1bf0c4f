//! `band_pairs(simhash, band, k)`, an aggregate: the pairs among a group's fingerprints that
//! agree on band `band`, differ in at most `k` bits, and share no earlier band, as a list of
//! structs `{simhash_a, simhash_b}` with `simhash_a < simhash_b`.
//!
//! This is the candidate step of the `scan` matching strategy. SQL groups each band's rows by a
//! coarse slice of the band value (so equal band values meet in one group and the groups spread
//! over the cores); the function then does what a sort-and-scan does: sort the group by band
//! value, compare every two fingerprints inside a run of equal values with one popcount, and keep
//! a pair only in the first band it shares, so it is found once. Candidates are never rows.
//! Stateless (band and k are arguments), so a cluster runs it like any aggregate.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, ListArray, StructArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::cast::{as_int64_array, as_list_array, as_uint64_array};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

use crate::fingerprint::{BANDS, band, first_shared_band, hamming};

static BAND_PAIRS: LazyLock<Arc<AggregateUDF>> =
    LazyLock::new(|| Arc::new(AggregateUDF::new_from_impl(BandPairsFunc::new())));

/// The `band_pairs` SQL aggregate function.
pub fn band_pairs_udaf() -> Arc<AggregateUDF> {
    Arc::clone(&BAND_PAIRS)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BandPairsFunc {
    signature: Signature,
}

impl BandPairsFunc {
    fn new() -> Self {
        Self {
            signature: Signature::exact(
                vec![DataType::UInt64, DataType::Int64, DataType::Int64],
                Volatility::Immutable,
            ),
        }
    }
}

fn pair_fields() -> Fields {
    Fields::from(vec![
        Field::new("simhash_a", DataType::UInt64, false),
        Field::new("simhash_b", DataType::UInt64, false),
    ])
}

fn list_of_pairs() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(
        DataType::Struct(pair_fields()),
        true,
    )))
}

fn list_of_fingerprints() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::UInt64, true)))
}

impl AggregateUDFImpl for BandPairsFunc {
    fn name(&self) -> &str {
        "band_pairs"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(list_of_pairs())
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(BandPairs::default()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[fingerprints]", args.name),
                list_of_fingerprints(),
                true,
            )),
            Arc::new(Field::new(
                format!("{}[band]", args.name),
                DataType::Int64,
                true,
            )),
            Arc::new(Field::new(
                format!("{}[k]", args.name),
                DataType::Int64,
                true,
            )),
        ])
    }
}

/// The fingerprints of one group, and the band and k they are compared at.
#[derive(Debug, Default)]
struct BandPairs {
    fingerprints: Vec<u64>,
    band: Option<i64>,
    k: Option<i64>,
}

impl BandPairs {
    fn note_parameters(&mut self, band: &ArrayRef, k: &ArrayRef) -> Result<()> {
        let (band, k) = (as_int64_array(band)?, as_int64_array(k)?);
        if self.band.is_none() {
            self.band = band.iter().flatten().next();
        }
        if self.k.is_none() {
            self.k = k.iter().flatten().next();
        }
        Ok(())
    }

    /// Sort-and-scan over the group: runs of equal band value, one popcount per two members.
    fn pairs(&mut self) -> Result<Vec<(u64, u64)>> {
        let (Some(band_index), Some(k)) = (self.band, self.k) else {
            return Ok(Vec::new());
        };
        if !(1..=BANDS as i64).contains(&band_index) || !(0..=64).contains(&k) {
            return exec_err!("band_pairs: band must be in 1..={BANDS} and k in 0..=64");
        }
        let (band_index, k) = (band_index as usize, k as u32);
        let mut keyed: Vec<(u16, u64)> = self
            .fingerprints
            .iter()
            .map(|&f| (band(f, band_index).unwrap_or(0), f))
            .collect();
        keyed.sort_unstable();
        keyed.dedup();
        let mut pairs = Vec::new();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            for (i, &(_, a)) in run.iter().enumerate() {
                for &(_, b) in &run[i + 1..] {
                    if hamming(a, b) <= k && first_shared_band(a, b) == Some(band_index) {
                        pairs.push((a, b));
                    }
                }
            }
        }
        Ok(pairs)
    }
}

impl Accumulator for BandPairs {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let fingerprints = as_uint64_array(&values[0])?;
        self.fingerprints.extend(fingerprints.iter().flatten());
        self.note_parameters(&values[1], &values[2])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = as_list_array(&states[0])?;
        for list in lists.iter().flatten() {
            self.fingerprints
                .extend(as_uint64_array(&list)?.iter().flatten());
        }
        self.note_parameters(&states[1], &states[2])
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let fingerprints = UInt64Array::from(std::mem::take(&mut self.fingerprints));
        let list = ListArray::new(
            Arc::new(Field::new_list_field(DataType::UInt64, true)),
            OffsetBuffer::from_lengths([fingerprints.len()]),
            Arc::new(fingerprints),
            None,
        );
        Ok(vec![
            ScalarValue::List(Arc::new(list)),
            ScalarValue::Int64(self.band),
            ScalarValue::Int64(self.k),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let pairs = self.pairs()?;
        let a = UInt64Array::from_iter_values(pairs.iter().map(|p| p.0));
        let b = UInt64Array::from_iter_values(pairs.iter().map(|p| p.1));
        let structs = StructArray::new(
            pair_fields(),
            vec![Arc::new(a) as ArrayRef, Arc::new(b) as ArrayRef],
            None,
        );
        let list = ListArray::new(
            Arc::new(Field::new_list_field(DataType::Struct(pair_fields()), true)),
            OffsetBuffer::from_lengths([structs.len()]),
            Arc::new(structs),
            None,
        );
        Ok(ScalarValue::List(Arc::new(list)))
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.fingerprints.capacity() * size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::UInt64Type;

    use crate::udf::test_util::sql;

    /// The pairs `band_pairs` returns for three fingerprints at one band, sorted.
    async fn pairs_at(band: i64, k: i64) -> Vec<(u64, u64)> {
        // 0x1111222233334444, the same with its lowest bit flipped (distance 1: they share bands
        // 1 to 3, not band 4), and 0x1111999999999999 (shares only band 1, distance > 3).
        let batches = sql(&format!(
            "SELECT band_pairs(f, {band}, {k}) FROM (VALUES \
             (arrow_cast(1229801703532086340, 'UInt64')), \
             (arrow_cast(1229801703532086341, 'UInt64')), \
             (arrow_cast(1229933058234882457, 'UInt64'))) AS v(f)"
        ))
        .await;
        let list = batches[0].column(0).as_list::<i32>();
        let structs = list.value(0);
        let structs = structs.as_struct();
        let a = structs.column(0).as_primitive::<UInt64Type>();
        let b = structs.column(1).as_primitive::<UInt64Type>();
        let mut pairs: Vec<(u64, u64)> = (0..structs.len())
            .map(|i| (a.value(i), b.value(i)))
            .collect();
        pairs.sort_unstable();
        pairs
    }

    #[tokio::test]
    async fn a_pair_is_found_in_its_first_shared_band_only() {
        let expected = vec![(0x1111_2222_3333_4444, 0x1111_2222_3333_4445)];
        assert_eq!(pairs_at(1, 3).await, expected);
        // Bands 2 and 3 are shared too, but band 1 came first; band 4 is not shared.
        for band in 2..=4 {
            assert!(pairs_at(band, 3).await.is_empty(), "band {band}");
        }
    }

    #[tokio::test]
    async fn k_filters_inside_the_group() {
        assert!(pairs_at(1, 0).await.is_empty());
        assert_eq!(pairs_at(1, 1).await.len(), 1);
        // At k = 64 every two fingerprints sharing band 1 are a pair: all three do.
        assert_eq!(pairs_at(1, 64).await.len(), 3);
    }
}
