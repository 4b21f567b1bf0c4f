//! Finding the input files and checking, before any work starts, that they can be read and
//! have the columns the job needs. Every error names the file (and the column) it is about.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};

/// The checked input of a run: its Parquet files, in the order that defines "input order",
/// and their common schema.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub files: Vec<PathBuf>,
    /// The files' columns, then the partition columns.
    pub schema: SchemaRef,
    /// Rows in all the files, from their Parquet footers.
    pub rows: u64,
    /// Hive partition columns (`dt` of `.../dt=2026-11-28/part-0.parquet`), Utf8, in path order.
    pub partition_columns: Vec<String>,
    /// Each file's partition values (NULL for `__HIVE_DEFAULT_PARTITION__`), in the columns'
    /// order.
    pub partition_values: Vec<Vec<Option<String>>>,
}

/// Expands files, folders (searched recursively for `*.parquet`) and glob patterns into a list
/// of files. Arguments keep their order; files within a folder or glob are sorted by path; a
/// file named twice is read once.
pub fn resolve_inputs(inputs: &[String]) -> Result<Vec<PathBuf>> {
    if inputs.is_empty() {
        return Err(Error::Usage("no --input given".into()));
    }
    let mut files = Vec::new();
    let mut seen = BTreeSet::new();
    for input in inputs {
        for file in expand(input)? {
            if has_glob_characters(&file) {
                return Err(Error::Input(format!(
                    "{}: neardup cannot read a file whose path holds '*', '?' or '[' (DataFusion \
                     would read it as a pattern and could pick up other files); rename it",
                    file.display()
                )));
            }
            let absolute = std::path::absolute(&file).map_err(|e| Error::io(&file, e))?;
            if seen.insert(absolute.clone()) {
                files.push(absolute);
            }
        }
    }
    Ok(files)
}

fn expand(input: &str) -> Result<Vec<PathBuf>> {
    let path = Path::new(input);
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if path.is_dir() {
        let mut files = Vec::new();
        collect_parquet_files(path, &mut files)?;
        files.sort();
        if files.is_empty() {
            return Err(Error::Input(format!(
                "input folder {input} holds no .parquet files"
            )));
        }
        return Ok(files);
    }
    if input.contains(['*', '?', '[']) {
        let pattern = glob::glob(input)
            .map_err(|e| Error::Usage(format!("input pattern {input} is not a valid glob: {e}")))?;
        let mut files = Vec::new();
        for entry in pattern {
            let file = entry.map_err(|e| Error::io(e.path().to_path_buf(), e.into()))?;
            if file.is_file() {
                files.push(file);
            }
        }
        files.sort();
        if files.is_empty() {
            return Err(Error::Input(format!(
                "input pattern {input} matches no file"
            )));
        }
        return Ok(files);
    }
    Err(Error::Input(format!(
        "input {input} does not exist (give a Parquet file, a folder of them, or a glob)"
    )))
}

/// Parquet files under `dir`, skipping hidden and `_`-prefixed entries (Spark and Hive
/// markers such as `_SUCCESS`, temporary `.part` folders).
fn collect_parquet_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            collect_parquet_files(&path, files)?;
        } else if name.ends_with(".parquet") {
            files.push(path);
        }
    }
    Ok(())
}

/// The `name=value` folders on a file's path, outermost first: Hive-style partitions.
fn hive_partitions(file: &Path) -> Vec<(String, Option<String>)> {
    let Some(parent) = file.parent() else {
        return Vec::new();
    };
    parent
        .components()
        .filter_map(|c| {
            let segment = c.as_os_str().to_str()?;
            let (name, value) = segment.split_once('=')?;
            if name.is_empty() || name.starts_with(['.', '_']) {
                return None;
            }
            let value = (value != "__HIVE_DEFAULT_PARTITION__").then(|| unescape(value));
            Some((unescape(name), value))
        })
        .collect()
}

/// Undoes the %XX escapes Hive and Spark write into partition folder names (a '/' in a value
/// is %2F); anything that is not a valid escape stays as it is.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        });
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the footer of every file (no data) and checks that the schemas agree.
pub fn inspect(files: Vec<PathBuf>) -> Result<Corpus> {
    let mut schema: Option<SchemaRef> = None;
    let mut rows = 0;
    for file in &files {
        let (file_schema, file_rows) = read_schema(file)?;
        rows += file_rows;
        match &schema {
            None => schema = Some(file_schema),
            Some(first) => {
                if let Some(difference) = schema_difference(first, &file_schema) {
                    return Err(Error::Input(format!(
                        "{} does not have the schema of {}: {difference}",
                        file.display(),
                        files[0].display()
                    )));
                }
            }
        }
    }
    let schema = schema.ok_or_else(|| Error::Input("no input files".into()))?;
    let (partition_columns, partition_values) = partitions(&files, &schema)?;
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(
        partition_columns
            .iter()
            .map(|name| Field::new(name, DataType::Utf8, true)),
    );
    Ok(Corpus {
        files,
        schema: Arc::new(Schema::new(fields)),
        rows,
        partition_columns,
        partition_values,
    })
}

/// Partition columns and each file's values. Every file must sit under the same partition
/// names; a name that is also a column of the files is the files' column, not a partition.
type Partitions = (Vec<String>, Vec<Vec<Option<String>>>);

fn partitions(files: &[PathBuf], schema: &SchemaRef) -> Result<Partitions> {
    let mut columns: Option<Vec<String>> = None;
    let mut values = Vec::with_capacity(files.len());
    for file in files {
        let found: Vec<(String, Option<String>)> = hive_partitions(file)
            .into_iter()
            .filter(|(name, _)| schema.field_with_name(name).is_err())
            .collect();
        let names: Vec<String> = found.iter().map(|(n, _)| n.clone()).collect();
        match &columns {
            None => columns = Some(names),
            Some(first) if *first != names => {
                return Err(Error::Input(format!(
                    "{} is under partition folders [{}], but {} is under [{}]; every input file \
                     must have the same partition columns",
                    file.display(),
                    names.join(", "),
                    files[0].display(),
                    first.join(", ")
                )));
            }
            Some(_) => {}
        }
        values.push(found.into_iter().map(|(_, v)| v).collect());
    }
    Ok((columns.unwrap_or_default(), values))
}

impl Corpus {
    /// The type of column `name`, which the job uses as its `role` column (`--<role>-column`).
    pub fn column_type(&self, name: &str, role: &str) -> Result<DataType> {
        match self.schema.field_with_name(name) {
            Ok(field) => Ok(field.data_type().clone()),
            Err(_) => Err(Error::Input(format!(
                "{}: no {role} column '{name}'; the columns are: {} (choose with --{role}-column)",
                self.files[0].display(),
                self.schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Checks the id column exists and holds integers or strings (ids are compared and joined).
    pub fn check_id_column(&self, name: &str) -> Result<()> {
        let id_type = self.column_type(name, "id")?;
        if id_type.is_integer() || is_string(&id_type) {
            return Ok(());
        }
        Err(Error::Input(format!(
            "{}: id column '{name}' has type {id_type}; ids must be integers or strings",
            self.files[0].display()
        )))
    }

    /// Checks the text column exists and holds strings.
    pub fn check_text_column(&self, name: &str) -> Result<()> {
        let text_type = self.column_type(name, "text")?;
        if is_string(&text_type) {
            return Ok(());
        }
        if matches!(
            text_type,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView
        ) {
            return Err(Error::Input(format!(
                "{}: text column '{name}' has type {text_type} (bytes, not text); neardup reads \
                 UTF-8 strings and will not guess an encoding. Decode it first, e.g. \
                 neardup query \"COPY (SELECT *, CAST({} AS VARCHAR) AS text_utf8 FROM '<file>') TO '<new file>'\" \
                 and pass --text-column text_utf8",
                self.files[0].display(),
                quote_ident(name)
            )));
        }
        Err(Error::Input(format!(
            "{}: text column '{name}' has type {text_type}; it must be a string column",
            self.files[0].display()
        )))
    }

    /// Checks the fingerprint column exists and holds UInt64.
    pub fn check_simhash_column(&self, name: &str) -> Result<()> {
        let simhash_type = self.column_type(name, "simhash")?;
        if simhash_type == DataType::UInt64 {
            return Ok(());
        }
        Err(Error::Input(format!(
            "{}: fingerprint column '{name}' has type {simhash_type}; it must be UInt64",
            self.files[0].display()
        )))
    }

    /// The file and 1-based row behind an input order (file index * 2^32 + row index), for
    /// error messages.
    pub fn locate(&self, input_order: i64) -> String {
        let file = (input_order >> 32) as usize;
        let row = input_order & 0xFFFF_FFFF;
        match self.files.get(file) {
            Some(path) => format!("{} row {}", path.display(), row + 1),
            None => format!("input order {input_order}"),
        }
    }
}

fn is_string(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// The schema and row count of a Parquet file, from its footer.
fn read_schema(file: &Path) -> Result<(SchemaRef, u64)> {
    let handle = File::open(file).map_err(|e| Error::io(file, e))?;
    let size = handle.metadata().map_err(|e| Error::io(file, e))?.len();
    if size == 0 {
        return Err(Error::Input(format!(
            "{} is empty (0 bytes), not a Parquet file",
            file.display()
        )));
    }
    let builder = ParquetRecordBatchReaderBuilder::try_new(handle).map_err(|e| {
        Error::Input(format!(
            "{} is not a readable Parquet file: {e}",
            file.display()
        ))
    })?;
    let rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
    Ok((builder.schema().clone(), rows))
}

/// Describes the first difference in column names or types, ignoring metadata.
fn schema_difference(a: &SchemaRef, b: &SchemaRef) -> Option<String> {
    let describe = |s: &SchemaRef| {
        s.fields()
            .iter()
            .map(|f| format!("{}: {}", f.name(), f.data_type()))
            .collect::<Vec<_>>()
    };
    let (a, b) = (describe(a), describe(b));
    if a == b {
        return None;
    }
    Some(format!("[{}] versus [{}]", b.join(", "), a.join(", ")))
}

/// True when DataFusion would take `path` for a glob pattern.
pub fn has_glob_characters(path: &Path) -> bool {
    path.to_string_lossy().contains(['*', '?', '['])
}

/// Quotes a column name for SQL (names may hold spaces, capitals or quotes).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes a string literal for SQL.
pub fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("Doc \"ID\""), "\"Doc \"\"ID\"\"\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn missing_inputs_are_named() {
        let err = resolve_inputs(&["/no/such/file.parquet".into()]).unwrap_err();
        assert!(err.to_string().contains("/no/such/file.parquet"));
        let err = resolve_inputs(&["/no/such/*.parquet".into()]).unwrap_err();
        assert!(err.to_string().contains("matches no file"));
    }

    #[test]
    fn folder_without_parquet_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let err = resolve_inputs(&[dir.path().display().to_string()]).unwrap_err();
        assert!(err.to_string().contains("no .parquet files"), "{err}");
    }

    #[test]
    fn hive_partition_folders_become_columns() {
        let parts = hive_partitions(Path::new(
            "/data/crawl/dt=2026-11-28/lang=zh%2Dcn/part-0.parquet",
        ));
        let expected = [
            ("dt".to_string(), Some("2026-11-28".to_string())),
            ("lang".to_string(), Some("zh-cn".to_string())),
        ];
        assert_eq!(parts, expected);
        let parts = hive_partitions(Path::new(
            "/x/_tmp=1/.hidden=2/k=__HIVE_DEFAULT_PARTITION__/f",
        ));
        assert_eq!(parts, [("k".to_string(), None)]);
        assert_eq!(unescape("a%3Ab%zz%4"), "a:b%zz%4");
    }

    #[test]
    fn files_under_different_partitions_are_refused() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let files = [
            PathBuf::from("/c/dt=1/a.parquet"),
            PathBuf::from("/c/dt=2/a.parquet"),
        ];
        let (columns, values) = partitions(&files, &schema).unwrap();
        assert_eq!(columns, ["dt"]);
        assert_eq!(values[1], [Some("2".to_string())]);
        // A folder name that is also a column is the column, not a partition.
        let files = [PathBuf::from("/c/id=1/a.parquet")];
        assert!(partitions(&files, &schema).unwrap().0.is_empty());
        let files = [
            PathBuf::from("/c/dt=1/a.parquet"),
            PathBuf::from("/c/other/a.parquet"),
        ];
        let err = partitions(&files, &schema).unwrap_err().to_string();
        assert!(
            err.contains("/c/other/a.parquet") && err.contains("[dt]"),
            "{err}"
        );
    }

    #[test]
    fn non_parquet_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fake.parquet");
        std::fs::write(&file, "this is not parquet").unwrap();
        let err = inspect(vec![file.clone()]).unwrap_err();
        assert!(err.to_string().contains("fake.parquet"), "{err}");
        assert!(
            err.to_string().contains("not a readable Parquet file"),
            "{err}"
        );
    }
}
