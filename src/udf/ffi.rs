//! The SQL functions as datafusion-ffi structs, for a DataFusion built apart from this one:
//! datafusion-python loads them from the wheel in `python/`.
//!
//! datafusion-ffi hands every argument over as an array of the batch's length, literals too.
//! The functions check their options once per batch from a literal (`simhash(text,
//! 'mode=auto')`), so each scalar function is wrapped: an argument after the first that holds
//! one value on every row goes in as that value, as it would in a local plan.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Scalar, new_empty_array};
use datafusion::arrow::compute::kernels::cmp::distinct;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

pub use datafusion_ffi::udaf::FFI_AggregateUDF;
pub use datafusion_ffi::udf::FFI_ScalarUDF;

/// Every scalar function of [`super::functions`], ready to cross the FFI.
pub fn scalar_functions() -> Vec<FFI_ScalarUDF> {
    super::functions()
        .into_iter()
        .map(|udf| Arc::new(ScalarUDF::new_from_impl(LiteralsAsScalars { inner: udf })).into())
        .collect()
}

/// The aggregate functions (`band_pairs`), ready to cross the FFI. Aggregates receive arrays
/// in a local plan too, so they need no wrapper.
pub fn aggregate_functions() -> Vec<FFI_AggregateUDF> {
    vec![super::band_pairs_udaf().into()]
}

/// A scalar function whose constant arguments after the first are passed as scalars.
#[derive(Debug, PartialEq, Eq, Hash)]
struct LiteralsAsScalars {
    inner: Arc<ScalarUDF>,
}

impl ScalarUDFImpl for LiteralsAsScalars {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        if rows == 0 {
            // No row holds the literal's value; there is nothing to compute either.
            return Ok(ColumnarValue::Array(new_empty_array(
                args.return_field.data_type(),
            )));
        }
        for arg in args.args.iter_mut().skip(1) {
            if let ColumnarValue::Array(array) = arg
                && let Some(value) = one_value(array)?
            {
                *arg = ColumnarValue::Scalar(value);
            }
        }
        match self.inner.invoke_with_args(args)? {
            // The other side expects one value per row.
            ColumnarValue::Scalar(value) => Ok(ColumnarValue::Array(value.to_array_of_size(rows)?)),
            array => Ok(array),
        }
    }
}

/// The value every row of `array` holds (NULL counts as a value), if there is one.
fn one_value(array: &ArrayRef) -> Result<Option<ScalarValue>> {
    if array.is_empty() {
        return Ok(None);
    }
    let first = Scalar::new(array.slice(0, 1));
    if distinct(array, &first)?.true_count() > 0 {
        return Ok(None);
    }
    Ok(Some(ScalarValue::try_from_array(array, 0)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{StringArray, UInt64Array};
    use datafusion::arrow::datatypes::Field;
    use datafusion::config::ConfigOptions;

    /// Calls `function` as datafusion-ffi does: every argument an array of `rows` rows.
    fn call_with_arrays(function: &ScalarUDF, args: Vec<ArrayRef>) -> Result<ArrayRef> {
        let rows = args[0].len();
        let arg_fields: Vec<FieldRef> = args
            .iter()
            .map(|a| Arc::new(Field::new("a", a.data_type().clone(), true)))
            .collect();
        let scalars: Vec<Option<ScalarValue>> =
            args.iter().map(|a| one_value(a).ok().flatten()).collect();
        let scalar_refs: Vec<Option<&ScalarValue>> = scalars.iter().map(|s| s.as_ref()).collect();
        let return_field = function.return_field_from_args(ReturnFieldArgs {
            arg_fields: &arg_fields,
            scalar_arguments: &scalar_refs,
        })?;
        let out = function.invoke_with_args(ScalarFunctionArgs {
            args: args.into_iter().map(ColumnarValue::Array).collect(),
            arg_fields,
            number_rows: rows,
            return_field,
            config_options: Arc::new(ConfigOptions::default()),
        })?;
        out.into_array(rows)
    }

    fn wrapped(udf: Arc<ScalarUDF>) -> ScalarUDF {
        ScalarUDF::new_from_impl(LiteralsAsScalars { inner: udf })
    }

    #[test]
    fn options_given_as_a_column_of_one_value_fingerprint_as_a_literal_does() {
        let texts: ArrayRef = Arc::new(StringArray::from(vec![
            Some("the quick brown fox jumps over the lazy dog"),
            None,
            Some("敏捷的棕色狐狸跳过了懒狗"),
        ]));
        let options: ArrayRef = Arc::new(StringArray::from(vec!["mode=auto"; 3]));
        let through_ffi = call_with_arrays(
            &wrapped(super::super::simhash_udf()),
            vec![Arc::clone(&texts), options],
        )
        .unwrap();
        let ctx = super::super::test_util::context();
        let local = tokio::runtime::Runtime::new().unwrap().block_on(async {
            let batches = ctx
                .sql(
                    "SELECT simhash(t, 'mode=auto') AS h FROM (VALUES \
                     ('the quick brown fox jumps over the lazy dog', 1), (NULL, 2), \
                     ('敏捷的棕色狐狸跳过了懒狗', 3)) AS v(t, n) ORDER BY n",
                )
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            Arc::clone(batches[0].column(0))
        });
        let through_ffi = through_ffi.as_any().downcast_ref::<UInt64Array>().unwrap();
        let local = local.as_any().downcast_ref::<UInt64Array>().unwrap();
        assert_eq!(through_ffi, local);
        assert!(through_ffi.is_null(1) && through_ffi.value(0) != through_ffi.value(2));
    }

    #[test]
    fn options_that_differ_by_row_are_refused_as_they_are_in_sql() {
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["a b c d", "e f g h"]));
        let options: ArrayRef = Arc::new(StringArray::from(vec!["mode=auto", "mode=chars"]));
        let error = call_with_arrays(&wrapped(super::super::simhash_udf()), vec![texts, options])
            .unwrap_err();
        assert!(error.to_string().contains("literal"), "{error}");
    }

    #[test]
    fn a_batch_of_no_rows_gives_no_rows() {
        let texts: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
        let options: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
        let function = wrapped(super::super::simhash_udf());
        let out = function
            .invoke_with_args(ScalarFunctionArgs {
                args: vec![ColumnarValue::Array(texts), ColumnarValue::Array(options)],
                arg_fields: vec![
                    Arc::new(Field::new("t", DataType::Utf8, true)),
                    Arc::new(Field::new("o", DataType::Utf8, true)),
                ],
                number_rows: 0,
                return_field: Arc::new(Field::new("h", DataType::UInt64, true)),
                config_options: Arc::new(ConfigOptions::default()),
            })
            .unwrap();
        let ColumnarValue::Array(out) = out else {
            panic!("an array")
        };
        assert_eq!((out.len(), out.data_type()), (0, &DataType::UInt64));
    }

    #[test]
    fn every_function_crosses_with_its_name() {
        let names: Vec<String> = scalar_functions()
            .iter()
            .map(|f| f.name.to_string())
            .collect();
        let local: Vec<String> = super::super::functions()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        assert_eq!(names, local);
        assert_eq!(aggregate_functions()[0].name.to_string(), "band_pairs");
    }
}
