//! What the benches share: a fingerprint file, the sizes asked for, the texts of a corpus, and
//! reading a run's summary. Each bench uses part of it.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{AsArray, Int64Array, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{ParquetReadOptions, SessionContext};

/// The numbers among the bench's arguments (cargo adds `--bench`), or `default`.
pub fn sizes(default: &[usize]) -> Vec<usize> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        default.to_vec()
    } else {
        sizes
    }
}

/// The non-NULL texts of a Parquet corpus's `text` column, the first `limit` rows if given.
pub async fn texts(corpus: &str, limit: Option<usize>) -> Vec<String> {
    let ctx = SessionContext::new();
    let frame = ctx
        .read_parquet(corpus, ParquetReadOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{corpus}: {e}"))
        .select_columns(&["text"])
        .expect("text column")
        .limit(0, limit)
        .expect("limit");
    let mut out = Vec::new();
    for batch in frame.collect().await.expect("read") {
        let column = datafusion::arrow::compute::cast(batch.column(0), &DataType::Utf8)
            .expect("text as Utf8");
        out.extend(
            column
                .as_string::<i32>()
                .iter()
                .flatten()
                .map(str::to_string),
        );
    }
    out
}

/// Writes fingerprints as Parquet with columns id (0, 1, ...) and simhash, a million per batch.
pub fn write_parquet(path: &Path, fingerprints: &[u64]) {
    write_parquet_from(path, 0, fingerprints);
}

/// The same with ids `first_id`, `first_id + 1`, ...
pub fn write_parquet_from(path: &Path, first_id: i64, fingerprints: &[u64]) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("simhash", DataType::UInt64, false),
    ]));
    let file = std::fs::File::create(path).expect("create the fingerprint file");
    let mut writer = ArrowWriter::try_new(file, Arc::clone(&schema), None).expect("writer");
    for (chunk_index, chunk) in fingerprints.chunks(1 << 20).enumerate() {
        let first = first_id + (chunk_index << 20) as i64;
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(
                    (0..chunk.len() as i64).map(|i| first + i),
                )),
                Arc::new(UInt64Array::from_iter_values(chunk.iter().copied())),
            ],
        )
        .expect("batch");
        writer.write(&batch).expect("write");
    }
    writer.close().expect("close");
}

/// A run's summary.json.
pub fn summary(output: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(output.join("summary.json")).expect("summary"))
        .expect("summary json")
}

/// Seconds of one stage in a summary (NaN if it did not run).
pub fn stage_seconds(summary: &serde_json::Value, stage: &str) -> f64 {
    stage_number(summary, stage, "seconds")
}

/// A number summary.json records for one stage (`seconds`, `cpu_seconds`, ...); NaN if the
/// stage did not run or has no such number.
pub fn stage_number(summary: &serde_json::Value, stage: &str, field: &str) -> f64 {
    summary["stages"]
        .as_array()
        .and_then(|stages| stages.iter().find(|s| s["stage"] == stage))
        .and_then(|s| s[field].as_f64())
        .unwrap_or(f64::NAN)
}
