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

use crate::error::{Error, Result};
use crate::generate::SplitMix64;

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
pub fn generate(options: &FingerprintOptions) -> Result<u64> {
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
    if options.output.exists() && !options.overwrite {
        return Err(Error::Usage(format!(
            "{} already exists; pass --overwrite to replace it",
            options.output.display()
        )));
    }
    let partial = partial_path(&options.output);
    let planted = write_blocks(&partial, options).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })?;
    std::fs::rename(&partial, &options.output).map_err(|e| Error::io(&options.output, e))?;
    Ok(planted)
}

/// Beside the target, so the rename is atomic: the file appears whole or not at all.
fn partial_path(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!(".{name}.partial"))
}

fn write_blocks(path: &Path, options: &FingerprintOptions) -> Result<u64> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("simhash", DataType::UInt64, false),
    ]));
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let parquet = |e: datafusion::parquet::errors::ParquetError| {
        Error::Input(format!("writing {}: {e}", path.display()))
    };
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
        .map_err(|e| Error::Internal(e.to_string()))?;
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
        let planted = generate(&options).unwrap();
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
        assert!(generate(&options).is_err());
        let again = FingerprintOptions {
            overwrite: true,
            ..options.clone()
        };
        generate(&again).unwrap();
        assert_eq!(read(&options.output), rows);
        let bad = FingerprintOptions {
            neighbours: 1.5,
            ..again
        };
        assert!(generate(&bad).is_err());
    }
}
