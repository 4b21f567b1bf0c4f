//! `neardup generate-fingerprints`: random 64-bit fingerprints with planted neighbours, to test
//! and measure the matching alone (`neardup match`) at 10M-100M rows without any text.
//!
//! Streamed in blocks of 2^20 rows, so memory stays flat whatever the count: a planted
//! neighbour copies a fingerprint of its own block and flips 1..=max-distance distinct bits.
//! Deterministic from the seed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;

use crate::engine::partial_file::{Existing, PartialFile};
use crate::error::{Error, QueryContext, Result};
use crate::rng::SplitMix64;

/// What to generate.
#[derive(Debug, Clone)]
pub struct FingerprintOptions {
    pub output: PathBuf,
    pub count: u64,
    /// Share of rows that are planted neighbours of an earlier row (0..=1).
    pub neighbours: f64,
    /// Neighbours differ in 1..=this many bits (0: exact copies).
    pub max_distance: u32,
    pub seed: u64,
    pub overwrite: bool,
}

const BLOCK: usize = 1 << 20;

/// Writes `count` rows (id 0.., simhash) to `output`; returns how many were planted neighbours.
pub fn write_fingerprints(options: &FingerprintOptions) -> Result<u64> {
    if !(0.0..=1.0).contains(&options.neighbours) {
        return Err(Error::Usage(format!(
            "--neighbours {} is not a share between 0 and 1",
            options.neighbours
        )));
    }
    if options.max_distance > 64 {
        return Err(Error::Usage(format!(
            "--max-distance {} is more than the 64 bits of a fingerprint",
            options.max_distance
        )));
    }
    // Written under a partial name and renamed: the file appears whole or not at all (a failed
    // or interrupted run removes the partial file).
    let existing = Existing::from_overwrite(options.overwrite);
    let (partial, file) = PartialFile::create(&options.output, "--output", existing)?;
    let planted = write_blocks(file, partial.path(), options)?;
    partial.commit()?;
    Ok(planted)
}

/// Writes the rows into `file` (at `path`, which errors name); returns the planted count.
fn write_blocks(file: File, path: &Path, options: &FingerprintOptions) -> Result<u64> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("simhash", DataType::UInt64, false),
    ]));
    let parquet = |e| Error::parquet(path, e);
    let mut writer = ArrowWriter::try_new(file, Arc::clone(&schema), None).map_err(parquet)?;
    let mut random = SplitMix64(options.seed);
    let threshold = (options.neighbours * u64::MAX as f64) as u64;
    let (mut written, mut planted) = (0u64, 0u64);
    let mut block: Vec<u64> = Vec::with_capacity(BLOCK);
    while written < options.count {
        let size = (options.count - written).min(BLOCK as u64) as usize;
        block.clear();
        for _ in 0..size {
            let fingerprint = if !block.is_empty() && random.next_u64() < threshold {
                planted += 1;
                let base = block[random.below(block.len())];
                let distance = if options.max_distance == 0 {
                    0
                } else {
                    1 + random.below(options.max_distance as usize) as u32
                };
                let mut f = base;
                while (f ^ base).count_ones() < distance {
                    f ^= 1 << (random.next_u64() % 64);
                }
                f
            } else {
                random.next_u64()
            };
            block.push(fingerprint);
        }
        let first = written as i64;
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(first..first + size as i64)),
                Arc::new(UInt64Array::from_iter_values(block.iter().copied())),
            ],
        )
        .context(|| format!("building rows of {}", path.display()))?;
        writer.write(&batch).map_err(parquet)?;
        written += size as u64;
    }
    writer.close().map_err(parquet)?;
    Ok(planted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    fn read(path: &Path) -> Vec<u64> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let column = batch
                .column(1)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .unwrap();
            out.extend(column.values().iter().copied());
        }
        out
    }

    #[test]
    fn planted_neighbours_are_within_the_distance_and_runs_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let options = FingerprintOptions {
            output: dir.path().join("fp.parquet"),
            count: 5_000,
            neighbours: 0.3,
            max_distance: 3,
            seed: 7,
            overwrite: false,
        };
        let planted = write_fingerprints(&options).unwrap();
        let rows = read(&options.output);
        assert_eq!(rows.len(), 5_000);
        assert!((1_200..1_800).contains(&planted), "{planted}");
        // Every planted row has an earlier row within 1..=3 bits; random rows almost never do.
        let near_earlier = (1..rows.len())
            .filter(|&i| {
                rows[..i]
                    .iter()
                    .any(|&e| (1..=3).contains(&(e ^ rows[i]).count_ones()))
            })
            .count() as u64;
        assert_eq!(near_earlier, planted);
        // Same seed, same file; an existing file needs --overwrite.
        assert!(write_fingerprints(&options).is_err());
        let again = FingerprintOptions {
            overwrite: true,
            ..options.clone()
        };
        write_fingerprints(&again).unwrap();
        assert_eq!(read(&options.output), rows);
        let bad = FingerprintOptions {
            neighbours: 1.5,
            ..again
        };
        assert!(write_fingerprints(&bad).is_err());
    }
}
