//! The file formats a corpus may come in: Parquet, JSON Lines and CSV (the last two also gzip,
//! zstd, bzip2 or xz compressed), told by the file's extension or by `--input-format`, and how
//! DataFusion reads each.

use std::fmt;
use std::str::FromStr;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::prelude::{
    CsvReadOptions, DataFrame, JsonReadOptions, ParquetReadOptions, SessionContext,
};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

/// Whether `name` ends in `.json` (compressed or not), which DataFusion reads by that name,
/// rather than `.jsonl` or `.ndjson`, which only neardup's reading knows.
pub fn is_plain_json(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let stem = match lower.rsplit_once('.') {
        Some((stem, ext)) if Compression::of_extension(ext).is_some() => stem,
        _ => lower.as_str(),
    };
    stem.ends_with(".json")
}

/// How the documents of a file are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Parquet,
    /// One JSON object per line (JSON Lines, NDJSON).
    JsonLines,
    /// Comma-separated, with a header row.
    Csv,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "parquet" => Ok(Format::Parquet),
            "jsonl" | "ndjson" | "json" => Ok(Format::JsonLines),
            "csv" => Ok(Format::Csv),
            other => Err(format!(
                "'{other}' is not an input format; give parquet, jsonl (ndjson) or csv"
            )),
        }
    }
}

impl Format {
    /// The format's name in messages: `Parquet`, `JSON Lines`, `CSV`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Parquet => "Parquet",
            Format::JsonLines => "JSON Lines",
            Format::Csv => "CSV",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Parquet => "parquet",
            Format::JsonLines => "jsonl",
            Format::Csv => "csv",
        })
    }
}

/// Compression of a JSON Lines or CSV file, by its last extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zstd,
    Bzip2,
    Xz,
}

impl Compression {
    pub(crate) fn of_extension(extension: &str) -> Option<Compression> {
        match extension {
            "gz" | "gzip" => Some(Compression::Gzip),
            "zst" | "zstd" => Some(Compression::Zstd),
            "bz2" => Some(Compression::Bzip2),
            "xz" => Some(Compression::Xz),
            _ => None,
        }
    }

    pub(crate) fn datafusion(self) -> FileCompressionType {
        match self {
            Compression::None => FileCompressionType::UNCOMPRESSED,
            Compression::Gzip => FileCompressionType::GZIP,
            Compression::Zstd => FileCompressionType::ZSTD,
            Compression::Bzip2 => FileCompressionType::BZIP2,
            Compression::Xz => FileCompressionType::XZ,
        }
    }
}

/// A file's format and compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileFormat {
    pub format: Format,
    pub compression: Compression,
}

impl FileFormat {
    /// What a file name says: `docs.parquet`, `crawl.jsonl.zst`, `pages.csv.gz`; `None` for an
    /// extension that names no corpus format.
    pub fn of_name(name: &str) -> Option<FileFormat> {
        let lower = name.to_ascii_lowercase();
        let (stem, compression) = match lower.rsplit_once('.') {
            Some((stem, ext)) => match Compression::of_extension(ext) {
                Some(compression) => (stem.to_string(), compression),
                None => (lower.clone(), Compression::None),
            },
            None => (lower.clone(), Compression::None),
        };
        let format = match stem.rsplit_once('.').map(|(_, ext)| ext) {
            Some("parquet") if compression == Compression::None => Format::Parquet,
            Some("jsonl" | "ndjson" | "json") => Format::JsonLines,
            Some("csv") => Format::Csv,
            _ => return None,
        };
        Some(FileFormat {
            format,
            compression,
        })
    }

    /// The format of a file named on the command line: `--input-format` if given (the name's
    /// compression still applies), else its name's, else Parquet (as neardup always read it).
    pub fn of_file(name: &str, given: Option<Format>) -> FileFormat {
        let by_name = FileFormat::of_name(name);
        match given {
            Some(format) => FileFormat {
                format,
                compression: name
                    .rsplit_once('.')
                    .and_then(|(_, ext)| Compression::of_extension(&ext.to_ascii_lowercase()))
                    .unwrap_or_default(),
            },
            None => by_name.unwrap_or_default(),
        }
    }

    /// A DataFrame over one file (a local path or a URL); extensions are not checked.
    pub async fn read(self, ctx: &SessionContext, location: &str) -> DfResult<DataFrame> {
        let compression = self.compression.datafusion();
        match self.format {
            Format::Parquet => {
                let options = ParquetReadOptions::default().file_extension("");
                ctx.read_parquet(location, options).await
            }
            Format::JsonLines => {
                let options = JsonReadOptions::default()
                    .file_extension("")
                    .file_compression_type(compression);
                ctx.read_json(location, options).await
            }
            Format::Csv => {
                let schema = csv_header_schema(ctx, location, self.compression).await?;
                // Texts hold line breaks inside quoted values.
                let options = CsvReadOptions::new()
                    .has_header(true)
                    .newlines_in_values(true)
                    .schema(&schema)
                    .file_extension("")
                    .file_compression_type(compression);
                ctx.read_csv(location, options).await
            }
        }
    }
}

/// A CSV file's columns, all text, from its header row. CSV has no types, and DataFusion's
/// inference of them cuts records at line breaks inside quoted values (object_store's line
/// splitter scans a chunk's end backwards without the quote state), which texts have; with a
/// schema given it reads the file with Arrow's CSV decoder, which keeps them. Only the bytes up
/// to the header's end are read (decompressed as the file is).
async fn csv_header_schema(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> DfResult<Schema> {
    let url = ListingTableUrl::parse(location)?;
    let store = ctx.runtime_env().object_store(&url)?;
    let bytes = store
        .get(url.prefix())
        .await
        .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))?
        .into_stream()
        .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))
        .boxed();
    let mut decoded = compression.datafusion().convert_stream(bytes)?;
    let mut head: Vec<u8> = Vec::new();
    while let Some(chunk) = decoded.next().await {
        head.extend_from_slice(&chunk?);
        if let Some(end) = header_end(&head) {
            head.truncate(end);
            break;
        }
        if head.len() > HEADER_LIMIT {
            return Err(DataFusionError::Plan(format!(
                "{location}: no end of the header row in its first {HEADER_LIMIT} bytes"
            )));
        }
    }
    let (names, _) = datafusion::arrow::csv::reader::Format::default()
        .with_header(true)
        .infer_schema(head.as_slice(), Some(0))?;
    let fields: Vec<Field> = names
        .fields()
        .iter()
        .map(|f| Field::new(f.name(), DataType::Utf8, true))
        .collect();
    Ok(Schema::new(fields))
}

/// Header rows longer than this are not CSV a corpus comes in.
const HEADER_LIMIT: usize = 1 << 20;

/// The end of the first row (after its line break), line breaks inside quotes not counted.
fn header_end(bytes: &[u8]) -> Option<usize> {
    let mut quoted = false;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b'\n' if !quoted => return Some(i + 1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_extension() {
        let of = |name: &str| FileFormat::of_name(name);
        assert_eq!(of("docs.parquet").unwrap().format, Format::Parquet);
        let zst = of("part-0.JSONL.zst").unwrap();
        assert_eq!(
            (zst.format, zst.compression),
            (Format::JsonLines, Compression::Zstd)
        );
        let gz = of("pages.csv.gz").unwrap();
        assert_eq!(
            (gz.format, gz.compression),
            (Format::Csv, Compression::Gzip)
        );
        assert_eq!(of("dump.ndjson").unwrap().format, Format::JsonLines);
        assert_eq!(of("notes.txt"), None);
        assert_eq!(of("archive.gz"), None);
        // A file named on the command line without a known extension is Parquet, as before.
        assert_eq!(FileFormat::of_file("corpus", None).format, Format::Parquet);
        let given = FileFormat::of_file("dump.gz", Some(Format::JsonLines));
        assert_eq!(
            (given.format, given.compression),
            (Format::JsonLines, Compression::Gzip)
        );
        assert!("xml".parse::<Format>().is_err());
        assert_eq!(header_end(b"id,\"te\nxt\"\n1,a\n"), Some(11));
        assert_eq!(header_end(b"id,text"), None);
    }
}
