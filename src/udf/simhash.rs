//! The text functions, all with an optional option string (see `crate::text::options`):
//!
//! - `simhash(text [, options]) -> UInt64`: the 64-bit SimHash of a document; NULL for NULL and
//!   for text with nothing to fingerprint (unless `empty=exact`).
//! - `simhash_details(text [, options]) -> Struct {simhash UInt64, features UInt32}`: the same
//!   fingerprint with the number of distinct features it was made of (what the signature stage
//!   writes, so one pass gives both).
//! - `simhash_sketch(text [, options]) -> Struct {simhash, features, sketch FixedSizeBinary(256)}`:
//!   the details and the MinHash sketch of the same features (`crate::text::sketch`), from which
//!   `sketch_similarity` estimates two documents' Jaccard similarity (what the signature stage
//!   writes: one pass gives all three).
//! - `clean_text(text [, options]) -> Utf8`: the text as the features see it.
//!
//! The options must be a constant string; they are checked when the query is planned.

use std::cell::Cell;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{
    Array, ArrayRef, FixedSizeBinaryArray, StringArray, StructArray, UInt32Array, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::cast::{as_large_string_array, as_string_array, as_string_view_array};
use datafusion::common::types::logical_string;
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    Coercion, ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, TypeSignature, TypeSignatureClass, Volatility,
};

use crate::fingerprint::Width;
use crate::text::sketch::SKETCH_BYTES;
use crate::text::{Featurizer, Fingerprint, Scratch};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Output {
    Simhash,
    Details,
    Sketch,
    Clean,
}

static SIMHASH: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(TextFunc::new(Output::Simhash))));
static DETAILS: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(TextFunc::new(Output::Details))));
static SKETCH: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(TextFunc::new(Output::Sketch))));
static CLEAN: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(TextFunc::new(Output::Clean))));

/// The `simhash` SQL function.
pub fn simhash_udf() -> Arc<ScalarUDF> {
    Arc::clone(&SIMHASH)
}

/// The `simhash_details` SQL function.
pub fn simhash_details_udf() -> Arc<ScalarUDF> {
    Arc::clone(&DETAILS)
}

/// The `simhash_sketch` SQL function.
pub fn simhash_sketch_udf() -> Arc<ScalarUDF> {
    Arc::clone(&SKETCH)
}

/// The `clean_text` SQL function.
pub fn clean_text_udf() -> Arc<ScalarUDF> {
    Arc::clone(&CLEAN)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TextFunc {
    output: Output,
    signature: Signature,
}

/// UInt64 for 64-bit fingerprints; FixedSizeBinary(16), big-endian, for `bits=128`.
fn fingerprint_type(width: Width) -> DataType {
    match width {
        Width::Bits128 => DataType::FixedSizeBinary(16),
        Width::Bits64 => DataType::UInt64,
    }
}

fn details_fields(width: Width) -> Fields {
    Fields::from(vec![
        Field::new("simhash", fingerprint_type(width), true),
        Field::new("features", DataType::UInt32, true),
    ])
}

fn sketch_fields(width: Width) -> Fields {
    let mut fields: Vec<Field> = details_fields(width)
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("sketch", super::similarity::sketch_type(), true));
    Fields::from(fields)
}

impl TextFunc {
    fn new(output: Output) -> Self {
        // Text only: a number is not silently turned into a document.
        let string = || Coercion::new_exact(TypeSignatureClass::Native(logical_string()));
        Self {
            output,
            signature: Signature::one_of(
                vec![
                    TypeSignature::Coercible(vec![string()]),
                    TypeSignature::Coercible(vec![string(), string()]),
                ],
                Volatility::Immutable,
            ),
        }
    }

    fn output_type(&self, width: Width) -> DataType {
        match self.output {
            Output::Simhash => fingerprint_type(width),
            Output::Details => DataType::Struct(details_fields(width)),
            Output::Sketch => DataType::Struct(sketch_fields(width)),
            Output::Clean => DataType::Utf8,
        }
    }

    fn options_error(&self) -> String {
        format!(
            "{}: the options (second argument) must be a constant string such as \
             'mode=chars,n=3' (a string literal)",
            self.name()
        )
    }
}

impl ScalarUDFImpl for TextFunc {
    fn name(&self) -> &str {
        match self.output {
            Output::Simhash => "simhash",
            Output::Details => "simhash_details",
            Output::Sketch => "simhash_sketch",
            Output::Clean => "clean_text",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The type for the default options; `return_field_from_args` has the real one.
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.output_type(Width::Bits64))
    }

    /// Checks the options while the query is planned, so a typo fails before any row is read;
    /// the fingerprint's type follows their `bits`.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let mut width = Width::Bits64;
        if args.arg_fields.len() == 2 {
            match args.scalar_arguments.get(1).copied().flatten() {
                Some(options) => match featurizer(Some(options)) {
                    Ok(f) => width = f.options().width,
                    Err(e) => return plan_err!("{}: {e}", self.name()),
                },
                None => return plan_err!("{}", self.options_error()),
            }
        }
        Ok(Arc::new(Field::new(
            self.name(),
            self.output_type(width),
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let mut args = args.args.into_iter();
        let Some(text) = args.next() else {
            return exec_err!("{} needs a text argument", self.name());
        };
        let featurizer = match args.next() {
            None => featurizer(None),
            Some(ColumnarValue::Scalar(options)) => featurizer(Some(&options)),
            Some(ColumnarValue::Array(_)) => return exec_err!("{}", self.options_error()),
        };
        let featurizer = match featurizer {
            Ok(f) => f,
            Err(e) => return exec_err!("{}: {e}", self.name()),
        };
        let scalar = matches!(text, ColumnarValue::Scalar(_));
        let array = text.into_array(1)?;
        let result = match array.data_type() {
            DataType::Utf8 => self.apply(&featurizer, as_string_array(&array)?.iter())?,
            DataType::LargeUtf8 => {
                self.apply(&featurizer, as_large_string_array(&array)?.iter())?
            }
            DataType::Utf8View => self.apply(&featurizer, as_string_view_array(&array)?.iter())?,
            DataType::Null => self.apply(&featurizer, std::iter::repeat_n(None, array.len()))?,
            other => return exec_err!("{} expects text, got {other}", self.name()),
        };
        crate::progress::count_signed(array.len());
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &result, 0,
            )?));
        }
        Ok(ColumnarValue::Array(result))
    }
}

thread_local! {
    /// Each thread's working buffers, kept from one batch to the next rather than allocated
    /// for each: why fresh tables cost, see `DistinctFeatures`.
    static SCRATCH: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

impl TextFunc {
    /// One pass over a batch with the thread's working buffers.
    fn apply<'a>(
        &self,
        featurizer: &Featurizer,
        texts: impl Iterator<Item = Option<&'a str>>,
    ) -> Result<ArrayRef> {
        let mut scratch = SCRATCH.take().unwrap_or_default();
        let result = self.apply_with(featurizer, texts, &mut scratch);
        scratch.trim();
        SCRATCH.set(Some(scratch));
        result
    }

    fn apply_with<'a>(
        &self,
        featurizer: &Featurizer,
        texts: impl Iterator<Item = Option<&'a str>>,
        scratch: &mut Scratch,
    ) -> Result<ArrayRef> {
        let mut print = |text: &str| featurizer.fingerprint(text, scratch);
        let wide = featurizer.options().width == Width::Bits128;
        let fingerprints = |prints: Vec<Option<Fingerprint>>| -> Result<ArrayRef> {
            Ok(if wide {
                let bytes = prints
                    .iter()
                    .map(|p| p.and_then(|p| p.simhash128).map(u128::to_be_bytes));
                Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    bytes, 16,
                )?)
            } else {
                Arc::new(
                    prints
                        .iter()
                        .map(|p| p.and_then(|p| p.simhash))
                        .collect::<UInt64Array>(),
                )
            })
        };
        Ok(match self.output {
            Output::Simhash => fingerprints(texts.map(|t| t.map(&mut print)).collect())?,
            Output::Details => {
                let prints: Vec<Option<Fingerprint>> = texts.map(|t| t.map(&mut print)).collect();
                let counts: UInt32Array = prints.iter().map(|p| p.map(|p| p.features)).collect();
                Arc::new(StructArray::new(
                    details_fields(featurizer.options().width),
                    vec![fingerprints(prints)?, Arc::new(counts)],
                    None,
                ))
            }
            Output::Sketch => {
                let mut sketches = Vec::new();
                let prints: Vec<Option<Fingerprint>> = texts
                    .map(|t| {
                        t.map(|t| {
                            let print = featurizer.fingerprint(t, scratch);
                            sketches.push(Some(featurizer.sketch(scratch)));
                            print
                        })
                        .or_else(|| {
                            sketches.push(None);
                            None
                        })
                    })
                    .collect();
                let counts: UInt32Array = prints.iter().map(|p| p.map(|p| p.features)).collect();
                let sketches = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    sketches.into_iter(),
                    SKETCH_BYTES as i32,
                )?;
                Arc::new(StructArray::new(
                    sketch_fields(featurizer.options().width),
                    vec![fingerprints(prints)?, Arc::new(counts), Arc::new(sketches)],
                    None,
                ))
            }
            Output::Clean => Arc::new(
                texts
                    .map(|t| t.map(|t| featurizer.clean(t)))
                    .collect::<StringArray>(),
            ),
        })
    }
}

/// The `simhash(text, features)` of each text, as the SQL function computes it, outside a query
/// (the Python bindings' `fingerprint`): UInt64, or FixedSizeBinary(16) with `bits=128`.
pub fn fingerprints<'a>(
    texts: impl Iterator<Item = Option<&'a str>>,
    features: &str,
) -> Result<ArrayRef> {
    let featurizer = match Featurizer::cached(features) {
        Ok(f) => f,
        Err(e) => return plan_err!("simhash: {e}"),
    };
    TextFunc::new(Output::Simhash).apply(&featurizer, texts)
}

/// The featurizer for an option argument (`None`: the defaults).
fn featurizer(options: Option<&ScalarValue>) -> std::result::Result<Arc<Featurizer>, String> {
    let text = match options {
        None => "",
        Some(ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s)) => {
            match s {
                Some(s) => s.as_str(),
                None => return Err("the options must not be NULL; '' means the defaults".into()),
            }
        }
        Some(ScalarValue::Null) => {
            return Err("the options must not be NULL; '' means the defaults".into());
        }
        Some(other) => return Err(format!("options must be text, got {}", other.data_type())),
    };
    Featurizer::cached(text).map_err(|e| e.to_string())
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

    /// The thread's buffers, kept from batch to batch (and given back past their limit after a
    /// long text), give each text what a fresh set gives it alone. The texts: long ones of
    /// more distinct features than a buffer keeps, between short ones and one empty.
    #[test]
    fn kept_buffers_fingerprint_as_fresh_ones() {
        use datafusion::arrow::array::FixedSizeBinaryArray;

        use super::{Output, TextFunc, featurizer};
        use crate::rng::SplitMix64;
        use crate::text::Scratch;

        let mut random = SplitMix64(11);
        let mut long = || -> String {
            (0..400_000)
                .map(|_| char::from(b'a' + random.below(26) as u8))
                .collect()
        };
        let texts = [
            long(),
            EN.into(),
            String::new(),
            long(),
            ZH.into(),
            EN.repeat(3),
        ];
        let featurizer = featurizer(None).expect("default options");
        let function = TextFunc::new(Output::Sketch);
        for round in 0..2 {
            let batch = function
                .apply(&featurizer, texts.iter().map(|text| Some(text.as_str())))
                .expect("a batch");
            let details = batch.as_struct();
            let prints = details.column(0).as_primitive::<UInt64Type>();
            let sketches = details
                .column(2)
                .as_any()
                .downcast_ref::<FixedSizeBinaryArray>()
                .expect("sketches");
            for (row, text) in texts.iter().enumerate() {
                let mut fresh = Scratch::default();
                let print = featurizer.fingerprint(text, &mut fresh);
                let got = prints.is_valid(row).then(|| prints.value(row));
                assert_eq!(got, print.simhash, "round {round}, text {row}");
                assert_eq!(sketches.value(row), featurizer.sketch(&fresh), "text {row}");
            }
        }
    }

    #[tokio::test]
    async fn golden_fingerprints() {
        // Pinned for every mode: a change here silently invalidates every fingerprint users
        // have stored. Through SQL, the Rust function and `fingerprints` (Python's) alike.
        let golden = golden();
        assert_eq!(golden.len(), 7, "every mode is pinned");
        let mut got = Vec::new();
        for (options, _, _) in &golden {
            let en = one(&format!("SELECT simhash('{EN}', '{options}')")).await;
            let zh = one(&format!("SELECT simhash('{ZH}', '{options}')")).await;
            let featurizer = crate::text::Featurizer::cached(options).unwrap();
            let rust = |t: &str| featurizer.fingerprint(t, &mut crate::text::Scratch::default());
            assert_eq!((en, zh), (rust(EN).simhash, rust(ZH).simhash), "{options}");
            let listed = super::fingerprints([Some(EN), Some(ZH)].into_iter(), options).unwrap();
            let listed = listed.as_primitive::<UInt64Type>();
            assert_eq!(
                (en, zh),
                (Some(listed.value(0)), Some(listed.value(1))),
                "{options}"
            );
            got.push((options.clone(), en.unwrap_or(0), zh.unwrap_or(0)));
        }
        assert_eq!(got, golden, "new values: {got:#?}");
        assert_eq!(crate::text::simhash(EN), Some(golden[0].1));
    }

    /// (options, fingerprint of EN, fingerprint of ZH), from the fixture the Python tests read
    /// too; the first row is the defaults.
    fn golden() -> Vec<(String, u64, u64)> {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../fixtures/golden_fingerprints.json")).unwrap();
        assert_eq!(
            (doc["texts"]["en"].as_str(), doc["texts"]["zh"].as_str()),
            (Some(EN), Some(ZH))
        );
        doc["fingerprints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let value = |key: &str| row[key].as_u64().unwrap();
                (
                    row["features"].as_str().unwrap().to_string(),
                    value("en"),
                    value("zh"),
                )
            })
            .collect()
    }

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
    async fn options_choose_the_features_like_the_rust_function() {
        for options in [
            "mode=chars,n=2",
            "mode=shingles,min_features=0",
            "mode=jieba_tf,t2s=on",
        ] {
            let expected = |text: &str| {
                let featurizer = crate::text::Featurizer::cached(options).unwrap();
                featurizer.fingerprint(text, &mut crate::text::Scratch::default())
            };
            for text in [EN, ZH] {
                let got = one(&format!("SELECT simhash('{text}', '{options}')")).await;
                assert_eq!(got, expected(text).simhash, "{options} {text}");
                let batches = sql(&format!(
                    "SELECT s['simhash'], s['features'] FROM (SELECT simhash_details(t, '{options}') AS s FROM (VALUES ('{text}')) AS v(t))"
                ))
                .await;
                let hash = batches[0].column(0).as_primitive::<UInt64Type>();
                let features = batches[0]
                    .column(1)
                    .as_primitive::<datafusion::arrow::datatypes::UInt32Type>();
                assert_eq!(hash.iter().next().flatten(), expected(text).simhash);
                assert_eq!(features.value(0), expected(text).features);
            }
        }
        assert_ne!(
            one(&format!("SELECT simhash('{EN}', 'mode=words')")).await,
            one(&format!("SELECT simhash('{EN}')")).await
        );
    }

    #[tokio::test]
    async fn bits_128_gives_sixteen_big_endian_bytes() {
        let batches = sql(&format!(
            "SELECT simhash('{EN}', 'bits=128'), s['simhash'], s['features'] FROM \
             (SELECT simhash_details('{EN}', 'bits=128') AS s)"
        ))
        .await;
        let featurizer = crate::text::Featurizer::cached("bits=128").unwrap();
        let expected = featurizer
            .fingerprint(EN, &mut crate::text::Scratch::default())
            .simhash128
            .unwrap();
        for column in [0, 1] {
            let bytes = batches[0].column(column).as_fixed_size_binary();
            assert_eq!(bytes.value(0), expected.to_be_bytes(), "column {column}");
        }
        // The 128-bit fingerprint is not the 64-bit one widened.
        assert_ne!(
            expected >> 64,
            u128::from(crate::text::simhash(EN).unwrap())
        );
        // Pinned, like the 64-bit ones.
        assert_eq!(expected, GOLDEN_EN_128, "new value: {expected:#x}");
    }

    const GOLDEN_EN_128: u128 = 0x6277_7bbf_034e_62c2_94ed_2a51_9bc3_f4c9;

    #[tokio::test]
    async fn clean_text_shows_what_the_features_see() {
        let batches = sql("SELECT clean_text('<p>Ｈｅｌｌｏ,   <b>World</b></p>'), clean_text('<p>x</p>', 'html=off,case=off')").await;
        let cleaned = batches[0].column(0).as_string::<i32>();
        assert_eq!(cleaned.value(0), "hello, world");
        let kept = batches[0].column(1).as_string::<i32>();
        assert_eq!(kept.value(0), "<p>x</p>");
    }

    #[tokio::test]
    async fn bad_options_fail_at_planning_naming_the_option() {
        let ctx = crate::udf::test_util::context();
        let err = |q: &'static str| {
            let ctx = ctx.clone();
            async move {
                ctx.sql(q)
                    .await
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default()
            }
        };
        let e = err("SELECT simhash('x', 'mode=bigram')").await;
        assert!(
            e.contains("simhash") && e.contains("bigram") && e.contains("valid modes"),
            "{e}"
        );
        let e = err("SELECT simhash_details('x', 'colour=red')").await;
        assert!(e.contains("colour") && e.contains("valid options"), "{e}");
        let e = err("SELECT simhash('x', NULL)").await;
        assert!(e.contains("must not be NULL"), "{e}");
        let e = err("SELECT simhash(t, t) FROM (VALUES ('x')) AS v(t)").await;
        assert!(e.contains("constant string"), "{e}");
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
