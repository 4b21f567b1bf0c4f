//! Where each page of a Parquet file starts, read from the pages' own headers when the file has
//! no page index, so that a row range (`crate::engine::row_slices`) fetches and decodes only
//! its own pages.
//!
//! Without page locations the reader cannot tell which bytes of a column chunk hold a range's
//! rows: each range fetched its row group's whole column chunks and held them, and skipped the
//! pages before its rows by reading their headers. Cut into as many ranges as cores, a file of
//! one row group was read once per core and held once per core (32 times on 32 cores). A page
//! header states the page's size and its rows, so walking the headers (a small read each,
//! nothing decompressed) gives the file's offset index, which the reader then uses as if the
//! writer had stored it. Many writers do not store one (pyarrow by default, and debian_docs'
//! file). A stored one is loaded if the metadata came without it. Headers are read only from
//! local files (`PagedFiles::read_headers`); a file on an object store without an offset index
//! is read as before.
//!
//! The headers are Thrift's compact encoding. Parquet's own reader of them is private to the
//! parquet crate; the few fields needed (type, size, values or rows) are read here, and the
//! rest skipped, rather than adding a Thrift crate. A header that cannot be read, a column
//! with repeated values (whose pages' row counts are not in a version 1 header) or page sizes
//! that do not add up to the column chunk leave the file as it was: read as before.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use datafusion::common::HashMap;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::ParquetRowSelection;
use datafusion::parquet::arrow::arrow_reader::ArrowReaderOptions;
use datafusion::parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use datafusion::parquet::errors::{ParquetError, Result as ParquetResult};
use datafusion::parquet::file::metadata::{
    ColumnChunkMetaData, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader,
    ParquetOffsetIndex,
};
use datafusion::parquet::file::page_index::offset_index::{OffsetIndexMetaData, PageLocation};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::OnceCell;

/// Bytes read for a page header at first: a header without statistics takes a few dozen; one
/// with a text column's minimum and maximum, a few KiB. A longer one is read again from its
/// start in a window eight times as large.
const HEADER_PROBE: u64 = 4096;

/// Readers of Parquet files, from `inner`, whose metadata holds page locations: the file's
/// stored offset index, or else (with `read_headers`) one read from its pages' headers. Each
/// file's are found once and shared by every partition that reads it.
pub struct PagedFiles {
    inner: Arc<dyn ParquetFileReaderFactory>,
    /// Whether page headers are read where a file stores no offset index: a small read per
    /// page, one after the other. Cheap from a local disk; from an object store each is a
    /// request, and a file of a thousand pages would wait on a thousand of them.
    read_headers: bool,
    /// Each file's metadata with its page locations, by path, size and modification time.
    found: Mutex<HashMap<String, Arc<OnceCell<Arc<ParquetMetaData>>>>>,
}

impl PagedFiles {
    pub fn new(inner: Arc<dyn ParquetFileReaderFactory>, read_headers: bool) -> Self {
        Self {
            inner,
            read_headers,
            found: Mutex::default(),
        }
    }
}

impl fmt::Debug for PagedFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PagedFiles")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl ParquetFileReaderFactory for PagedFiles {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> datafusion::error::Result<Box<dyn AsyncFileReader + Send>> {
        // A file read whole (no row range of it) needs no page locations.
        if file.extensions.get::<ParquetRowSelection>().is_none() {
            return self
                .inner
                .create_reader(partition_index, file, metadata_size_hint, metrics);
        }
        let meta = &file.object_meta;
        let path = meta.location.to_string();
        let key = format!("{path} {} {}", meta.size, meta.last_modified);
        let found = {
            let mut found = self
                .found
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            Arc::clone(found.entry(key).or_default())
        };
        let inner = self
            .inner
            .create_reader(partition_index, file, metadata_size_hint, metrics)?;
        Ok(Box::new(PagedReader {
            inner,
            path,
            read_headers: self.read_headers,
            found,
        }))
    }
}

/// A file's reader whose metadata has page locations where they could be found.
struct PagedReader {
    inner: Box<dyn AsyncFileReader + Send>,
    /// The file's path, for the debug log.
    path: String,
    read_headers: bool,
    found: Arc<OnceCell<Arc<ParquetMetaData>>>,
}

impl AsyncFileReader for PagedReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
        self.inner.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, ParquetResult<Vec<Bytes>>> {
        self.inner.get_byte_ranges(ranges)
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, ParquetResult<Arc<ParquetMetaData>>> {
        async move {
            let found = Arc::clone(&self.found);
            let (inner, path, read_headers) = (&mut self.inner, &self.path, self.read_headers);
            let metadata = found
                .get_or_try_init(|| async move {
                    let metadata = inner.get_metadata(options).await?;
                    Ok::<_, ParquetError>(
                        with_page_locations(metadata, inner.as_mut(), path, read_headers).await,
                    )
                })
                .await?;
            Ok(Arc::clone(metadata))
        }
        .boxed()
    }
}

/// `metadata` with an offset index: the file's own if it has one, else (with `read_headers`)
/// one read from the pages' headers, else none (`metadata` as it is: the file is read as
/// before, so nothing here fails a query).
async fn with_page_locations(
    metadata: Arc<ParquetMetaData>,
    reader: &mut (dyn AsyncFileReader + Send),
    path: &str,
    read_headers: bool,
) -> Arc<ParquetMetaData> {
    if has_offset_index(&metadata) {
        return metadata;
    }
    let stored = metadata.row_groups().iter().any(|row_group| {
        row_group
            .columns()
            .iter()
            .any(|column| column.offset_index_offset().is_some())
    });
    if stored {
        let mut loading = ParquetMetaDataReader::new_with_metadata((*metadata).clone())
            .with_offset_index_policy(PageIndexPolicy::Optional);
        let loaded = loading.load_page_index(Fetch(reader)).await;
        match loaded.and_then(|()| loading.finish()) {
            Ok(loaded) if has_offset_index(&loaded) => return Arc::new(loaded),
            Ok(_) => log::debug!("{path}: its offset index is incomplete"),
            Err(e) => log::debug!("{path}: its offset index did not load: {e}"),
        }
    }
    if !read_headers {
        return metadata;
    }
    let mut index: ParquetOffsetIndex = Vec::with_capacity(metadata.num_row_groups());
    for (at, row_group) in metadata.row_groups().iter().enumerate() {
        let mut columns = Vec::with_capacity(row_group.num_columns());
        for column in row_group.columns() {
            match column_page_locations(reader, column, row_group.num_rows()).await {
                Ok(page_locations) => columns.push(OffsetIndexMetaData {
                    page_locations,
                    unencoded_byte_array_data_bytes: None,
                }),
                Err(why) => {
                    let name = column.column_path();
                    log::debug!("{path}: no page locations (row group {at}, column {name}): {why}");
                    return metadata;
                }
            }
        }
        index.push(columns);
    }
    let with_index = (*metadata)
        .clone()
        .into_builder()
        .set_offset_index(Some(index))
        .build();
    Arc::new(with_index)
}

/// Whether `metadata` has an offset index for every column of every row group.
fn has_offset_index(metadata: &ParquetMetaData) -> bool {
    metadata.offset_index().is_some_and(|index| {
        index.len() == metadata.num_row_groups()
            && index
                .iter()
                .zip(metadata.row_groups())
                .all(|(columns, row_group)| columns.len() == row_group.num_columns())
    })
}

/// A reader as parquet's metadata reader takes one.
struct Fetch<'a>(&'a mut (dyn AsyncFileReader + Send));

impl MetadataFetch for Fetch<'_> {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
        self.0.get_bytes(range)
    }
}

/// The locations of a column chunk's data pages, from their headers, or why they cannot be
/// known. The headers are read from windows of the chunk (`HEADER_PROBE` bytes, or more for a
/// long header), so that small pages take one read for many. The walk stops at the first page
/// that does not fit a well-formed chunk: a dictionary page after the first page (a reader
/// reads it and changes dictionaries; by the locations it would be passed over), more rows
/// than the row group has, a page beyond the chunk.
async fn column_page_locations(
    reader: &mut (dyn AsyncFileReader + Send),
    column: &ColumnChunkMetaData,
    rows: i64,
) -> Result<Vec<PageLocation>, &'static str> {
    if column.column_descr().max_rep_level() > 0 {
        return Err("its values repeat");
    }
    // As `ColumnChunkMetaData::byte_range`, which asserts what a damaged footer may break.
    let start = column
        .dictionary_page_offset()
        .unwrap_or(column.data_page_offset());
    let start = u64::try_from(start).map_err(|_| "a negative offset")?;
    let length = u64::try_from(column.compressed_size()).map_err(|_| "a negative size")?;
    let end = start.checked_add(length).ok_or("a chunk past the end")?;
    let mut locations = Vec::new();
    let mut window = Bytes::new();
    let mut window_start = start;
    let mut at = start;
    let mut first_row = 0i64;
    let mut pages = 0usize;
    while at < end {
        let (header, header_length) = loop {
            let offset = usize::try_from(at - window_start).unwrap_or(usize::MAX);
            let held = window.get(offset..).unwrap_or_default();
            match page_header(held) {
                Ok(read) => break read,
                Err(Unread::Short) if (held.len() as u64) < end - at => {
                    let wanted = (held.len() as u64 * 8).max(HEADER_PROBE).min(end - at);
                    window = reader
                        .get_bytes(at..at + wanted)
                        .await
                        .map_err(|_| "a page header did not read")?;
                    window_start = at;
                }
                Err(_) => return Err("a page header is not one"),
            }
        };
        let size = u64::try_from(header.compressed_size)
            .ok()
            .and_then(|size| size.checked_add(header_length as u64))
            .filter(|&size| size <= end - at)
            .ok_or("a page past the chunk's end")?;
        pages += 1;
        // A dictionary, then at least a row a page (an empty row group may have one empty
        // page): more pages than that is no chunk a writer made, and could be very many.
        if pages as u64 > u64::try_from(rows).unwrap_or(0) + 2 {
            return Err("more pages than rows");
        }
        let page_rows = match (header.kind, pages) {
            (DATA_PAGE, _) => header.values,
            (DATA_PAGE_V2, _) => header.rows,
            // Not in the offset index, which lists the data pages.
            (DICTIONARY_PAGE, 1) | (INDEX_PAGE, _) => {
                at += size;
                continue;
            }
            (DICTIONARY_PAGE, _) => return Err("a dictionary page after the first page"),
            _ => return Err("a page of unknown type"),
        }
        .ok_or("a data page without its rows")?;
        locations.push(PageLocation {
            offset: i64::try_from(at).map_err(|_| "an offset past 2^63")?,
            compressed_page_size: i32::try_from(size).map_err(|_| "a page over 2 GiB")?,
            first_row_index: first_row,
        });
        first_row = first_row
            .checked_add(i64::from(page_rows))
            .filter(|&next| next <= rows)
            .ok_or("more rows than the row group's")?;
        at += size;
    }
    if first_row != rows {
        return Err("fewer rows than the row group's");
    }
    Ok(locations)
}

/// Page types (parquet.thrift's `PageType`).
const DATA_PAGE: i32 = 0;
const INDEX_PAGE: i32 = 1;
const DICTIONARY_PAGE: i32 = 2;
const DATA_PAGE_V2: i32 = 3;

/// What a page header says of the page: its type, its size after the header, and its values
/// (version 1: one per row where no value repeats) or rows (version 2).
#[derive(Debug, Default, PartialEq, Eq)]
struct PageHeader {
    kind: i32,
    compressed_size: i32,
    values: Option<i32>,
    rows: Option<i32>,
}

/// Why a header was not read.
#[derive(Debug, PartialEq, Eq)]
enum Unread {
    /// The bytes ended inside it.
    Short,
    /// Not a page header.
    Invalid,
}

type Read<T> = Result<T, Unread>;

/// The page header at the start of `bytes` and its length in bytes.
fn page_header(bytes: &[u8]) -> Read<(PageHeader, usize)> {
    let mut input = Compact { bytes, at: 0 };
    let mut header = PageHeader::default();
    let mut last = 0;
    while let Some((id, kind)) = input.field(&mut last)? {
        match (id, kind) {
            (1, I32) => header.kind = input.i32()?,
            (3, I32) => header.compressed_size = input.i32()?,
            // The data page header's first field is its values; version 2's third, its rows.
            (5, STRUCT) => [header.values] = input.struct_i32s([1])?,
            (8, STRUCT) => [header.values, header.rows] = input.struct_i32s([1, 3])?,
            _ => input.skip(kind, 0)?,
        }
    }
    Ok((header, input.at))
}

/// Thrift compact type codes.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

/// Structs nested deeper than this are not a page header.
const MAX_DEPTH: u8 = 16;

/// A reader of Thrift's compact encoding.
struct Compact<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Compact<'_> {
    fn byte(&mut self) -> Read<u8> {
        let byte = *self.bytes.get(self.at).ok_or(Unread::Short)?;
        self.at += 1;
        Ok(byte)
    }

    fn skip_bytes(&mut self, count: u64) -> Read<()> {
        let left = (self.bytes.len() - self.at) as u64;
        if count > left {
            return Err(Unread::Short);
        }
        self.at += count as usize;
        Ok(())
    }

    fn varint(&mut self) -> Read<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Unread::Invalid)
    }

    fn i32(&mut self) -> Read<i32> {
        let zigzag = self.varint()?;
        let value = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
        i32::try_from(value).map_err(|_| Unread::Invalid)
    }

    /// The next field's id and type, or `None` at the struct's end.
    fn field(&mut self, last: &mut i16) -> Read<Option<(i16, u8)>> {
        let byte = self.byte()?;
        if byte == 0 {
            return Ok(None);
        }
        let delta = i16::from(byte >> 4);
        let id = if delta == 0 {
            // A full id, as a zigzag varint.
            i16::try_from(self.i32()?).map_err(|_| Unread::Invalid)?
        } else {
            last.checked_add(delta).ok_or(Unread::Invalid)?
        };
        *last = id;
        Ok(Some((id, byte & 0x0F)))
    }

    /// A struct whose fields `ids`, where they are I32, are returned in that order; the rest
    /// are skipped.
    fn struct_i32s<const N: usize>(&mut self, ids: [i16; N]) -> Read<[Option<i32>; N]> {
        let mut values = [None; N];
        let mut last = 0;
        while let Some((id, kind)) = self.field(&mut last)? {
            match ids.iter().position(|&wanted| wanted == id) {
                Some(slot) if kind == I32 => values[slot] = Some(self.i32()?),
                _ => self.skip(kind, 1)?,
            }
        }
        Ok(values)
    }

    /// Skips a field's value of type `kind`.
    fn skip(&mut self, kind: u8, depth: u8) -> Read<()> {
        if depth > MAX_DEPTH {
            return Err(Unread::Invalid);
        }
        match kind {
            // A field's boolean is in its type.
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.skip_bytes(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip_bytes(8),
            BINARY => {
                let length = self.varint()?;
                self.skip_bytes(length)
            }
            LIST | SET => {
                let head = self.byte()?;
                let count = match head >> 4 {
                    15 => self.varint()?,
                    short => u64::from(short),
                };
                for _ in 0..count {
                    self.skip_element(head & 0x0F, depth + 1)?;
                }
                Ok(())
            }
            MAP => {
                let count = self.varint()?;
                if count > 0 {
                    let kinds = self.byte()?;
                    for _ in 0..count {
                        self.skip_element(kinds >> 4, depth + 1)?;
                        self.skip_element(kinds & 0x0F, depth + 1)?;
                    }
                }
                Ok(())
            }
            STRUCT => {
                let mut last = 0;
                while let Some((_, kind)) = self.field(&mut last)? {
                    self.skip(kind, depth + 1)?;
                }
                Ok(())
            }
            _ => Err(Unread::Invalid),
        }
    }

    /// Skips an element of a list, set or map: there a boolean takes a byte of its own.
    fn skip_element(&mut self, kind: u8, depth: u8) -> Read<()> {
        match kind {
            BOOL_TRUE | BOOL_FALSE => self.skip_bytes(1),
            _ => self.skip(kind, depth),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::compute::concat_batches;
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::arrow::ParquetRecordBatchStreamBuilder;
    use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
    use datafusion::parquet::basic::Compression;
    use datafusion::parquet::file::properties::{
        EnabledStatistics, WriterProperties, WriterVersion,
    };
    use futures::TryStreamExt;

    use super::*;

    /// A Parquet file in memory that counts the bytes read from it.
    struct InMemory {
        file: Bytes,
        read: Arc<AtomicU64>,
    }

    impl AsyncFileReader for InMemory {
        fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
            self.read
                .fetch_add(range.end - range.start, Ordering::Relaxed);
            let bytes = self.file.slice(range.start as usize..range.end as usize);
            async move { Ok(bytes) }.boxed()
        }

        fn get_metadata<'a>(
            &'a mut self,
            _options: Option<&'a ArrowReaderOptions>,
        ) -> BoxFuture<'a, ParquetResult<Arc<ParquetMetaData>>> {
            let metadata = ParquetMetaDataReader::new().parse_and_finish(&self.file);
            async move { Ok(Arc::new(metadata?)) }.boxed()
        }
    }

    /// 6,000 rows in two row groups: numbers, repeated words (a dictionary page), texts with
    /// nulls and long values, in pages of at most 97 rows. With `offset_index`, the pages'
    /// headers hold their statistics untruncated, some longer than `HEADER_PROBE`; without, the
    /// file has no page index at all.
    fn file(version: WriterVersion, offset_index: bool) -> (Bytes, RecordBatch) {
        let rows = 6000i64;
        let words = ["apt", "dpkg", "debconf", "systemd"];
        let columns: [(&str, ArrayRef); 3] = [
            ("n", Arc::new(Int64Array::from_iter_values(0..rows))),
            (
                "word",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|n| words[n as usize % 4]),
                )),
            ),
            (
                "text",
                Arc::new(StringArray::from_iter((0..rows).map(|n| {
                    (n % 7 != 0).then(|| format!("{n} {}", "x".repeat((n % 300) as usize * 20)))
                }))),
            ),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let statistics = match offset_index {
            true => EnabledStatistics::Page,
            // Page statistics would write an offset index whatever it is told.
            false => EnabledStatistics::Chunk,
        };
        let properties = WriterProperties::builder()
            .set_writer_version(version)
            .set_compression(Compression::UNCOMPRESSED)
            .set_statistics_enabled(statistics)
            .set_write_page_header_statistics(offset_index)
            .set_statistics_truncate_length(None)
            .set_data_page_row_count_limit(97)
            .set_write_batch_size(97)
            .set_max_row_group_row_count(Some(3500))
            .set_offset_index_disabled(!offset_index)
            .build();
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        (Bytes::from(file), batch)
    }

    fn reader(file: &Bytes) -> (InMemory, Arc<AtomicU64>) {
        let read = Arc::new(AtomicU64::new(0));
        let reader = InMemory {
            file: file.clone(),
            read: Arc::clone(&read),
        };
        (reader, read)
    }

    /// Oracle: the offset index the writer stored, against the one read from the same pages'
    /// headers, for pages of both versions.
    #[tokio::test]
    async fn the_headers_give_the_writers_offset_index() {
        for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
            let (file, _) = file(version, true);
            let stored = ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Required)
                .parse_and_finish(&file)
                .unwrap();
            let stored_index = stored.offset_index().unwrap();
            assert_eq!(stored_index.len(), 2, "two row groups");
            let longest_header = stored_index
                .iter()
                .flatten()
                .flat_map(|column| column.page_locations())
                .map(|page| page_header(&file[page.offset as usize..]).unwrap().1)
                .max();
            assert!(
                longest_header > Some(HEADER_PROBE as usize),
                "{longest_header:?}"
            );
            let (mut reader, _) = reader(&file);
            for (row_group, stored_columns) in stored.row_groups().iter().zip(stored_index) {
                for (column, stored_column) in row_group.columns().iter().zip(stored_columns) {
                    let read = column_page_locations(&mut reader, column, row_group.num_rows())
                        .await
                        .expect("every page header is read");
                    assert!(read.len() > 10, "{} pages", read.len());
                    assert_eq!(&read, stored_column.page_locations(), "{version:?}");
                }
            }
        }
    }

    /// A file without an offset index, read in four row ranges through `PagedFiles`' reader:
    /// the same rows as the whole file, and each range fetches far less than the whole file.
    #[tokio::test]
    async fn a_row_range_fetches_only_its_pages() {
        let (file, batch) = file(WriterVersion::PARQUET_1_0, false);
        let plain = ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .unwrap();
        let columns = plain.row_groups().iter().flat_map(|group| group.columns());
        assert!(
            columns.clone().all(|c| c.offset_index_offset().is_none()),
            "no index stored"
        );
        assert_eq!(columns.count(), 6);
        let rows = batch.num_rows();
        let ranges = [0..1500, 1500..3000, 3000..4500, 4500..rows];
        let mut fetched = Vec::new();
        for range in ranges {
            let (inner, read) = reader(&file);
            let mut paged = PagedReader {
                inner: Box::new(inner),
                path: "memory".into(),
                read_headers: true,
                found: Arc::default(),
            };
            let metadata = paged.get_metadata(None).await.unwrap();
            assert!(metadata.offset_index().is_some(), "read from the headers");
            read.store(0, Ordering::Relaxed);
            let selection = RowSelection::from(vec![
                RowSelector::skip(range.start),
                RowSelector::select(range.len()),
                RowSelector::skip(rows - range.end),
            ]);
            let stream = ParquetRecordBatchStreamBuilder::new(paged)
                .await
                .unwrap()
                .with_row_selection(selection)
                .build()
                .unwrap();
            let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
            let got = concat_batches(&batch.schema(), &batches).unwrap();
            assert_eq!(got, batch.slice(range.start, range.len()), "rows {range:?}");
            fetched.push(read.load(Ordering::Relaxed));
        }
        let whole = file.len() as u64;
        assert!(
            fetched.iter().all(|&bytes| bytes < whole / 2),
            "bytes fetched per range {fetched:?} of {whole}"
        );
    }

    /// Without reading headers (an object store), or at a damaged header, the metadata stays
    /// as it was and the file is read as before.
    #[tokio::test]
    async fn what_cannot_be_read_leaves_the_file_as_it_was() {
        let (file, _) = file(WriterVersion::PARQUET_1_0, false);
        let metadata = Arc::new(
            ParquetMetaDataReader::new()
                .parse_and_finish(&file)
                .unwrap(),
        );
        let (mut inner, read) = reader(&file);
        let kept = with_page_locations(Arc::clone(&metadata), &mut inner, "memory", false).await;
        assert!(kept.offset_index().is_none());
        assert_eq!(read.load(Ordering::Relaxed), 0, "nothing read");
        // The first header of the second row group's texts, its first byte an unknown type.
        let text = metadata.row_group(1).column(2);
        let at = text
            .dictionary_page_offset()
            .unwrap_or(text.data_page_offset());
        let mut damaged = file.to_vec();
        damaged[at as usize] = 0x1D;
        let (mut inner, _) = reader(&Bytes::from(damaged));
        let kept = with_page_locations(Arc::clone(&metadata), &mut inner, "memory", true).await;
        assert!(kept.offset_index().is_none());
        let (mut inner, _) = reader(&file);
        let found = with_page_locations(metadata, &mut inner, "memory", true).await;
        assert!(has_offset_index(&found), "the undamaged file's are found");
    }

    #[test]
    fn a_header_cut_short_asks_for_more_and_garbage_is_no_header() {
        // type 0, uncompressed 10, compressed 10, data page header { num_values 5 }.
        let header = [
            0x15, 0x00, 0x15, 0x14, 0x15, 0x14, 0x2C, 0x15, 0x0A, 0x00, 0x00,
        ];
        let expected = PageHeader {
            kind: DATA_PAGE,
            compressed_size: 10,
            values: Some(5),
            rows: None,
        };
        assert_eq!(page_header(&header), Ok((expected, header.len())));
        for cut in 0..header.len() {
            assert_eq!(page_header(&header[..cut]), Err(Unread::Short), "{cut}");
        }
        assert_eq!(page_header(&[0x1D]), Err(Unread::Invalid), "type 13");
        let mut endless = vec![0x15];
        endless.extend([0xFF; 11]);
        assert_eq!(
            page_header(&endless),
            Err(Unread::Invalid),
            "a varint too long"
        );
    }
}
