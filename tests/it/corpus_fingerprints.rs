//! The fingerprints of real corpora do not move: every document of the shared corpora
//! (`../shared/data`, or `NEARDUP_SHARED_DATA`), fingerprinted in each feature mode, against
//! the digests pinned in `fixtures/corpus_fingerprints.json` before the kernel was made faster.
//! Skips, saying so, when the corpora are not there.

use std::fs::File;
use std::path::PathBuf;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use neardup::text::{Featurizer, Scratch};
use xxhash_rust::xxh3::Xxh3;

use crate::common::fixture;

fn shared_data() -> PathBuf {
    std::env::var_os("NEARDUP_SHARED_DATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"),
        PathBuf::from,
    )
}

/// The digest the fixture describes, and the number of rows, of one corpus in one mode.
fn digest(corpus: &PathBuf, options: &str) -> (usize, String) {
    let featurizer = Featurizer::new(neardup::text::FeatureOptions::parse(options).unwrap())
        .unwrap_or_else(|e| panic!("{options}: {e}"));
    let file = File::open(corpus).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut scratch = Scratch::default();
    let mut digest = Xxh3::new();
    let mut rows = 0;
    for batch in reader {
        let batch = batch.unwrap();
        let texts = cast(batch.column_by_name("text").unwrap(), &DataType::Utf8).unwrap();
        for text in texts.as_string::<i32>().iter() {
            rows += 1;
            // The fixture's corpora have no NULL texts; one would change the digest.
            let Some(text) = text else {
                digest.update(&[0xFF]);
                continue;
            };
            let print = featurizer.fingerprint(text, &mut scratch);
            match (print.simhash, print.simhash128) {
                (Some(h), _) => {
                    digest.update(&[1]);
                    digest.update(&h.to_le_bytes());
                }
                (_, Some(h)) => {
                    digest.update(&[2]);
                    digest.update(&h.to_le_bytes());
                }
                _ => digest.update(&[0]),
            }
            digest.update(&print.features.to_le_bytes());
            digest.update(&featurizer.sketch(&scratch));
        }
    }
    (rows, format!("{:016x}", digest.digest()))
}

#[test]
fn shared_corpora_fingerprint_as_pinned() {
    let data = shared_data();
    if !data.join("debian_docs/docs.parquet").exists() {
        eprintln!(
            "skipped: the shared corpora are not at {} (set NEARDUP_SHARED_DATA)",
            data.display()
        );
        return;
    }
    let pinned: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("corpus_fingerprints.json")).unwrap(),
    )
    .unwrap();
    let pinned = pinned["digests"].as_array().unwrap();
    assert!(pinned.len() >= 10, "every corpus and mode is pinned");
    for entry in pinned {
        let corpus = data.join(entry["corpus"].as_str().unwrap());
        let options = entry["features"].as_str().unwrap();
        let (rows, got) = digest(&corpus, options);
        assert_eq!(
            (rows as u64, got.as_str()),
            (
                entry["rows"].as_u64().unwrap(),
                entry["digest"].as_str().unwrap()
            ),
            "{} with features {options:?}",
            corpus.display()
        );
    }
}
