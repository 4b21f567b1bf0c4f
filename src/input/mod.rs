//! Finding the input files and checking, before any work starts, that they can be read and
//! have the columns the job needs. Every error names the file (and the column) it is about.
//!
//! Local paths are searched here; prefixes and patterns on object stores in `remote`; the
//! formats (Parquet, JSON Lines, CSV) are `format`'s.

mod bad_line;
mod footer;
pub mod format;
pub mod remote;
mod whole_numbers;

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::prelude::SessionContext;

use crate::engine::caught_panics;
use crate::engine::sql::{quote_ident, quote_literal};
use crate::engine::staging::has_glob_characters;
use crate::error::{Error, Result};
use crate::storage::Place;
use format::{FileFormat, Format};

/// The checked input of a run: its files, in the order that defines "input order", and their
/// common schema.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Absolute local paths or object-store URLs.
    pub files: Vec<Place>,
    /// Each file's format, in the files' order.
    pub formats: Vec<FileFormat>,
    /// The files' columns, then the partition columns.
    pub schema: SchemaRef,
    /// Rows in all the files, from their Parquet footers (JSON Lines and CSV are counted).
    pub rows: u64,
    /// Row groups in all the files, from the footers of local Parquet files; any other file
    /// counts as one. How far one scan can be split over the cores.
    pub row_groups: u64,
    /// Hive partition columns (`dt` of `.../dt=2026-11-28/part-0.parquet`), Utf8, in path order.
    pub partition_columns: Vec<String>,
    /// Each file's partition values (NULL for `__HIVE_DEFAULT_PARTITION__`), in the columns'
    /// order.
    pub partition_values: Vec<Vec<Option<String>>>,
    /// The Delta tables the files are the versions of (`delta:` inputs), for summary.json.
    pub delta_tables: Vec<crate::delta::input::TableRead>,
}

/// Expands files, folders (searched recursively for `*.parquet`) and glob patterns into a list
/// of files. Arguments keep their order; files within a folder or glob are sorted by path; a
/// file named twice, or reached again through a symlink, is read once (under the first of its
/// paths). Folders and `**` search each real folder once: a symlink back into a folder already
/// being searched (a loop) is reported on standard error and not followed.
/// Object-store URLs are listed the same way (`remote`). `format` is `--input-format`: without
/// it a file's extension tells, and a folder's files are its Parquet files, else its JSON
/// Lines files, else its CSV files. An input that is a neardup output (a folder with its
/// `_SUCCESS` and `summary.json`, or a store prefix with its manifest) is read as its table
/// `output_table`: `dedup` for `run`, `signatures` for `match`.
pub async fn resolve_inputs(
    inputs: &[String],
    format: Option<Format>,
    output_table: &str,
) -> Result<Inputs> {
    if inputs.is_empty() {
        return Err(Error::Usage("no --input given".into()));
    }
    let mut found = Inputs::default();
    let mut seen_urls = BTreeSet::new();
    // Local files by their real paths, so that a file named twice (`a/f`, `a/../a/f`, a link to
    // it) is read once, under the first name.
    let mut seen_local = BTreeSet::new();
    for input in inputs {
        let delta = match crate::delta::input::parse_spec(input)? {
            Some(spec) => Some(spec),
            None => delta_table_at(&Place::parse(input, "--input")?, output_table).await?,
        };
        if let Some(spec) = delta {
            let (files, read) = crate::delta::input::resolve(&spec).await?;
            for file in files {
                let format = FileFormat::of_file("", Some(Format::Parquet));
                let new = match &file {
                    Place::Remote(url) => seen_urls.insert(url.to_string()),
                    Place::Local(path) => seen_local.insert(real_path(path)),
                };
                if new {
                    found.files.push((file, format));
                }
            }
            found.delta_tables.push(read);
            continue;
        }
        match Place::parse(input, "--input")? {
            Place::Remote(url) => {
                let url = match remote::committed_table(&url, output_table).await? {
                    Some(table) => table,
                    None => url,
                };
                for (url, file_format) in remote::expand(&url, format).await? {
                    if seen_urls.insert(url.to_string()) {
                        found.files.push((Place::Remote(url), file_format));
                    }
                }
            }
            Place::Local(path) => {
                let path = local_output_table(path, output_table)?;
                let input = [path.to_string_lossy().into_owned()];
                for (file, file_format) in resolve_local(&input, format, &mut seen_local)? {
                    found.files.push((Place::Local(file), file_format));
                }
            }
        }
    }
    Ok(found)
}

/// The folder name Hive gives a NULL partition value (`dt=__HIVE_DEFAULT_PARTITION__`).
pub const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

/// DataFusion reads a Hive folder's value as it is written: `frame` with each of `columns`
/// NULL where its folder says `__HIVE_DEFAULT_PARTITION__`.
pub fn hive_nulls_read_as_null(
    frame: datafusion::prelude::DataFrame,
    columns: &[String],
) -> datafusion::error::Result<datafusion::prelude::DataFrame> {
    use datafusion::prelude::{col, lit, nullif};
    columns.iter().try_fold(frame, |frame, column| {
        let value = nullif(
            col(datafusion::common::Column::from_name(column)),
            lit(HIVE_NULL),
        );
        frame.with_column(column, value)
    })
}

/// What `--input` named: the files, in input order, and the Delta tables they came from.
#[derive(Debug, Default)]
pub struct Inputs {
    pub files: Vec<(Place, FileFormat)>,
    pub delta_tables: Vec<crate::delta::input::TableRead>,
}

/// The Delta table an input names without `delta:`: a folder or prefix holding `_delta_log/`
/// (at its latest version), or a neardup output of Delta tables (its `output_table` at the
/// version its summary.json records).
async fn delta_table_at(
    place: &Place,
    output_table: &str,
) -> Result<Option<crate::delta::input::Spec>> {
    use crate::delta::{At, input::Spec};
    if place.to_string().contains(['*', '?', '[']) {
        return Ok(None);
    }
    if let Place::Local(path) = place
        && !path.is_dir()
    {
        return Ok(None);
    }
    // On a store, a summary or log that cannot be read (no right to read it: a store answers
    // 403 for a missing key to a caller who cannot list) leaves the input as it was named.
    let lenient = place.is_remote();
    let output = match crate::delta::output::open_output(place).await {
        Ok(output) => output,
        Err(_) if lenient => None,
        Err(e) => return Err(e),
    };
    if let Some((_, tables)) = output {
        let Some((_, table, version)) = tables.into_iter().find(|(n, _, _)| n == output_table)
        else {
            return Err(Error::Input(format!(
                "input {place} is a neardup output without a {output_table} table (an output \
                 of `match` has pairs and groups only); name the files to read"
            )));
        };
        return Ok(Some(Spec {
            place: table,
            at: At::Version(version),
        }));
    }
    let is_table = match crate::delta::is_table(place).await {
        Ok(is_table) => is_table,
        Err(_) if lenient => false,
        Err(e) => return Err(e),
    };
    if is_table {
        return Ok(Some(Spec {
            place: place.clone(),
            at: At::Latest,
        }));
    }
    Ok(None)
}

/// The folder of table `table` when `path` is a local neardup output; `path` otherwise.
fn local_output_table(path: PathBuf, table: &str) -> Result<PathBuf> {
    if !path.is_dir() || !crate::engine::staging::is_output_dir(&path) {
        return Ok(path);
    }
    let folder = path.join(table);
    if !folder.is_dir() {
        return Err(Error::Input(format!(
            "input {} is a neardup output without a {table} table (an output of `match` has \
             pairs and groups only); name the files to read",
            path.display()
        )));
    }
    Ok(folder)
}

/// Local inputs: files, folders and globs, each real file once: a file whose real path is in
/// `seen` (from these inputs or earlier ones) is skipped, and each one taken is added.
fn resolve_local(
    inputs: &[String],
    format: Option<Format>,
    seen: &mut BTreeSet<PathBuf>,
) -> Result<Vec<(PathBuf, FileFormat)>> {
    let mut files = Vec::new();
    for input in inputs {
        for file in expand(input, format)? {
            if has_glob_characters(&file) {
                return Err(Error::Input(format!(
                    "{}: neardup cannot read a file whose path holds '*', '?' or '[' (DataFusion \
                     would read it as a pattern and could pick up other files); rename it",
                    file.display()
                )));
            }
            let absolute = std::path::absolute(&file).map_err(|e| Error::io(&file, e))?;
            if seen.insert(real_path(&absolute)) {
                let name = absolute.to_string_lossy().into_owned();
                files.push((absolute, FileFormat::of_file(&name, format)));
            }
        }
    }
    Ok(files)
}

/// The real file behind a path's symlinks and `..`; a path that cannot be resolved (a dangling
/// link) stays as it is, and reading it reports the error.
fn real_path(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn expand(input: &str, format: Option<Format>) -> Result<Vec<PathBuf>> {
    let path = Path::new(input);
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if path.is_dir() {
        let mut files = Vec::new();
        collect_corpus_files(path, &mut Searched::default(), &mut files)?;
        files.sort();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let keep = folder_files(&names, format);
        if keep.is_empty() {
            return Err(Error::Input(format!(
                "input folder {input} holds no {} files",
                described(format)
            )));
        }
        warn_left_out(input, &names, &keep, format);
        return Ok(keep.into_iter().map(|i| files[i].clone()).collect());
    }
    if input.contains(['*', '?', '[']) {
        let mut files: Vec<PathBuf> = glob_paths(input)?
            .into_iter()
            .filter(|file| file.is_file())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(Error::Input(format!(
                "input pattern {input} matches no file"
            )));
        }
        return Ok(files);
    }
    if path.exists() {
        return Err(Error::Input(format!(
            "input {input} is neither a file nor a folder (a device, a pipe or a socket); give a \
             Parquet, JSON Lines or CSV file, a folder of them, or a glob"
        )));
    }
    Err(Error::Input(format!(
        "input {input} does not exist (give a Parquet, JSON Lines or CSV file, a folder of them, \
         or a glob)"
    )))
}

/// Which of a folder's files (by name, in order) are the corpus: those of `format`, or else the
/// Parquet files, else the JSON Lines files, else the CSV files. Returns their indexes.
pub fn folder_files(names: &[String], format: Option<Format>) -> Vec<usize> {
    let of = |i: &usize| FileFormat::of_name(&names[*i]).map(|f| f.format);
    let all: Vec<usize> = (0..names.len()).collect();
    let wanted = match format {
        Some(format) => vec![format],
        None => vec![Format::Parquet, Format::JsonLines, Format::Csv],
    };
    for format in wanted {
        let found: Vec<usize> = all
            .iter()
            .copied()
            .filter(|i| of(i) == Some(format))
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// Says on standard error which corpus files of a folder (by name) are not read because the
/// folder's files of another format were taken (`folder_files`), when no format was asked for.
pub fn warn_left_out(input: &str, names: &[String], keep: &[usize], format: Option<Format>) {
    let (Some(&first), None) = (keep.first(), format) else {
        return;
    };
    let read = FileFormat::of_name(&names[first]).map(|f| f.format);
    // A plain `.json` beside a corpus is as often its metadata (`dataset_info.json`).
    let left: Vec<&str> = (names.iter())
        .filter(|name| FileFormat::of_name(name).is_some_and(|f| Some(f.format) != read))
        .filter(|name| !format::is_plain_json(name))
        .map(String::as_str)
        .collect();
    if left.is_empty() {
        return;
    }
    let listed = left.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    let more = match left.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    crate::to_stderr!(
        "neardup: input folder {input}: reading its {} files only; {} file(s) of another format \
         are not read ({listed}{more}). A folder's corpus is its files of one format: name the \
         others, or give --input-format",
        read.map_or("", |f| f.name()),
        left.len()
    );
}

/// "Parquet, JSON Lines or CSV", or the one format asked for, for messages.
fn described(format: Option<Format>) -> String {
    match format {
        None => ".parquet, .jsonl or .csv".to_string(),
        Some(Format::Parquet) => ".parquet".to_string(),
        Some(Format::JsonLines) => ".jsonl (.ndjson, .json)".to_string(),
        Some(Format::Csv) => ".csv".to_string(),
    }
}

/// Files of a corpus format (`FileFormat::of_name`) under `dir`, skipping hidden and `_`-prefixed entries (Spark and Hive
/// markers such as `_SUCCESS`, temporary `.part` folders). Entries are visited in name order,
/// so when two paths lead to one real folder, the first in path order is the one searched.
fn collect_corpus_files(
    dir: &Path,
    searched: &mut Searched,
    files: &mut Vec<PathBuf>,
) -> Result<()> {
    if !searched.first_visit(0, dir) {
        return Ok(());
    }
    let mut entries: Vec<(OsString, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let hidden = {
            let text = name.to_string_lossy();
            text.starts_with('.') || text.starts_with('_')
        };
        if !hidden {
            entries.push((name, entry.path()));
        }
    }
    entries.sort();
    for (name, path) in entries {
        if path.is_dir() {
            collect_corpus_files(&path, searched, files)?;
        } else if FileFormat::of_name(&name.to_string_lossy()).is_some() {
            files.push(path);
        }
    }
    Ok(())
}

/// What identifies a real folder, whatever path leads to it: (device, inode) on Unix, the
/// canonical path elsewhere.
#[cfg(unix)]
type FolderId = (u64, u64);
#[cfg(not(unix))]
type FolderId = PathBuf;

#[cfg(unix)]
fn folder_id(dir: &Path) -> Option<FolderId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn folder_id(dir: &Path) -> Option<FolderId> {
    std::fs::canonicalize(dir).ok()
}

/// The real folders a search has entered, each with the path it was entered by. `step` tells
/// searches of one folder for different purposes apart (the `**` of a glob pattern that lists
/// it; 0 for a folder input).
#[derive(Default)]
struct Searched {
    first: HashMap<(usize, FolderId), PathBuf>,
    warned: HashSet<PathBuf>,
}

impl Searched {
    /// True when `dir` is to be searched: the first path to its real folder for `step`.
    /// Another path to a folder already entered (a symlink loop, or a second link to the same
    /// folder) is not searched, with one warning naming it.
    fn first_visit(&mut self, step: usize, dir: &Path) -> bool {
        // A folder that cannot be examined is listed anyway, and listing it reports the error.
        let Some(id) = folder_id(dir) else {
            return true;
        };
        match self.first.entry((step, id)) {
            Entry::Vacant(slot) => {
                slot.insert(dir.to_path_buf());
                true
            }
            Entry::Occupied(slot) => {
                let first = slot.get().as_path();
                // The same path again (a glob pattern with two `**` can list a folder twice)
                // is no news.
                if first != dir && self.warned.insert(dir.to_path_buf()) {
                    let back =
                        dir.starts_with(first) || (first == Path::new(".") && dir.is_relative());
                    if back {
                        crate::to_stderr!(
                            "neardup: warning: {} leads back to {} (a symlink loop); not \
                             following it",
                            dir.display(),
                            first.display()
                        );
                    } else {
                        crate::to_stderr!(
                            "neardup: warning: {} leads to {}, which is already searched; not \
                             searching it again",
                            dir.display(),
                            first.display()
                        );
                    }
                }
                false
            }
        }
    }
}

/// `glob::glob`'s options (`MatchOptions::new()`), for matching single path components.
const GLOB_OPTIONS: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

/// The paths `glob::glob(pattern)` yields (files and folders, in no particular order), found
/// the same way, component by component, except that a `**` searches each real folder once:
/// the glob crate follows symlinked folders under `**` without end when one loops back.
fn glob_paths(pattern: &str) -> Result<Vec<PathBuf>> {
    let invalid = |e: glob::PatternError| {
        Error::Usage(format!("input pattern {pattern} is not a valid glob: {e}"))
    };
    glob::Pattern::new(pattern).map_err(invalid)?;
    // The root (`/`) the pattern starts from, computed as `glob::glob_with` does.
    let mut components = Path::new(pattern).components().peekable();
    while matches!(
        components.peek(),
        Some(Component::Prefix(_) | Component::RootDir)
    ) {
        components.next();
    }
    let rest: PathBuf = components.map(|c| c.as_os_str()).collect();
    let normalized: PathBuf = Path::new(pattern).iter().collect();
    let root_len = normalized.as_os_str().len() - rest.as_os_str().len();
    let scope = if root_len > 0 {
        PathBuf::from(&pattern[..root_len])
    } else {
        PathBuf::from(".")
    };
    let mut parts: Vec<Part> = Vec::new();
    for component in
        pattern[root_len.min(pattern.len())..].split_terminator(std::path::is_separator)
    {
        let recursive = component == "**";
        // Consecutive `**` are one, as in the glob crate.
        if recursive && parts.last().is_some_and(|p| p.recursive) {
            continue;
        }
        parts.push(Part {
            pattern: glob::Pattern::new(component).map_err(invalid)?,
            recursive,
            literal: !component.contains(['*', '?', '[']),
        });
    }
    if parts.is_empty() {
        // Only a root: a folder, never a file.
        return Ok(Vec::new());
    }
    let mut walk = GlobWalk {
        parts: &parts,
        require_dir: pattern.ends_with(std::path::is_separator),
        searched: Searched::default(),
        found: Vec::new(),
    };
    let scope_is_dir = is_dir(&scope);
    walk.fill(0, &scope, scope_is_dir)?;
    Ok(walk.found)
}

/// One `/`-separated component of a glob pattern.
struct Part {
    pattern: glob::Pattern,
    /// `**`: any number of folders.
    recursive: bool,
    /// No `*`, `?` or `[`: a name looked up, not a folder listed.
    literal: bool,
}

struct GlobWalk<'a> {
    parts: &'a [Part],
    /// The pattern ends with `/`: only folders match.
    require_dir: bool,
    searched: Searched,
    found: Vec<PathBuf>,
}

fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

impl GlobWalk<'_> {
    /// `path` matched the parts before `idx`: finds what `parts[idx]` matches in it (the glob
    /// crate's `fill_todo`).
    fn fill(&mut self, idx: usize, path: &Path, path_is_dir: bool) -> Result<()> {
        let parts = self.parts;
        let part = &parts[idx];
        let curdir = path == Path::new(".");
        if part.literal {
            let name = part.pattern.as_str();
            let special = name == "." || name == "..";
            let next = if curdir {
                PathBuf::from(name)
            } else {
                path.join(name)
            };
            let exists = if special {
                path_is_dir
            } else {
                std::fs::metadata(&next).is_ok() || std::fs::symlink_metadata(&next).is_ok()
            };
            if exists {
                let next_is_dir = is_dir(&next);
                self.add(idx, next, next_is_dir)?;
            }
            return Ok(());
        }
        if !path_is_dir {
            return Ok(());
        }
        // The loop guard: a `**` lists each real folder once.
        if part.recursive && !self.searched.first_visit(idx, path) {
            return Ok(());
        }
        let mut children: Vec<(OsString, PathBuf, bool)> = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| Error::io(path, e))? {
            let entry = entry.map_err(|e| Error::io(path, e))?;
            let name = entry.file_name();
            let child = if curdir {
                PathBuf::from(&name)
            } else {
                entry.path()
            };
            // A symlink counts as what it leads to.
            let child_is_dir = match entry.file_type() {
                Ok(kind) if !kind.is_symlink() => kind.is_dir(),
                _ => is_dir(&child),
            };
            children.push((name, child, child_is_dir));
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));
        // `.` and `..` are never listed; a part that starts with a literal '.' can match them.
        if part.pattern.as_str().starts_with('.') {
            for special in [".", ".."] {
                if part.pattern.matches_with(special, GLOB_OPTIONS) {
                    let next = path.join(special);
                    let next_is_dir = is_dir(&next);
                    self.add(idx, next, next_is_dir)?;
                }
            }
        }
        for (_, child, child_is_dir) in children {
            self.candidate(idx, child, child_is_dir)?;
        }
        Ok(())
    }

    /// `path` matched `parts[idx]` already (a literal name, `.` or `..`).
    fn add(&mut self, idx: usize, path: PathBuf, path_is_dir: bool) -> Result<()> {
        if idx + 1 == self.parts.len() {
            if !self.require_dir || path_is_dir {
                self.found.push(path);
            }
            return Ok(());
        }
        self.fill(idx + 1, &path, path_is_dir)
    }

    /// An entry listed for `parts[idx]`: matches it against that part (a `**` takes folders,
    /// or nothing and passes the entry on to the next part).
    fn candidate(&mut self, mut idx: usize, path: PathBuf, path_is_dir: bool) -> Result<()> {
        let parts = self.parts;
        let last = parts.len() - 1;
        if parts[idx].recursive {
            if path_is_dir {
                self.fill(idx, &path, true)?;
                if idx == last {
                    self.found.push(path);
                    return Ok(());
                }
            } else if idx == last {
                return Ok(());
            }
            idx += 1;
        }
        // Names that are not UTF-8 never match, as in the glob crate.
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return Ok(());
        };
        if !parts[idx].pattern.matches_with(name, GLOB_OPTIONS) {
            return Ok(());
        }
        if idx == last {
            if !self.require_dir || path_is_dir {
                self.found.push(path);
            }
            return Ok(());
        }
        self.fill(idx + 1, &path, path_is_dir)
    }
}

/// The `name=value` folders on a file's path, outermost first: Hive-style partitions.
pub(crate) fn hive_partitions(file: &Path) -> Vec<(String, Option<String>)> {
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
            let value = (value != HIVE_NULL).then(|| unescape(value));
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

/// Reads the footer of every Parquet file (no data), infers the columns of JSON Lines and CSV
/// files (and counts their rows), and checks that the schemas agree.
pub async fn inspect(found: Vec<(Place, FileFormat)>) -> Result<Corpus> {
    let (files, formats): (Vec<Place>, Vec<FileFormat>) = found.into_iter().unzip();
    let mut schema: Option<SchemaRef> = None;
    let mut rows = 0;
    let mut row_groups = 0;
    let ctx = crate::engine::session::session_context()?;
    for (file, format) in files.iter().zip(&formats) {
        let (file_schema, file_rows, file_row_groups) = match (file, format.format) {
            (Place::Local(path), Format::Parquet) => read_schema(path)?,
            _ => {
                let (schema, rows) = read_schema_of(&ctx, file, *format).await?;
                (schema, rows, 1)
            }
        };
        rows += file_rows;
        row_groups += file_row_groups;
        refuse_repeated_columns(file, &file_schema)?;
        match &schema {
            None => schema = Some(file_schema),
            Some(first) => {
                if let Some(difference) = schema_difference(first, &file_schema) {
                    return Err(Error::Input(format!(
                        "{file} does not have the schema of {}: {difference}",
                        files[0]
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
        formats,
        schema: Arc::new(Schema::new(fields)),
        rows,
        row_groups,
        partition_columns,
        partition_values,
        delta_tables: Vec::new(),
    })
}

/// Partition columns and each file's values. Every file must sit under the same partition
/// names; a name that is also a column of the files is the files' column, not a partition.
type Partitions = (Vec<String>, Vec<Vec<Option<String>>>);

fn partitions(files: &[Place], schema: &SchemaRef) -> Result<Partitions> {
    let mut columns: Option<Vec<String>> = None;
    let mut values = Vec::with_capacity(files.len());
    for file in files {
        let path = match file {
            Place::Local(path) => path.clone(),
            Place::Remote(url) => PathBuf::from(url.path()),
        };
        let found: Vec<(String, Option<String>)> = hive_partitions(&path)
            .into_iter()
            .filter(|(name, _)| schema.field_with_name(name).is_err())
            .collect();
        let names: Vec<String> = found.iter().map(|(n, _)| n.clone()).collect();
        match &columns {
            None => columns = Some(names),
            Some(first) if *first != names => {
                return Err(Error::Input(format!(
                    "{file} is under partition folders [{}], but {} is under [{}]; every input \
                     file must have the same partition columns",
                    names.join(", "),
                    files[0],
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
    /// Whether every input file is Parquet.
    pub fn all_parquet(&self) -> bool {
        self.formats.iter().all(|f| f.format == Format::Parquet)
    }

    /// The type of column `name`, which the job uses as its `role` column (`--<role>-column`).
    pub fn column_type(&self, name: &str, role: &str) -> Result<DataType> {
        match self.schema.field_with_name(name) {
            Ok(field) => Ok(field.data_type().clone()),
            // An empty CSV or JSON Lines file: there is nothing to infer columns from.
            Err(_) if self.schema.fields().is_empty() => Err(Error::Input(format!(
                "{}: the input has no columns (an empty file?); give a file with an {role} \
                 column",
                self.files[0]
            ))),
            Err(_) => Err(Error::Input(format!(
                "{}: no {role} column '{name}'; the columns are: {} (choose with --{role}-column)",
                self.files[0],
                self.column_names()
            ))),
        }
    }

    /// The columns, comma-separated, for messages (partition folders' columns last).
    pub fn column_names(&self) -> String {
        listed_columns(self.schema.fields().iter().map(|f| f.name().as_str()))
    }

    /// Checks the id column exists and holds integers or strings (ids are compared and joined).
    pub fn check_id_column(&self, name: &str) -> Result<()> {
        let id_type = self.column_type(name, "id")?;
        if id_type.is_integer() || is_string(&id_type) {
            return Ok(());
        }
        if matches!(&id_type, DataType::Dictionary(_, values) if is_string(values) || values.is_integer())
        {
            return Err(Error::Input(dictionary_message(
                &self.files[0],
                self.files.len(),
                "id",
                name,
                &id_type,
            )));
        }
        // The JSON reader infers Float64 for integers beyond Int64 (hashes, 64-bit ids).
        let json_float = id_type == DataType::Float64
            && (self.formats.iter()).any(|format| format.format == format::Format::JsonLines);
        let hint = match json_float {
            true => {
                " (in JSON Lines, integers beyond Int64, such as unsigned 64-bit ids, are read \
                 as floats: write the ids as strings)"
            }
            false => "",
        };
        Err(Error::Input(format!(
            "{}: id column '{name}' has type {id_type}; ids must be integers or strings{hint}",
            self.files[0]
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
            let each = for_each_file(self.files.len());
            return Err(Error::Input(format!(
                "{}: text column '{name}' has type {text_type} (bytes, not text); neardup reads \
                 UTF-8 strings and will not guess an encoding. Decode it first{each}, e.g. \
                 neardup query \"COPY (SELECT *, CAST({} AS VARCHAR) AS text_utf8 FROM {}) TO \
                 '<new file>.parquet'\" and pass --text-column text_utf8",
                self.files[0],
                sql_name(name),
                quote_literal(&self.files[0].to_string())
            )));
        }
        if matches!(&text_type, DataType::Dictionary(_, values) if is_string(values)) {
            return Err(Error::Input(dictionary_message(
                &self.files[0],
                self.files.len(),
                "text",
                name,
                &text_type,
            )));
        }
        // JSON Lines and CSV columns take their types from the first rows read.
        let inferred = match text_type {
            DataType::Null => {
                " (JSON Lines and CSV columns take their type from the first rows, and this one \
                 is NULL in all of them: give those rows a text, or convert the file to Parquet \
                 with a string column)"
            }
            _ => "",
        };
        Err(Error::Input(format!(
            "{}: text column '{name}' has type {text_type}; it must be a string column{inferred}",
            self.files[0]
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
            self.files[0]
        )))
    }

    /// The file and 1-based row behind an input order, for error messages.
    pub fn locate(&self, input_order: i64) -> String {
        let (file, row) = file_and_row(input_order);
        match self.files.get(file) {
            Some(place) => format!("{place} row {row}"),
            None => format!("input order {input_order}"),
        }
    }
}

/// The file's index (from 0) and the row's number in it (from 1, as errors count rows) of an
/// input order: file index * 2^32 + row index (`crate::job::source::register_corpus`).
pub fn file_and_row(input_order: i64) -> (usize, i64) {
    (
        (input_order >> 32) as usize,
        (input_order & 0xFFFF_FFFF) + 1,
    )
}

/// A file with two columns of one name (Parquet allows it): the job reads columns by name and
/// would keep only the first in `dedup`, losing the other.
fn refuse_repeated_columns(file: &Place, schema: &SchemaRef) -> Result<()> {
    let mut seen = BTreeSet::new();
    for field in schema.fields() {
        if !seen.insert(field.name().as_str()) {
            return Err(Error::Input(format!(
                "{file} has two columns named '{}'; neardup reads columns by name and would \
                 keep only one of them in dedup. Rename one (with pyarrow, say: \
                 table.rename_columns(...)) and run again",
                crate::error::echo(field.name())
            )));
        }
    }
    Ok(())
}

/// A dictionary-encoded text column, with the SQL that decodes it (tried on DataFusion 55:
/// `SELECT * REPLACE (...)` keeps the other columns and their order).
fn dictionary_message(
    file: &dyn std::fmt::Display,
    files: usize,
    role: &str,
    name: &str,
    data_type: &DataType,
) -> String {
    let column = sql_name(name);
    let plain = match data_type {
        DataType::Dictionary(_, values) if !is_string(values) => values.to_string(),
        _ => "Utf8".to_string(),
    };
    let each = for_each_file(files);
    format!(
        "{}: {role} column '{name}' is dictionary-encoded (type {data_type}); neardup reads \
         plain values. Decode it first{each}, e.g. neardup query \"COPY (SELECT * REPLACE \
         (arrow_cast({column}, '{plain}') AS {column}) FROM {}) TO '<new file>.parquet'\" and \
         give the new file in its place",
        file,
        quote_literal(&file.to_string())
    )
}

/// " (for each input file)" where a decoding hint names one file of several.
fn for_each_file(files: usize) -> &'static str {
    if files > 1 {
        " (for each input file)"
    } else {
        ""
    }
}

/// A column name as SQL takes it: bare when it is lower-case letters, digits and '_' (so the
/// command can be pasted into a shell between double quotes), quoted otherwise.
fn sql_name(name: &str) -> String {
    let bare = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if bare {
        name.to_string()
    } else {
        quote_ident(name)
    }
}

/// Whether a column of this type holds text (the three Arrow string types).
pub(crate) fn is_string(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// The schema, row count and row groups of a Parquet file, from its footer.
fn read_schema(file: &Path) -> Result<(SchemaRef, u64, u64)> {
    let handle = File::open(file).map_err(|e| Error::io(file, e))?;
    let size = handle.metadata().map_err(|e| Error::io(file, e))?.len();
    if size == 0 {
        return Err(Error::Input(format!(
            "{} is empty (0 bytes), not a Parquet file",
            file.display()
        )));
    }
    // A name that says no corpus format (`notes.tsv`) may be another format read as Parquet.
    let unnamed = match format::FileFormat::of_name(&file.to_string_lossy()) {
        None => {
            " (a file is read as Parquet unless its name, .jsonl or .csv, or --input-format \
             says another format)"
        }
        Some(_) => "",
    };
    let unreadable = |why: String| {
        Error::Input(format!(
            "{} is not a readable Parquet file{unnamed}: {why}",
            file.display()
        ))
    };
    let builder = caught_panics::catch(|| ParquetRecordBatchReaderBuilder::try_new(handle))
        .map_err(|stopped| unreadable(caught_panics::damaged_file(&stopped)))?
        .map_err(|e| unreadable(e.to_string()))?;
    if let Some(why) = footer::misplaced_chunk(builder.metadata(), size) {
        return Err(unreadable(why));
    }
    let rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
    let row_groups = builder.metadata().num_row_groups() as u64;
    Ok((builder.schema().clone(), rows, row_groups))
}

/// The schema and rows of a file DataFusion reads for us: a Parquet file on a store (from its
/// footer), a JSON Lines or CSV file anywhere (the columns inferred from its first rows, the
/// rows counted).
async fn read_schema_of(
    ctx: &SessionContext,
    file: &Place,
    format: FileFormat,
) -> Result<(SchemaRef, u64)> {
    let location = file.to_string();
    let read = async {
        let frame = format.read(ctx, &location).await?;
        let schema = Arc::new(frame.schema().as_arrow().clone());
        let rows = frame.count().await?;
        Ok::<_, datafusion::error::DataFusionError>((schema, rows as u64))
    };
    // The Arrow reader may stop (panic) on a damaged footer's Arrow schema.
    match caught_panics::catch_async(read).await {
        Ok(Ok(read)) => Ok(read),
        Ok(Err(e)) => Err(unreadable(ctx, &location, format, e).await),
        Err(stopped) => Err(Error::Input(format!(
            "{location} is not a readable {} file: {}",
            format.format.name(),
            caught_panics::damaged_file(&stopped)
        ))),
    }
}

/// How the JSON reader's errors for a line that is not JSON begin: when inferring the columns
/// (serde's), then when decoding (its own). Errors of a value's type are not among them.
const JSON_SYNTAX_ERRORS: [&str; 3] = [
    "Not valid JSON",
    "Encountered unexpected",
    "Truncated record",
];

/// The error for a file DataFusion could not read.
async fn unreadable(
    ctx: &SessionContext,
    location: &str,
    format: FileFormat,
    e: datafusion::error::DataFusionError,
) -> Error {
    let message = e.strip_backtrace();
    let at = place_in_file(ctx, location, format, &message).await;
    Error::Input(format!(
        "{location} is not a readable {} file{at}: {message}",
        format.format.name(),
    ))
}

/// Where in the file the reader's error `message` is, as " (line 51 is ...)", or empty. The
/// JSON reader says only that the stream is not UTF-8, or counts lines within its own chunks,
/// or names the field but not the line: the file is read again to name the line.
pub async fn place_in_file(
    ctx: &SessionContext,
    location: &str,
    format: FileFormat,
    message: &str,
) -> String {
    let of = match format.compression {
        format::Compression::None => "the file",
        _ => "the uncompressed text",
    };
    let in_text = in_text(format.compression);
    let at = if format.format != Format::JsonLines {
        None
    } else if message.contains("UTF-8") {
        bad_line::first_line_not_utf8(ctx, location, format.compression)
            .await
            .map(|(line, offset)| {
                format!(" (line {line} is not UTF-8, at byte offset {offset} of {of})")
            })
    } else if JSON_SYNTAX_ERRORS.iter().any(|e| message.contains(e)) {
        // The reader counts lines within its own chunks of the file: its "line 1" may be any.
        bad_line::first_line_not_json(ctx, location, format.compression)
            .await
            .map(|(line, why)| format!(" (line {line}{in_text} is not one JSON object: {why})"))
    } else {
        bad_line::first_line_of_wrong_kind(ctx, location, format.compression, message)
            .await
            .map(|(line, why)| format!(" (line {line}{in_text}: {why})"))
    };
    at.unwrap_or_default()
}

/// How a line number of a file read through `compression` is qualified in a message.
fn in_text(compression: format::Compression) -> &'static str {
    match compression {
        format::Compression::None => "",
        _ => " of the uncompressed text",
    }
}

/// Refuses a JSON Lines file that the reader would read changed without an error
/// (`whole_numbers`): a whole-number column's value read as another number, or a key that is
/// no column (first written after the lines the columns were inferred from), whose values it
/// drops. Names the file, the line and the value or key. Each JSON Lines file is read once more
/// for it.
pub async fn refuse_silent_changes(ctx: &SessionContext, corpus: &Corpus) -> Result<()> {
    let partitions = &corpus.partition_columns;
    let file_columns: Vec<_> = (corpus.schema.fields().iter())
        .filter(|field| !partitions.contains(field.name()))
        .cloned()
        .collect();
    let schema = Schema::new(file_columns);
    let columns = whole_numbers::whole_columns(&schema);
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    for (file, format) in corpus.files.iter().zip(&corpus.formats) {
        if format.format != Format::JsonLines {
            continue;
        }
        let location = file.to_string();
        let Some(text) = bad_line::read_again(ctx, &location, format.compression).await else {
            continue;
        };
        let Some(change) = whole_numbers::first_change(text, &schema, &columns).await else {
            continue;
        };
        let why = "The reader takes a file's columns and their types from its first 1,000 \
                   lines: give every line the same keys and each column's values one kind, or \
                   convert the file to Parquet with the columns it should have";
        // Read once more, line by line, to name the line. Found there or not at all: the row
        // held a string (the reader refuses one that is not an integer itself, naming it), or
        // a number serde does not take (`-.5`, which the reader does; not checked).
        let changed = bad_line::first_line_changed(
            ctx,
            &location,
            format.compression,
            columns.clone(),
            names.clone(),
        );
        if let Some((line, what)) = changed.await {
            let at = format!("line {line}{}", in_text(format.compression));
            return Err(Error::Input(format!("{location} {at}: {what}. {why}")));
        }
        // A field inside an object is named by the decoder, with the rows it was decoding. A
        // top-level key not found line by line held only nulls: nothing is dropped.
        if let whole_numbers::Change::Field { from_row, what } = change
            && what.contains("whilst decoding")
        {
            let first = from_row + 1;
            return Err(Error::Input(format!(
                "{location}: a line from line {first}{} on has a field the columns inferred \
                 from the first lines do not hold, whose values the reader would drop ({what}). \
                 {why}",
                in_text(format.compression)
            )));
        }
    }
    Ok(())
}

/// Columns listed in a message shown before the rest of a list is cut.
const COLUMNS_LISTED: usize = 30;

/// Column names for a message, comma-separated: each cut to `echo`'s length (a CSV header with
/// a quote left open is one name holding the whole file), one with control characters quoted,
/// and at most `COLUMNS_LISTED` of them.
fn listed_columns<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let count = names.len();
    let mut listed: Vec<String> = names
        .take(COLUMNS_LISTED)
        .map(|name| match name.chars().any(char::is_control) {
            true => crate::error::echo_quoted(name),
            false => crate::error::echo(name),
        })
        .collect();
    if count > COLUMNS_LISTED {
        listed.push(format!("and {} more", count - COLUMNS_LISTED));
    }
    listed.join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dictionary_text_column_is_named_with_the_sql_to_decode_it() {
        let text_type = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let message = dictionary_message(&"/data/in.parquet", 1, "text", "text", &text_type);
        assert!(
            message.contains("dictionary-encoded (type Dictionary(Int32, Utf8))"),
            "{message}"
        );
        assert!(
            message.contains(
                "COPY (SELECT * REPLACE (arrow_cast(text, 'Utf8') AS text) FROM \
                 '/data/in.parquet') TO '<new file>.parquet'"
            ),
            "{message}"
        );
        assert!(!message.contains("for each input file"), "{message}");
        let message = dictionary_message(&"/d/a.parquet", 2, "text", "Body", &text_type);
        assert!(
            message.contains("arrow_cast(\"Body\", 'Utf8') AS \"Body\"")
                && message.contains("for each input file"),
            "{message}"
        );
        let id_type = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Int64));
        let message = dictionary_message(&"/d/a.parquet", 1, "id", "id", &id_type);
        assert!(
            message.contains("id column 'id' is dictionary-encoded")
                && message.contains("arrow_cast(id, 'Int64') AS id"),
            "{message}"
        );
        assert_eq!(sql_name("text_2"), "text_2");
        assert_eq!(sql_name("2x"), "\"2x\"");
    }

    #[test]
    fn listed_columns_are_cut_and_control_characters_quoted() {
        let names = ["id", "text"];
        assert_eq!(listed_columns(names.into_iter()), "id, text");
        let file = format!("a\0b\n{}", "x".repeat(10_000));
        let listed = listed_columns([file.as_str()].into_iter());
        assert!(
            listed.starts_with("\"a\\0b\\nxxx") && listed.len() < 500,
            "{listed}"
        );
        let many: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
        let listed = listed_columns(many.iter().map(String::as_str));
        assert!(listed.ends_with("c29, and 10 more"), "{listed}");
    }

    #[test]
    fn missing_inputs_are_named() {
        let err = resolve_local(
            &["/no/such/file.parquet".into()],
            None,
            &mut BTreeSet::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/no/such/file.parquet"));
        let err =
            resolve_local(&["/no/such/*.parquet".into()], None, &mut BTreeSet::new()).unwrap_err();
        assert!(err.to_string().contains("matches no file"));
    }

    #[test]
    fn folder_without_parquet_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let err = resolve_local(
            &[dir.path().display().to_string()],
            None,
            &mut BTreeSet::new(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("no .parquet, .jsonl or .csv files"),
            "{err}"
        );
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
            Place::Local("/c/dt=1/a.parquet".into()),
            Place::Remote(url::Url::parse("s3://lake/c/dt=2/a.parquet").unwrap()),
        ];
        let (columns, values) = partitions(&files, &schema).unwrap();
        assert_eq!(columns, ["dt"]);
        assert_eq!(values[1], [Some("2".to_string())]);
        // A folder name that is also a column is the column, not a partition.
        let files = [Place::Local("/c/id=1/a.parquet".into())];
        assert!(partitions(&files, &schema).unwrap().0.is_empty());
        let files = [
            Place::Local("/c/dt=1/a.parquet".into()),
            Place::Local("/c/other/a.parquet".into()),
        ];
        let err = partitions(&files, &schema).unwrap_err().to_string();
        assert!(
            err.contains("/c/other/a.parquet") && err.contains("[dt]"),
            "{err}"
        );
    }

    /// `resolve_inputs`, failing instead of hanging when it does not finish in 30 s.
    #[cfg(unix)]
    fn resolve_quickly(input: &Path) -> Result<Vec<PathBuf>, String> {
        let inputs = vec![input.display().to_string()];
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let found =
                resolve_local(&inputs, None, &mut BTreeSet::new()).map_err(|e| e.to_string());
            let _ = send.send(found.map(|files| files.into_iter().map(|(f, _)| f).collect()));
        });
        receive
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("resolving {} did not finish in 30 s", input.display()))
    }

    #[cfg(unix)]
    #[test]
    fn symlink_loops_are_not_followed() {
        use std::os::unix::fs::symlink;
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("corpus");
        std::fs::create_dir(&dir).unwrap();
        // Resolution only looks for files; it does not read them.
        std::fs::write(dir.join("x.parquet"), "x").unwrap();
        symlink(".", dir.join("l1")).unwrap();
        symlink(".", dir.join("l2")).unwrap();
        // A loop through a subfolder, and a symlinked file (after x.parquet in path order):
        // still the one real file, under its own path.
        std::fs::create_dir(dir.join("sub")).unwrap();
        symlink("..", dir.join("sub").join("up")).unwrap();
        symlink("x.parquet", dir.join("z.parquet")).unwrap();
        let expected = vec![dir.join("x.parquet")];
        assert_eq!(resolve_quickly(&dir).unwrap(), expected);
        assert_eq!(
            resolve_quickly(&dir.join("**").join("*.parquet")).unwrap(),
            expected
        );
        // Through a loop link, and `**` alone (folders, so no file).
        let files = resolve_quickly(&dir.join("l1").join("**").join("x.parquet")).unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(
            std::fs::canonicalize(&files[0]).unwrap(),
            std::fs::canonicalize(&expected[0]).unwrap()
        );
        let err = resolve_quickly(&dir.join("**")).unwrap_err();
        assert!(err.contains("matches no file"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_to_another_folder_is_followed() {
        use std::os::unix::fs::symlink;
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("corpus");
        let outside = temp.path().join("outside");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(dir.join("x.parquet"), "x").unwrap();
        std::fs::write(outside.join("y.parquet"), "y").unwrap();
        symlink(&outside, dir.join("ext")).unwrap();
        // Two more links to the outside folder and one back from it: each file once, under
        // the first path in path order.
        symlink(&outside, dir.join("ext2")).unwrap();
        symlink(&dir, outside.join("back")).unwrap();
        let expected = vec![dir.join("ext").join("y.parquet"), dir.join("x.parquet")];
        assert_eq!(resolve_quickly(&dir).unwrap(), expected);
        assert_eq!(
            resolve_quickly(&dir.join("**").join("*.parquet")).unwrap(),
            expected
        );
        // A folder and a file named as a symlink to it and by its own path: read once.
        let both = resolve_local(
            &[
                dir.display().to_string(),
                outside.join("y.parquet").display().to_string(),
            ],
            None,
            &mut BTreeSet::new(),
        )
        .unwrap();
        let both: Vec<PathBuf> = both.into_iter().map(|(f, _)| f).collect();
        assert_eq!(both, expected);
    }

    /// Without loops (nor two paths to one folder under a `**`), patterns expand to the paths
    /// `glob::glob` finds.
    #[cfg(unix)]
    #[test]
    fn globs_expand_as_the_glob_crate_does() {
        use std::os::unix::fs::symlink;
        let temp = tempfile::tempdir().unwrap();
        let top = temp.path();
        let dir = top.join("corpus");
        for folder in ["a/b", "a/c", "_hidden", ".dot", "dt=1/x"] {
            std::fs::create_dir_all(dir.join(folder)).unwrap();
        }
        std::fs::create_dir(top.join("outside")).unwrap();
        for file in [
            "c.parquet",
            "a/d.parquet",
            "a/b/e.parquet",
            "a/b/f.txt",
            "a/c/b",
            ".dot/g.parquet",
            "_hidden/h.parquet",
            "dt=1/x/i.parquet",
            "../outside/j.parquet",
            "../top.parquet",
        ] {
            std::fs::write(dir.join(file), "x").unwrap();
        }
        symlink(top.join("outside"), dir.join("ext")).unwrap();
        symlink("c.parquet", dir.join("link.parquet")).unwrap();
        symlink("missing.parquet", dir.join("dangling.parquet")).unwrap();
        let patterns = [
            "*.parquet",
            "**/*.parquet",
            "**/**/*.parquet",
            "**/*",
            "*/*.parquet",
            "*/**/*.parquet",
            "**/b/*",
            "**/b/**/*",
            "a/**",
            "a/**/",
            "**",
            "[a-c]*",
            "?/*",
            "a/*/",
            ".*/*.parquet",
            "a/../*.parquet",
            "./*/*.parquet",
            "dt=*/*/*.parquet",
            "e[x]t/*",
            "a//b/*",
            "nothing/**/*.parquet",
            "c.parquet/**",
        ];
        for pattern in patterns {
            let pattern = format!("{}/{pattern}", dir.display());
            let expected: BTreeSet<PathBuf> =
                glob::glob(&pattern).unwrap().map(|p| p.unwrap()).collect();
            let found: BTreeSet<PathBuf> = glob_paths(&pattern).unwrap().into_iter().collect();
            assert_eq!(found, expected, "{pattern}");
        }
    }

    #[tokio::test]
    async fn non_parquet_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fake.parquet");
        std::fs::write(&file, "this is not parquet").unwrap();
        let found = vec![(Place::Local(file.clone()), FileFormat::default())];
        let err = inspect(found).await.unwrap_err();
        assert!(err.to_string().contains("fake.parquet"), "{err}");
        assert!(
            err.to_string().contains("not a readable Parquet file"),
            "{err}"
        );
    }
}
