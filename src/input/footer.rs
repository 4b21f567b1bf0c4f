//! Column chunks that a damaged Parquet footer places outside its file. The footer states where
//! each row group's column chunks start and how long they are; the Parquet reader trusts those
//! numbers and, for a negative one, stops the process (an assertion) when it reads the chunk,
//! long after the file was opened and without naming it. Every chunk is checked against the
//! file's size when the footer is first read, so such a file is refused at the start, named.
//! So is a footer whose Arrow schema (the copy of the columns' types that Arrow writers store)
//! the Arrow reader stops on.

use datafusion::parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};

use datafusion::parquet::arrow::parquet_to_arrow_schema;

use crate::engine::caught_panics;
use crate::error::{Error, Result};
use crate::storage::Remote;

/// What the Arrow reader says when it stops (panics) on the footer's Arrow schema; `None` when
/// it reads, or fails with an error of its own, which the reader gives again when the file is
/// opened.
pub fn damaged_arrow_schema(metadata: &ParquetMetaData) -> Option<String> {
    let file = metadata.file_metadata();
    caught_panics::catch(|| parquet_to_arrow_schema(file.schema_descr(), file.key_value_metadata()))
        .err()
        .map(|stopped| format!("its footer is damaged: the Arrow reader stopped on it ({stopped})"))
}

/// What is wrong with the first column chunk the footer places outside a file of `size` bytes,
/// naming its row group and column; `None` when every chunk lies inside the file.
pub fn misplaced_chunk(metadata: &ParquetMetaData, size: u64) -> Option<String> {
    for (group, row_group) in metadata.row_groups().iter().enumerate() {
        for column in row_group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let length = column.compressed_size();
            let place = format!(
                "column '{}' of row group {group}",
                column.column_path().string()
            );
            let (Ok(start), Ok(length)) = (u64::try_from(start), u64::try_from(length)) else {
                return Some(format!(
                    "its footer places {place} at offset {start} with length {length}: the \
                     footer is damaged"
                ));
            };
            match start.checked_add(length) {
                Some(end) if end <= size => {}
                _ => {
                    return Some(format!(
                        "its footer places {place} ({length} bytes at offset {start}) past the \
                         file's end ({size} bytes): the footer is damaged, or the file was cut \
                         short"
                    ));
                }
            }
        }
    }
    None
}

/// Refuses the Parquet object at `remote` if its footer places a column chunk outside it or
/// stops the Arrow reader; the error names the object. An object or footer that does not read
/// is left to the reader, whose own error names the object.
pub async fn check_remote(remote: &Remote) -> Result<()> {
    let Ok(size) = remote.size().await else {
        return Ok(());
    };
    // A Parquet file ends with its footer, the footer's length (4 bytes) and `PAR1`.
    let Some(tail_start) = size.checked_sub(8) else {
        return Ok(());
    };
    let Ok(tail) = remote.read_range(tail_start..size).await else {
        return Ok(());
    };
    let Ok(tail) = FooterTail::try_from(&tail[..]) else {
        return Ok(());
    };
    let Some(footer_start) = tail_start.checked_sub(tail.metadata_length() as u64) else {
        return Ok(());
    };
    let Ok(footer) = remote.read_range(footer_start..tail_start).await else {
        return Ok(());
    };
    let Ok(metadata) = ParquetMetaDataReader::decode_metadata(&footer) else {
        return Ok(());
    };
    match misplaced_chunk(&metadata, size).or_else(|| damaged_arrow_schema(&metadata)) {
        None => Ok(()),
        Some(why) => Err(Error::Input(format!(
            "{} is not a readable Parquet file: {why}",
            remote.url()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;

    use super::*;

    #[test]
    fn a_chunk_reaching_past_the_file_is_named_with_its_row_group_and_column() {
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![1, 2])) as _),
            ("text", Arc::new(StringArray::from(vec!["a", "b"])) as _),
        ])
        .unwrap();
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let metadata = ParquetMetaDataReader::new()
            .parse_and_finish(&Bytes::from(file.clone()))
            .unwrap();
        let size = file.len() as u64;
        assert_eq!(misplaced_chunk(&metadata, size), None);
        assert_eq!(damaged_arrow_schema(&metadata), None);
        // The same footer in a file cut short before its last column ends.
        let text = metadata.row_group(0).column(1);
        let text_start = text
            .dictionary_page_offset()
            .unwrap_or(text.data_page_offset()) as u64;
        let cut = text_start + 1;
        let why = misplaced_chunk(&metadata, cut).unwrap();
        assert!(
            why.contains("column 'text' of row group 0") && why.contains(&format!("({cut} bytes)")),
            "{why}"
        );
    }
}
