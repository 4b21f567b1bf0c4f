//! The project's SQL functions, one file each. They are stateless (every option is a literal
//! argument), so the same plan can be shipped to other executors.

mod band_key;
mod band_pairs;
mod bits;
mod bucket;
pub mod ffi;
mod hamming;
mod hive_partition;
mod simhash;
pub(crate) mod similarity;

use std::sync::Arc;

use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::ScalarUDF;

pub use band_key::{band_key_udf, shared_band_udf};
pub use band_pairs::band_pairs_udaf;
pub(crate) use band_pairs::{FingerprintColumn, pairs_of_group};
pub use bits::{signed_bits_udf, unsigned_bits_udf};
pub use bucket::bucket_udf;
pub use hamming::hamming_udf;
pub(crate) use hamming::wide_value;
pub use hive_partition::{hive_partition_value_udf, is_partition_type};
pub use simhash::{
    clean_text_udf, fingerprints, simhash_details_udf, simhash_sketch_udf, simhash_udf,
};
pub use similarity::{sketch_similarity_udf, sketch_type};

/// Every scalar function this crate provides (the aggregate `band_pairs` is registered beside
/// them by `register_all`).
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        simhash_udf(),
        simhash_details_udf(),
        simhash_sketch_udf(),
        sketch_similarity_udf(),
        clean_text_udf(),
        hamming_udf(),
        bucket_udf(),
        band_key_udf(),
        shared_band_udf(),
        signed_bits_udf(),
        unsigned_bits_udf(),
        hive_partition_value_udf(),
    ]
}

/// Registers every function of this crate, e.g. in a `SessionContext`.
pub fn register_all(registry: &mut dyn FunctionRegistry) -> datafusion::error::Result<()> {
    for udf in functions() {
        registry.register_udf(udf)?;
    }
    registry.register_udaf(band_pairs_udaf())?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod test_util {
    use datafusion::arrow::array::RecordBatch;
    use datafusion::prelude::SessionContext;

    /// A context with this crate's functions, for tests that run SQL.
    pub fn context() -> SessionContext {
        let mut ctx = SessionContext::new();
        super::register_all(&mut ctx).expect("register functions");
        ctx
    }

    pub async fn sql(sql: &str) -> Vec<RecordBatch> {
        context()
            .sql(sql)
            .await
            .expect("plan")
            .collect()
            .await
            .expect("run")
    }
}
