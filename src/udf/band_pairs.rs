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
    Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, Int64Array, ListArray, StringArray,
    StructArray, UInt64Array,
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
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature,
    TypeSignature, Volatility,
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
    /// Calls `each` with the row number and value of every non-NULL row.
    fn for_each_value(array: &ArrayRef, each: impl FnMut(usize, Self)) -> Result<()>;
    fn column(values: &[Self]) -> Result<ArrayRef>;
    /// Appends the non-NULL values of a column to `into`.
    fn extend_values(array: &ArrayRef, into: &mut Vec<Self>) -> Result<()> {
        into.extend(Self::values(array)?);
        Ok(())
    }
    /// A column that takes over `values` where the width allows (no copy).
    fn into_column(values: Vec<Self>) -> Result<ArrayRef> {
        Self::column(&values)
    }
    /// Calls `keep` with every two members of `run` within `k` bits, the earlier in `run`
    /// first. Inlined, so that the loop gets the CPU features of the scan it is compiled into.
    #[inline(always)]
    fn pairs_within(run: &[Self], k: u32, keep: &mut impl FnMut(Self, Self)) {
        pairs_within_one_by_one(run, k, keep);
    }
}

/// `FingerprintColumn::pairs_within`, one comparison at a time.
#[inline(always)]
fn pairs_within_one_by_one<F: Fingerprint>(run: &[F], k: u32, keep: &mut impl FnMut(F, F)) {
    for (i, &a) in run.iter().enumerate() {
        for &b in &run[i + 1..] {
            if a.hamming(b) <= k {
                keep(a, b);
            }
        }
    }
}

/// The Hamming filter eight fingerprints at a time, on CPUs with AVX-512's 64-bit popcount
/// (Intel since Ice Lake, AMD since Zen 4). Most candidates in a run are not within k, so the
/// comparisons, not the pairs kept, are the scan's time: at k = 7 a run of a few dozen members
/// holds hundreds of comparisons for every pair found.
#[cfg(target_arch = "x86_64")]
mod eight_at_once {
    use std::arch::x86_64::{
        __mmask8, _mm512_mask_cmple_epu64_mask, _mm512_maskz_loadu_epi64, _mm512_popcnt_epi64,
        _mm512_set1_epi64, _mm512_xor_si512,
    };

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
    }

    /// `FingerprintColumn::pairs_within` for 64-bit fingerprints: each member against the
    /// later ones in chunks of eight lanes (the last chunk's missing lanes masked off).
    #[target_feature(enable = "avx512f,avx512vpopcntdq")]
    pub(super) fn pairs_within(run: &[u64], k: u32, keep: &mut impl FnMut(u64, u64)) {
        let limit = _mm512_set1_epi64(i64::from(k));
        for (i, &a) in run.iter().enumerate() {
            let a_lanes = _mm512_set1_epi64(a as i64);
            for chunk in run[i + 1..].chunks(8) {
                let lanes: __mmask8 = u8::MAX >> (8 - chunk.len());
                // SAFETY: the mask loads only the chunk's lanes, which are inside the slice.
                let b = unsafe { _mm512_maskz_loadu_epi64(lanes, chunk.as_ptr().cast()) };
                let distance = _mm512_popcnt_epi64(_mm512_xor_si512(a_lanes, b));
                let mut within = _mm512_mask_cmple_epu64_mask(lanes, distance, limit);
                while within != 0 {
                    keep(a, chunk[within.trailing_zeros() as usize]);
                    within &= within - 1;
                }
            }
        }
    }
}

impl FingerprintColumn for u64 {
    fn data_type() -> DataType {
        DataType::UInt64
    }
    fn values(array: &ArrayRef) -> Result<Vec<Self>> {
        Ok(as_uint64_array(array)?.iter().flatten().collect())
    }
    fn for_each_value(array: &ArrayRef, mut each: impl FnMut(usize, Self)) -> Result<()> {
        let array = as_uint64_array(array)?;
        match array.null_count() {
            0 => array
                .values()
                .iter()
                .enumerate()
                .for_each(|(row, &v)| each(row, v)),
            _ => array
                .iter()
                .enumerate()
                .for_each(|(row, v)| v.into_iter().for_each(|v| each(row, v))),
        }
        Ok(())
    }
    fn column(values: &[Self]) -> Result<ArrayRef> {
        Ok(Arc::new(UInt64Array::from_iter_values(
            values.iter().copied(),
        )))
    }
    fn extend_values(array: &ArrayRef, into: &mut Vec<Self>) -> Result<()> {
        let array = as_uint64_array(array)?;
        match array.null_count() {
            0 => into.extend_from_slice(array.values()),
            _ => into.extend(array.iter().flatten()),
        }
        Ok(())
    }
    fn into_column(values: Vec<Self>) -> Result<ArrayRef> {
        Ok(Arc::new(UInt64Array::from(values)))
    }
    #[inline(always)]
    fn pairs_within(run: &[Self], k: u32, keep: &mut impl FnMut(Self, Self)) {
        #[cfg(target_arch = "x86_64")]
        if eight_at_once::available() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { eight_at_once::pairs_within(run, k, keep) };
        }
        pairs_within_one_by_one(run, k, keep);
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
    fn for_each_value(array: &ArrayRef, mut each: impl FnMut(usize, Self)) -> Result<()> {
        for (row, v) in as_fixed_size_binary_array(array)?.iter().enumerate() {
            if let Some(v) = v.and_then(wide_value) {
                each(row, v);
            }
        }
        Ok(())
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

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(match fingerprint_of(args.return_field.data_type()) {
            DataType::FixedSizeBinary(16) => Box::new(BandPairsGroups::<u128>::default()),
            _ => Box::new(BandPairsGroups::<u64>::default()),
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

/// The pairs among `fingerprints` within `k` bits that share table `band` (1-based) of `plan`
/// and no earlier table, added to `pairs`: what the aggregate gives one group, for a caller
/// that gathers the groups itself (`crate::job::candidate_scan`). Each pair is (smaller,
/// larger). `fingerprints` must be distinct (no value twice); it comes back sorted by the
/// table's bits, its memory kept for reuse.
pub(crate) fn pairs_of_group(
    fingerprints: &mut Vec<u64>,
    band: usize,
    k: u32,
    plan: &str,
    pairs: &mut Vec<(u64, u64)>,
) -> Result<()> {
    let mut group = BandPairs::<u64> {
        fingerprints: std::mem::take(fingerprints),
        band: i64::try_from(band).ok(),
        k: Some(i64::from(k)),
        plan: Some(plan.to_string()),
        distinct: true,
        ..BandPairs::default()
    };
    let found = group.pairs();
    *fingerprints = std::mem::take(&mut group.fingerprints);
    pairs.extend(found?);
    Ok(())
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
    /// Whether no fingerprint is listed twice (the caller knows): a run of equal table bits
    /// is then scanned where it lies, without the copy that is sorted to merge repeats.
    distinct: bool,
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
            distinct: false,
            width: PhantomData,
        }
    }
}

impl<F: FingerprintColumn + radsort::Key> BandPairs<F> {
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
        let mut found = Found {
            plan: &plan,
            band_index,
            pairs: Vec::new(),
        };
        self.scan(mask, k, &mut found);
        Ok(found.pairs)
    }

    /// The scan, compiled a second time for the CPU's POPCNT. The build targets baseline x86-64,
    /// where `count_ones` is a dozen shift-and-mask instructions, and the Hamming filter here is
    /// the job's hottest popcount (billions of comparisons at k = 7 on ten million documents).
    /// The copy with the feature is picked when the CPU has it (every x86-64 since 2008), so the
    /// binary still runs on any x86-64 and DataFusion's build does not depend on a CPU flag.
    fn scan(&mut self, mask: u128, k: u32, found: &mut Found<'_, F>) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has POPCNT, the only feature the copy assumes.
            return unsafe { self.scan_with_popcnt(mask, k, found) };
        }
        self.scan_portable(mask, k, found);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn scan_with_popcnt(&mut self, mask: u128, k: u32, found: &mut Found<'_, F>) {
        self.scan_portable(mask, k, found);
    }

    /// Sorts the group by the table's bits (`mask`) and hands `found` every two members of a run
    /// within `k` bits. `k` is an argument, not read through `found`, so that it stays in a
    /// register: the inner loops are a load, a xor, a popcount and a compare per candidate.
    /// The pair loops are written here or in inlined functions, not in closures: a closure is
    /// compiled on its own, without the feature of the function it is inlined into (only the
    /// rare call that keeps a pair goes through one).
    #[inline(always)]
    fn scan_portable(&mut self, mask: u128, k: u32, found: &mut Found<'_, F>) {
        // Radix sort on the table's bits only: bytes outside the mask are all zero and skipped,
        // so a table of 16 to 32 bits takes 2 to 4 passes over the group.
        if self.fresh.is_empty() {
            // Every member fresh: the fingerprints alone, sorted where they are.
            radsort::sort_by_key(&mut self.fingerprints, |f| f.masked(mask));
            let mut run = Vec::new();
            let same_bits = |a: &F, b: &F| a.masked(mask) == b.masked(mask);
            for same in self.fingerprints.chunk_by(same_bits) {
                if self.distinct {
                    // Sorting a copy of each run took a tenth of the candidate scan's time at
                    // ten million generated documents (runs of hundreds at k = 7).
                    F::pairs_within(same, k, &mut |a, b| found.keep(a, b));
                } else if distinct_run(same, &mut run, |later, kept| later == kept) {
                    F::pairs_within(&run, k, &mut |a, b| found.keep(a, b));
                }
            }
            return;
        }
        let fresh = |i: usize| self.fresh.get(i).copied().unwrap_or(true);
        let mut members: Vec<(F, bool)> = self
            .fingerprints
            .iter()
            .enumerate()
            .map(|(i, &f)| (f, fresh(i)))
            .collect();
        radsort::sort_by_key(&mut members, |m| m.0.masked(mask));
        let (mut run, mut fresh_members) = (Vec::new(), Vec::new());
        let same_bits = |a: &(F, bool), b: &(F, bool)| a.0.masked(mask) == b.0.masked(mask);
        // A fingerprint listed twice is fresh if either row says so.
        let merge = |later: &mut (F, bool), kept: &mut (F, bool)| {
            let same = later.0 == kept.0;
            kept.1 |= same && later.1;
            same
        };
        for same in members.chunk_by(same_bits) {
            if !distinct_run(same, &mut run, merge) {
                continue;
            }
            fresh_members.clear();
            fresh_members.extend((0..run.len()).filter(|&i| run[i].1));
            if fresh_members.len() == run.len() {
                for (i, &(a, _)) in run.iter().enumerate() {
                    for &(b, _) in &run[i + 1..] {
                        if a.hamming(b) <= k {
                            found.keep(a, b);
                        }
                    }
                }
                continue;
            }
            // Some members are not fresh: each fresh one against the run, a pair of two fresh
            // ones from the first of them, so the work grows with the fresh members only.
            for &i in &fresh_members {
                let a = run[i].0;
                for (j, &(b, b_fresh)) in run.iter().enumerate() {
                    if j == i || (b_fresh && j < i) || a.hamming(b) > k {
                        continue;
                    }
                    if j < i {
                        found.keep(b, a)
                    } else {
                        found.keep(a, b)
                    }
                }
            }
        }
    }
}

/// The pairs of one table: within k bits (the scan checks), sharing no earlier table of `plan`.
struct Found<'a, F> {
    plan: &'a BandPlan,
    band_index: usize,
    pairs: Vec<(F, F)>,
}

impl<F: Fingerprint> Found<'_, F> {
    /// Keeps a pair within k, the smaller first, when this is the first table it shares. Out
    /// of line: few candidates get here, and the scan's inner loop stays small.
    #[inline(never)]
    fn keep(&mut self, a: F, b: F) {
        let (a, b) = if b < a { (b, a) } else { (a, b) };
        if self.plan.first_shared_band(a.widen(), b.widen()) == Some(self.band_index) {
            self.pairs.push((a, b));
        }
    }
}

/// Fills `run` with the members of one run of equal table bits (`same`), sorted by fingerprint
/// and a fingerprint listed twice merged into one (`merge`, as `Vec::dedup_by`), so that the
/// earlier member of a pair is the smaller. False when fewer than two remain: no pair.
#[inline(always)]
fn distinct_run<T: Copy + Ord>(
    same: &[T],
    run: &mut Vec<T>,
    merge: impl FnMut(&mut T, &mut T) -> bool,
) -> bool {
    if same.len() < 2 {
        return false;
    }
    run.clear();
    run.extend_from_slice(same);
    run.sort_unstable();
    run.dedup_by(merge);
    run.len() >= 2
}

impl<F: FingerprintColumn + radsort::Key> Accumulator for BandPairs<F> {
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
            if let Some(fresh) = fresh.filter(|f| !f.is_empty()) {
                self.fresh
                    .extend(as_boolean_array(&fresh)?.iter().map(|f| f == Some(true)));
            }
            F::extend_values(&list, &mut self.fingerprints)?;
        }
        self.note_parameters(&states[1], &states[2], states.get(3))
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let group = BandPairs {
            fingerprints: std::mem::take(&mut self.fingerprints),
            fresh: std::mem::take(&mut self.fresh),
            band: self.band,
            k: self.k,
            plan: self.plan.clone(),
            distinct: self.distinct,
            width: PhantomData,
        };
        states(vec![group])?
            .iter()
            .map(|column| ScalarValue::try_from_array(column, 0))
            .collect()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let pairs = self.pairs()?;
        Ok(ScalarValue::List(Arc::new(pairs_column(vec![pairs])?)))
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.fingerprints.capacity() * size_of::<F>() + self.fresh.capacity()
    }
}

/// The states of some groups as the aggregate's state columns (see `state_fields`).
fn states<F: FingerprintColumn>(groups: Vec<BandPairs<F>>) -> Result<Vec<ArrayRef>> {
    let list = |data_type: DataType, lengths: Vec<usize>, values: ArrayRef| -> ArrayRef {
        Arc::new(ListArray::new(
            Arc::new(Field::new_list_field(data_type, true)),
            OffsetBuffer::from_lengths(lengths),
            values,
            None,
        ))
    };
    let lengths = groups.iter().map(|g| g.fingerprints.len()).collect();
    let fresh_lengths = groups.iter().map(|g| g.fresh.len()).collect();
    let mut fingerprints: Vec<F> =
        Vec::with_capacity(groups.iter().map(|g| g.fingerprints.len()).sum());
    for group in &groups {
        fingerprints.extend_from_slice(&group.fingerprints);
    }
    let fresh = BooleanArray::from(
        groups
            .iter()
            .flat_map(|g| g.fresh.iter().copied())
            .collect::<Vec<bool>>(),
    );
    Ok(vec![
        list(F::data_type(), lengths, F::into_column(fingerprints)?),
        Arc::new(groups.iter().map(|g| g.band).collect::<Int64Array>()),
        Arc::new(groups.iter().map(|g| g.k).collect::<Int64Array>()),
        Arc::new(
            groups
                .iter()
                .map(|g| g.plan.as_deref())
                .collect::<StringArray>(),
        ),
        list(DataType::Boolean, fresh_lengths, Arc::new(fresh)),
    ])
}

/// One list of `{simhash_a, simhash_b}` per group.
fn pairs_column<F: FingerprintColumn>(per_group: Vec<Vec<(F, F)>>) -> Result<ListArray> {
    let lengths: Vec<usize> = per_group.iter().map(Vec::len).collect();
    let a: Vec<F> = per_group.iter().flatten().map(|p| p.0).collect();
    let b: Vec<F> = per_group.iter().flatten().map(|p| p.1).collect();
    let fields = pair_fields(&F::data_type());
    let structs = StructArray::new(fields.clone(), vec![F::column(&a)?, F::column(&b)?], None);
    Ok(ListArray::new(
        Arc::new(Field::new_list_field(DataType::Struct(fields), true)),
        OffsetBuffer::from_lengths(lengths),
        Arc::new(structs),
        None,
    ))
}

/// `band_pairs` for all the groups of a hash aggregate at once: each row goes straight to its
/// group's fingerprints. (Without it, DataFusion gathers every group's rows of every batch with
/// a `take` and calls one accumulator per group: most of the candidate stage's time outside the
/// sort-and-scan itself.)
#[derive(Debug)]
struct BandPairsGroups<F> {
    groups: Vec<BandPairs<F>>,
    /// Fingerprints held over all groups, for `size` without a walk over the groups.
    held: usize,
}

impl<F> Default for BandPairsGroups<F> {
    fn default() -> Self {
        Self {
            groups: Vec::new(),
            held: 0,
        }
    }
}

impl<F: FingerprintColumn + radsort::Key> BandPairsGroups<F> {
    fn take(&mut self, emit_to: EmitTo) -> Vec<BandPairs<F>> {
        let taken = emit_to.take_needed(&mut self.groups);
        self.held -= taken.iter().map(|g| g.fingerprints.len()).sum::<usize>();
        taken
    }

    /// Notes each group's band, k and plan from its first row that has them.
    fn note_parameters(&mut self, values: &[ArrayRef], group_indices: &[usize]) -> Result<()> {
        let (band, k) = (as_int64_array(&values[1])?, as_int64_array(&values[2])?);
        let plan = values
            .get(3)
            .map(|plan| as_string_array(plan))
            .transpose()?;
        for (row, &index) in group_indices.iter().enumerate() {
            let group = &mut self.groups[index];
            if group.band.is_none() && band.is_valid(row) {
                group.band = Some(band.value(row));
            }
            if group.k.is_none() && k.is_valid(row) {
                group.k = Some(k.value(row));
            }
            if let (None, Some(plan)) = (&group.plan, plan)
                && plan.is_valid(row)
            {
                group.plan = Some(plan.value(row).to_string());
            }
        }
        Ok(())
    }
}

impl<F: FingerprintColumn + radsort::Key> GroupsAccumulator for BandPairsGroups<F> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups
            .resize_with(total_num_groups, BandPairs::default);
        let passes = |row: usize| opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row));
        let fresh = values.get(4).map(|f| as_boolean_array(f)).transpose()?;
        let (groups, held) = (&mut self.groups, &mut self.held);
        F::for_each_value(&values[0], |row, fingerprint| {
            if !passes(row) {
                return;
            }
            let group = &mut groups[group_indices[row]];
            group.fingerprints.push(fingerprint);
            if let Some(fresh) = fresh {
                group.fresh.push(fresh.is_valid(row) && fresh.value(row));
            }
            *held += 1;
        })?;
        self.note_parameters(values, group_indices)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups
            .resize_with(total_num_groups, BandPairs::default);
        let lists = as_list_array(&values[0])?;
        let fresh_lists = as_list_array(&values[4])?;
        for (row, &index) in group_indices.iter().enumerate() {
            let group = &mut self.groups[index];
            if lists.is_valid(row) {
                let before = group.fingerprints.len();
                F::extend_values(&lists.value(row), &mut group.fingerprints)?;
                self.held += group.fingerprints.len() - before;
            }
            if fresh_lists.is_valid(row) {
                let fresh = fresh_lists.value(row);
                group
                    .fresh
                    .extend(as_boolean_array(&fresh)?.iter().map(|f| f == Some(true)));
            }
        }
        self.note_parameters(values, group_indices)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        states(self.take(emit_to))
    }

    /// Each row as a group of its own (DataFusion passes rows on this way when a partial
    /// aggregate hardly reduces them); a filtered-out or NULL row is an empty group.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let rows = values.first().map_or(0, |v| v.len());
        let mut each_row = Self::default();
        let indices: Vec<usize> = (0..rows).collect();
        each_row.update_batch(values, &indices, opt_filter, rows)?;
        states(each_row.groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let pairs = self
            .take(emit_to)
            .iter_mut()
            .map(BandPairs::pairs)
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(pairs_column(pairs)?))
    }

    fn size(&self) -> usize {
        size_of_val(self)
            + self.groups.capacity() * size_of::<BandPairs<F>>()
            + self.held * (size_of::<F>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::UInt64Type;

    use crate::udf::test_util::sql;

    /// The eight-lane filter keeps what comparing one pair at a time keeps: runs of every length
    /// around the lane count, members within a few bits of each other and far apart, every k.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn eight_lanes_keep_the_pairs_one_by_one_keeps() {
        use super::{eight_at_once, pairs_within_one_by_one};
        use crate::rng::SplitMix64;
        if !eight_at_once::available() {
            crate::to_stderr!("skipped: this CPU has no AVX-512 popcount");
            return;
        }
        let mut random = SplitMix64(5);
        let mut kept_in_all = 0;
        for case in 0..3_000 {
            let base = random.next_u64();
            let len = case % 40;
            let mut run: Vec<u64> = (0..len)
                .map(|_| match random.next_u64() % 3 {
                    0 => random.next_u64(),
                    _ => base ^ (1 << (random.next_u64() % 64)) ^ (1 << (random.next_u64() % 64)),
                })
                .collect();
            run.sort_unstable();
            let k = (case % 9) as u32;
            let (mut lanes, mut one_by_one) = (Vec::new(), Vec::new());
            // SAFETY: the CPU has the features (checked above).
            unsafe { eight_at_once::pairs_within(&run, k, &mut |a, b| lanes.push((a, b))) };
            pairs_within_one_by_one(&run, k, &mut |a, b| one_by_one.push((a, b)));
            assert_eq!(lanes, one_by_one, "run {run:x?}, k = {k}");
            kept_in_all += lanes.len();
        }
        assert!(
            kept_in_all > 10_000,
            "the runs hold pairs within k: {kept_in_all}"
        );
    }

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

    /// The copy of the scan compiled for POPCNT (the one that runs on any recent x86-64, so the
    /// one every other test exercises here) and the portable copy find the same pairs, with and
    /// without `fresh`, on runs long enough to hold many pairs. (On a CPU with AVX-512's
    /// popcount both copies filter 64-bit runs eight lanes at a time;
    /// `eight_lanes_keep_the_pairs_one_by_one_keeps` checks those lanes against one by one.)
    #[test]
    fn the_popcnt_and_portable_scans_find_the_same_pairs() {
        use super::{BandPairs, Found};
        use crate::plan::BandPlan;
        let mut random = crate::rng::SplitMix64(0x9C7);
        // Eight values of the top band: the first table's runs hold many members each. Every
        // other fingerprint is its predecessor with some of five low bits flipped.
        let mut fingerprints: Vec<u64> = Vec::new();
        for i in 0..2_000u64 {
            let f = match fingerprints.last() {
                Some(&last) if i % 2 == 1 => last ^ (random.next_u64() & 0x0421_0000_0021),
                _ => ((i % 8) << 48) | (random.next_u64() >> 16),
            };
            fingerprints.push(f);
        }
        let fresh: Vec<bool> = (0..fingerprints.len()).map(|i| i % 3 == 0).collect();
        let plan = BandPlan::default_bands(64);
        let mask = plan.mask(1).unwrap();
        for (k, fresh) in [(3, Vec::new()), (20, Vec::new()), (20, fresh)] {
            let scan = |portable: bool| {
                let mut group = BandPairs::<u64> {
                    fingerprints: fingerprints.clone(),
                    fresh: fresh.clone(),
                    ..Default::default()
                };
                let mut found = Found {
                    plan: &plan,
                    band_index: 1,
                    pairs: Vec::new(),
                };
                if portable {
                    group.scan_portable(mask, k, &mut found);
                } else {
                    group.scan(mask, k, &mut found);
                }
                found.pairs
            };
            let dispatched = scan(false);
            assert!(dispatched.len() > 100, "k = {k}: the data must have pairs");
            assert_eq!(dispatched, scan(true), "k = {k}");
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

    /// Grouped by slices of each table's key, over several partitions and batches (DataFusion's
    /// grouped accumulator, partial and final), with fingerprints listed twice, NULLs and a
    /// FILTER: all groups' pairs together are the brute-force pairs within k, each once, and with
    /// `fresh` those with a fresh member (a fingerprint is fresh if any of its rows is).
    #[tokio::test]
    async fn grouped_pairs_are_the_brute_force_pairs() {
        use std::collections::HashMap;

        use datafusion::arrow::array::{BooleanArray, RecordBatch, UInt64Array};
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        use datafusion::datasource::MemTable;

        use crate::fingerprint::Fingerprint;

        let mut random = crate::rng::SplitMix64(0x6E0);
        let mut rows: Vec<(Option<u64>, bool)> = Vec::new();
        for _ in 0..400 {
            let base = random.next_u64();
            for distance in 0..=4 {
                let mut f = base;
                for _ in 0..distance {
                    f ^= 1 << (random.next_u64() % 64);
                }
                let fresh = random.next_u64().is_multiple_of(3);
                rows.push((Some(f), fresh));
                if random.next_u64().is_multiple_of(8) {
                    rows.push((Some(f), !fresh));
                }
            }
            rows.push((None, true));
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("f", DataType::UInt64, true),
            Field::new("fresh", DataType::Boolean, false),
        ]));
        let batch = |rows: &[(Option<u64>, bool)]| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(rows.iter().map(|r| r.0).collect::<UInt64Array>()),
                    Arc::new(rows.iter().map(|r| Some(r.1)).collect::<BooleanArray>()),
                ],
            )
            .unwrap()
        };
        let partitions: Vec<Vec<RecordBatch>> = rows
            .chunks(rows.len().div_ceil(3))
            .map(|part| part.chunks(97).map(batch).collect())
            .collect();
        let ctx = crate::udf::test_util::context();
        let table = MemTable::try_new(Arc::clone(&schema), partitions).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();

        let mut is_fresh: HashMap<u64, bool> = HashMap::new();
        for &(f, fresh) in &rows {
            if let Some(f) = f {
                *is_fresh.entry(f).or_default() |= fresh;
            }
        }
        let mut distinct: Vec<u64> = is_fresh.keys().copied().collect();
        distinct.sort_unstable();
        let brute = |keep: &dyn Fn(u64, u64) -> bool| {
            let mut pairs = Vec::new();
            for (i, &a) in distinct.iter().enumerate() {
                for &b in &distinct[i + 1..] {
                    if a.hamming(b) <= 3 && keep(a, b) {
                        pairs.push((a, b));
                    }
                }
            }
            pairs
        };
        // (fresh argument, FILTER clause, the pairs expected)
        let cases = [
            ("", "", brute(&|_, _| true)),
            (", fresh", "", brute(&|a, b| is_fresh[&a] || is_fresh[&b])),
            (
                "",
                " FILTER (WHERE f % 2 = 0)",
                brute(&|a, b| a % 2 == 0 && b % 2 == 0),
            ),
        ];
        for (fresh, filter, expected) in cases {
            let batches = ctx
                .sql(&format!(
                    "SELECT band_pairs(f, band, 3, 'bands:4'{fresh}){filter} AS pairs \
                     FROM (SELECT unnest(range(1, 5)) AS band) CROSS JOIN t \
                     GROUP BY band, band_key(f, band, 'bands:4') % arrow_cast(7, 'UInt64')"
                ))
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            let mut found = Vec::new();
            for batch in &batches {
                let lists = batch.column(0).as_list::<i32>();
                for list in lists.iter().flatten() {
                    let structs = list.as_struct();
                    let a = structs.column(0).as_primitive::<UInt64Type>();
                    let b = structs.column(1).as_primitive::<UInt64Type>();
                    found.extend((0..structs.len()).map(|i| (a.value(i), b.value(i))));
                }
            }
            let total = found.len();
            found.sort_unstable();
            found.dedup();
            assert_eq!(found.len(), total, "{fresh}{filter}: a pair found twice");
            assert!(expected.len() > 300, "the data must have pairs");
            assert_eq!(found, expected, "{fresh}{filter}");
        }
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
