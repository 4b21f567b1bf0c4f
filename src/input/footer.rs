//! Column chunks that a damaged Parquet footer places outside its file. The footer states where
//! each row group's column chunks start and how long they are; the Parquet reader trusts those
//! numbers and, for a negative one, stops the process (an assertion) when it reads the chunk,
//! long after the file was opened and without naming it. Every chunk is checked against the
//! file's size when a local file's footer is first read, so such a file is refused at the
//! start, named. (A file on an object store, or damage this does not see, stops the reader in
//! a stage: the job catches that and names the file, `crate::engine::caught_panics`.)

use datafusion::parquet::file::metadata::ParquetMetaData;

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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::metadata::ParquetMetaDataReader;

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
