//! `band_pairs(simhash, band, k [, plan [, fresh]])`, an aggregate: the pairs among a group's
//! fingerprints that share table `band` of the band plan `plan` (`crate::plan`; 16-bit bands
//! when left out), differ in at most `k` bits, and share no earlier table, as a list of structs
//! `{simhash_a, simhash_b}` with `simhash_a < simhash_b`. With `fresh` (a boolean per row), only
//! pairs with at least one fresh member: a batch against a signature index compares its own
//! fingerprints with everything, never the index with itself.
//!
//! This is the candidate step of the `scan` matching strategy. SQL groups each band's rows by a
//! coarse slice of the band key (so equal keys meet in one group and the groups spread over the
//! cores); the function then does what a sort-and-scan does: sort the group by the table's bits,
//! compare every two fingerprints inside a run of equal values with one popcount, and keep a pair
//! only in the first table it shares, so it is found once. Candidates are never rows.
//! Stateless (band, k and plan are arguments), so a cluster runs it like any aggregate.

use std::marker::PhantomData;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, ListArray, StructArray, UInt64Array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::cast::{
    as_boolean_array, as_fixed_size_binary_array, as_int64_array, as_list_array, as_string_array,
    as_uint64_array,
};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility,
};

use crate::fingerprint::Fingerprint;
use crate::plan::BandPlan;
use crate::udf::hamming::wide_value;

static BAND_PAIRS: LazyLock<Arc<AggregateUDF>> =
    LazyLock::new(|| Arc::new(AggregateUDF::new_from_impl(BandPairsFunc::new())));

/// The `band_pairs` SQL aggregate function.
pub fn band_pairs_udaf() -> Arc<AggregateUDF> {
    Arc::clone(&BAND_PAIRS)
}

/// A fingerprint width as an Arrow column: UInt64, or FixedSizeBinary(16) big-endian.
pub(crate) trait FingerprintColumn: Fingerprint {
    fn data_type() -> DataType;
    /// The non-NULL values of a column.
    fn values(array: &ArrayRef) -> Result<Vec<Self>>;
    fn column(values: &[Self]) -> Result<ArrayRef>;
}

impl FingerprintColumn for u64 {
    fn data_type() -> DataType {
        DataType::UInt64
    }
    fn values(array: &ArrayRef) -> Result<Vec<Self>> {
        Ok(as_uint64_array(array)?.iter().flatten().collect())
    }
    fn column(values: &[Self]) -> Result<ArrayRef> {
        Ok(Arc::new(UInt64Array::from_iter_values(
            values.iter().copied(),
        )))
    }
}

impl FingerprintColumn for u128 {
    fn data_type() -> DataType {
        DataType::FixedSizeBinary(16)
    }
    fn values(array: &ArrayRef) -> Result<Vec<Self>> {
        Ok(as_fixed_size_binary_array(array)?
            .iter()
            .filter_map(|v| wide_value(v?))
            .collect())
    }
    fn column(values: &[Self]) -> Result<ArrayRef> {
        // The sparse constructor, unlike `try_from_iter`, accepts an empty list.
        let bytes = values.iter().map(|v| Some(v.to_be_bytes()));
        Ok(Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(bytes, 16)?,
        ))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BandPairsFunc {
    signature: Signature,
}

impl BandPairsFunc {
    fn new() -> Self {
        let mut signatures = Vec::new();
        for fingerprint in [DataType::UInt64, DataType::FixedSizeBinary(16)] {
            let three = vec![fingerprint, DataType::Int64, DataType::Int64];
            let mut four = three.clone();
            four.push(DataType::Utf8);
            let mut five = four.clone();
            five.push(DataType::Boolean);
            signatures.push(TypeSignature::Exact(three));
            signatures.push(TypeSignature::Exact(four));
            signatures.push(TypeSignature::Exact(five));
        }
        Self {
            signature: Signature::one_of(signatures, Volatility::Immutable),
        }
    }
}

fn pair_fields(fingerprint: &DataType) -> Fields {
    Fields::from(vec![
        Field::new("simhash_a", fingerprint.clone(), false),
        Field::new("simhash_b", fingerprint.clone(), false),
    ])
}

fn list_of_pairs(fingerprint: &DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(
        DataType::Struct(pair_fields(fingerprint)),
        true,
    )))
}

fn list_of(fingerprint: &DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(fingerprint.clone(), true)))
}

/// The fingerprint type inside the aggregate's return type.
fn fingerprint_of(return_type: &DataType) -> DataType {
    match return_type {
        DataType::List(item) => match item.data_type() {
            DataType::Struct(fields) => fields
                .first()
                .map_or(DataType::UInt64, |f| f.data_type().clone()),
            _ => DataType::UInt64,
        },
        _ => DataType::UInt64,
    }
}

impl AggregateUDFImpl for BandPairsFunc {
    fn name(&self) -> &str {
        "band_pairs"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let fingerprint = arg_types.first().cloned().unwrap_or(DataType::UInt64);
        Ok(list_of_pairs(&fingerprint))
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(match fingerprint_of(args.return_field.data_type()) {
            DataType::FixedSizeBinary(16) => Box::new(BandPairs::<u128>::default()),
            _ => Box::new(BandPairs::<u64>::default()),
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let fingerprint = args
            .input_fields
            .first()
            .map_or(DataType::UInt64, |f| f.data_type().clone());
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[fingerprints]", args.name),
                list_of(&fingerprint),
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
            Arc::new(Field::new(
                format!("{}[plan]", args.name),
                DataType::Utf8,
                true,
            )),
            Arc::new(Field::new(
                format!("{}[fresh]", args.name),
                list_of(&DataType::Boolean),
                true,
            )),
        ])
    }
}

/// The fingerprints of one group, and the band, k and plan they are compared at.
#[derive(Debug)]
struct BandPairs<F> {
    fingerprints: Vec<F>,
    /// Whether each fingerprint is fresh; empty when the call has no `fresh` (all are).
    fresh: Vec<bool>,
    band: Option<i64>,
    k: Option<i64>,
    /// The canonical plan; 16-bit bands when the call leaves it out.
    plan: Option<String>,
    width: PhantomData<F>,
}

impl<F> Default for BandPairs<F> {
    fn default() -> Self {
        Self {
            fingerprints: Vec::new(),
            fresh: Vec::new(),
            band: None,
            k: None,
            plan: None,
            width: PhantomData,
        }
    }
}

impl<F: FingerprintColumn> BandPairs<F> {
    fn note_parameters(
        &mut self,
        band: &ArrayRef,
        k: &ArrayRef,
        plan: Option<&ArrayRef>,
    ) -> Result<()> {
        let (band, k) = (as_int64_array(band)?, as_int64_array(k)?);
        if self.band.is_none() {
            self.band = band.iter().flatten().next();
        }
        if self.k.is_none() {
            self.k = k.iter().flatten().next();
        }
        if let (None, Some(plan)) = (&self.plan, plan) {
            self.plan = as_string_array(plan)?
                .iter()
                .flatten()
                .next()
                .map(str::to_string);
        }
        Ok(())
    }

    /// Sort-and-scan over the group: runs of equal table bits, one popcount per two members.
    fn pairs(&mut self) -> Result<Vec<(F, F)>> {
        let (Some(band_index), Some(k)) = (self.band, self.k) else {
            return Ok(Vec::new());
        };
        let plan = match &self.plan {
            Some(spec) => match BandPlan::cached(spec, F::BITS) {
                Ok(plan) => plan,
                Err(e) => return exec_err!("band_pairs: {e}"),
            },
            None => Arc::new(BandPlan::default_bands(F::BITS)),
        };
        let mask = usize::try_from(band_index)
            .ok()
            .and_then(|band| plan.mask(band));
        let Some(mask) = mask else {
            return exec_err!(
                "band_pairs: band {band_index} is not a table of plan {plan} (1..={})",
                plan.tables()
            );
        };
        // Beyond the plan's k some pairs share no table: refuse rather than miss them.
        if !(0..=i64::from(plan.max_k())).contains(&k) {
            return exec_err!(
                "band_pairs: k = {k} but plan {plan} finds every pair only up to k = {}",
                plan.max_k()
            );
        }
        let (band_index, k) = (band_index as usize, k as u32);
        if !self.fresh.is_empty() && self.fresh.len() != self.fingerprints.len() {
            return exec_err!("band_pairs: fresh must be given for every row or none");
        }
        let fresh = |i: usize| self.fresh.get(i).copied().unwrap_or(true);
        let mut keyed: Vec<(F, F, bool)> = self
            .fingerprints
            .iter()
            .enumerate()
            .map(|(i, &f)| (f.masked(mask), f, fresh(i)))
            .collect();
        keyed.sort_unstable();
        // A fingerprint listed twice is fresh if either row says so.
        keyed.dedup_by(|later, kept| {
            let same = later.1 == kept.1;
            kept.2 |= same && later.2;
            same
        });
        let mut pairs = Vec::new();
        let mut keep = |a: F, b: F| {
            if a.hamming(b) <= k && plan.first_shared_band(a.widen(), b.widen()) == Some(band_index)
            {
                pairs.push((a, b));
            }
        };
        let mut fresh_members = Vec::new();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            fresh_members.clear();
            fresh_members.extend((0..run.len()).filter(|&i| run[i].2));
            if fresh_members.len() == run.len() {
                for (i, &(_, a, _)) in run.iter().enumerate() {
                    for &(_, b, _) in &run[i + 1..] {
                        keep(a, b);
                    }
                }
                continue;
            }
            // Some members are not fresh: each fresh one against the run, a pair of two fresh
            // ones from the first of them, so the work grows with the fresh members only. Runs
            // are sorted by fingerprint, so the earlier member is the smaller.
            for &i in &fresh_members {
                let a = run[i].1;
                for (j, &(_, b, b_fresh)) in run.iter().enumerate() {
                    if j == i || (b_fresh && j < i) {
                        continue;
                    }
                    if j < i { keep(b, a) } else { keep(a, b) }
                }
            }
        }
        Ok(pairs)
    }
}

impl<F: FingerprintColumn> Accumulator for BandPairs<F> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let fingerprints = F::values(&values[0])?;
        if let Some(fresh) = values.get(4) {
            // Aligned with the non-NULL fingerprints (the rows F::values keeps).
            let fresh = as_boolean_array(fresh)?;
            let kept = (0..values[0].len()).filter(|&i| values[0].is_valid(i));
            self.fresh
                .extend(kept.map(|i| fresh.is_valid(i) && fresh.value(i)));
        }
        self.fingerprints.extend(fingerprints);
        self.note_parameters(&values[1], &values[2], values.get(3))
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = as_list_array(&states[0])?;
        let fresh_lists = as_list_array(&states[4])?;
        for (list, fresh) in lists.iter().zip(fresh_lists.iter()) {
            let Some(list) = list else { continue };
            let fingerprints = F::values(&list)?;
            if let Some(fresh) = fresh.filter(|f| !f.is_empty()) {
                self.fresh
                    .extend(as_boolean_array(&fresh)?.iter().map(|f| f == Some(true)));
            }
            self.fingerprints.extend(fingerprints);
        }
        self.note_parameters(&states[1], &states[2], states.get(3))
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let fingerprints = F::column(&std::mem::take(&mut self.fingerprints))?;
        let list = ListArray::new(
            Arc::new(Field::new_list_field(F::data_type(), true)),
            OffsetBuffer::from_lengths([fingerprints.len()]),
            fingerprints,
            None,
        );
        let fresh = BooleanArray::from(std::mem::take(&mut self.fresh));
        let fresh = ListArray::new(
            Arc::new(Field::new_list_field(DataType::Boolean, true)),
            OffsetBuffer::from_lengths([fresh.len()]),
            Arc::new(fresh),
            None,
        );
        Ok(vec![
            ScalarValue::List(Arc::new(list)),
            ScalarValue::Int64(self.band),
            ScalarValue::Int64(self.k),
            ScalarValue::Utf8(self.plan.clone()),
            ScalarValue::List(Arc::new(fresh)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let pairs = self.pairs()?;
        let a: Vec<F> = pairs.iter().map(|p| p.0).collect();
        let b: Vec<F> = pairs.iter().map(|p| p.1).collect();
        let fields = pair_fields(&F::data_type());
        let structs = StructArray::new(fields.clone(), vec![F::column(&a)?, F::column(&b)?], None);
        let list = ListArray::new(
            Arc::new(Field::new_list_field(DataType::Struct(fields), true)),
            OffsetBuffer::from_lengths([structs.len()]),
            Arc::new(structs),
            None,
        );
        Ok(ScalarValue::List(Arc::new(list)))
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.fingerprints.capacity() * size_of::<F>() + self.fresh.capacity()
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

    /// Every table's pairs together are exactly the brute-force pairs within k, each once, for
    /// 128-bit fingerprints up to k = 11, with planted neighbours at every distance.
    #[test]
    fn wide_fingerprints_all_pairs_within_seven_bits_once() {
        use super::BandPairs;
        use crate::fingerprint::Fingerprint;
        let mut random = crate::rng::SplitMix64(0x128);
        let mut wide = || (u128::from(random.next_u64()) << 64) | u128::from(random.next_u64());
        let mut fingerprints: Vec<u128> = Vec::new();
        for _ in 0..60 {
            let base = wide();
            fingerprints.push(base);
            // Neighbours at distances 1..=12, each bit flipped somewhere random.
            for distance in 1..=12u32 {
                let mut f = base;
                for step in 0..distance {
                    f ^= 1u128 << ((wide() as u32 ^ step.wrapping_mul(37)) % 128);
                }
                fingerprints.push(f);
            }
        }
        fingerprints.sort_unstable();
        fingerprints.dedup();
        // Eight 16-bit bands up to k = 7; six multi-index substrings at radius 1 up to k = 11.
        let plans = [
            (None, 8, [0u32, 3, 5, 7]),
            (Some("mih:6:1"), 128, [1, 8, 9, 11]),
        ];
        for (k, plan, tables) in plans
            .iter()
            .flat_map(|&(plan, tables, ks)| ks.map(|k| (k, plan, tables)))
        {
            let mut found = Vec::new();
            for band in 1..=tables {
                let mut group = BandPairs::<u128> {
                    fingerprints: fingerprints.clone(),
                    band: Some(band),
                    k: Some(i64::from(k)),
                    plan: plan.map(str::to_string),
                    ..Default::default()
                };
                found.extend(group.pairs().unwrap());
            }
            let mut brute = Vec::new();
            for (i, &a) in fingerprints.iter().enumerate() {
                for &b in &fingerprints[i + 1..] {
                    if a.hamming(b) <= k {
                        brute.push((a, b));
                    }
                }
            }
            let total = found.len();
            found.sort_unstable();
            found.dedup();
            assert_eq!(found.len(), total, "k = {k}: a pair found twice");
            assert_eq!(found, brute, "k = {k}");
        }
    }

    /// With `fresh`, every table's pairs together are the brute-force pairs within k that have
    /// a fresh member, each once.
    #[test]
    fn fresh_pairs_are_the_pairs_with_a_fresh_member() {
        use super::BandPairs;
        use crate::fingerprint::Fingerprint;
        let mut random = crate::rng::SplitMix64(0xF7E5);
        let mut fingerprints: Vec<u64> = Vec::new();
        for _ in 0..300 {
            let base = random.next_u64();
            fingerprints.push(base);
            for distance in 1..=4 {
                let mut f = base;
                for _ in 0..distance {
                    f ^= 1 << (random.next_u64() % 64);
                }
                fingerprints.push(f);
            }
        }
        fingerprints.sort_unstable();
        fingerprints.dedup();
        let fresh: Vec<bool> = fingerprints
            .iter()
            .map(|_| random.next_u64().is_multiple_of(4))
            .collect();
        let is_fresh: std::collections::HashMap<u64, bool> = fingerprints
            .iter()
            .copied()
            .zip(fresh.iter().copied())
            .collect();
        let mut found = Vec::new();
        for band in 1..=4 {
            let mut group = BandPairs::<u64> {
                fingerprints: fingerprints.clone(),
                fresh: fresh.clone(),
                band: Some(band),
                k: Some(3),
                ..Default::default()
            };
            found.extend(group.pairs().unwrap());
        }
        let mut brute = Vec::new();
        for (i, &a) in fingerprints.iter().enumerate() {
            for &b in &fingerprints[i + 1..] {
                if a.hamming(b) <= 3 && (is_fresh[&a] || is_fresh[&b]) {
                    brute.push((a, b));
                }
            }
        }
        let total = found.len();
        found.sort_unstable();
        found.dedup();
        assert_eq!(found.len(), total, "a pair found twice");
        assert!(brute.len() > 100, "the data must have fresh pairs");
        assert_eq!(found, brute);
    }

    #[tokio::test]
    async fn k_filters_inside_the_group() {
        assert!(pairs_at(1, 0).await.is_empty());
        assert_eq!(pairs_at(1, 1).await.len(), 1);
        // The third fingerprint shares band 1 but is too far even at the bands' largest k.
        assert_eq!(pairs_at(1, 3).await.len(), 1);
        // Beyond it the four bands would miss pairs: refused, not answered wrongly.
        let err = async {
            crate::udf::test_util::context()
                .sql("SELECT band_pairs(arrow_cast(1, 'UInt64'), 1, 4)")
                .await?
                .collect()
                .await
        }
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("only up to k = 3"), "{err}");
    }
}
