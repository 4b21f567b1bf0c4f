//! The line of a JSON Lines file the reader stopped at. DataFusion's JSON reader says only that
//! the stream is not UTF-8, or gives a line number counted within one of its own chunks; on
//! that error path the file is read again, through the store it lives in (a local disk or an
//! object store alike) and decompressed as the reader did, to name the line. Read in the
//! store's chunks: for UTF-8 a file without line breaks is never held whole, for JSON one line
//! at a time.

use std::sync::Arc;

use datafusion::datasource::listing::ListingTableUrl;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use object_store::chunked::ChunkedStore;
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::storage::Place;

use super::format::Compression;
use super::whole_numbers::{self, WholeColumn};

/// The first line of the file at `location` (a local path or a store URL) that is not UTF-8,
/// numbered from 1, and the offset of its first bad byte in the uncompressed text, from 0;
/// `None` when every line is, or the file cannot be read again.
pub async fn first_line_not_utf8(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<(u64, u64)> {
    first_found::<Utf8Lines>(ctx, location, compression).await
}

/// The first line of the file at `location` that is not blank and not one JSON object, numbered
/// from 1, with what is wrong with it; `None` when every line is one, or the file cannot be read
/// again.
pub async fn first_line_not_json(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<(u64, String)> {
    first_found::<JsonLines>(ctx, location, compression).await
}

/// The first line of the file at `location` whose field has a value of another kind than its
/// column, for the JSON reader's `message` about it (`whilst decoding field 'text': expected
/// string got 7`), numbered from 1, with what the field holds there; `None` when the message is
/// not about a top-level field's kind, no line has such a value, or the file cannot be read
/// again.
pub async fn first_line_of_wrong_kind(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
    message: &str,
) -> Option<(u64, String)> {
    let field = FieldKind::from_message(message)?;
    let check = JsonLines {
        field: Some(field),
        ..JsonLines::default()
    };
    found_by(check, ctx, location, compression).await
}

/// The first line of the file at `location` that the JSON reader would silently change
/// (`super::whole_numbers`): a value of `columns` read as another number, or a top-level key
/// not among `names` (the file's columns), whose values it drops. Numbered from 1, with what
/// is changed; `None` when no line has one, or the file cannot be read again. Unlike the
/// others, this check runs before any error: the reader reports none for such a line.
pub async fn first_line_changed(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
    columns: Vec<WholeColumn>,
    names: Vec<String>,
) -> Option<(u64, String)> {
    let check = JsonLines {
        whole: columns,
        names,
        ..JsonLines::default()
    };
    found_by(check, ctx, location, compression).await
}

/// A check of a text read chunk by chunk, for the first place something is wrong.
trait LineCheck: Default {
    type Found;
    /// Checks the next chunk.
    fn read(&mut self, chunk: &[u8]) -> Option<Self::Found>;
    /// At the end of the text.
    fn end(self) -> Option<Self::Found>;
}

/// What `C` finds in the file, read again; `None` when nothing, or it cannot be read.
async fn first_found<C: LineCheck>(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<C::Found> {
    found_by(C::default(), ctx, location, compression).await
}

/// What `check` finds in the file, read again.
async fn found_by<C: LineCheck>(
    mut check: C,
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<C::Found> {
    let mut text = read_again(ctx, location, compression).await?;
    while let Some(chunk) = text.next().await {
        if let Some(found) = check.read(&chunk.ok()?) {
            return Some(found);
        }
    }
    check.end()
}

/// The file's bytes as the reader saw them, in the store's chunks.
pub(super) async fn read_again(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<futures::stream::BoxStream<'static, datafusion::error::Result<bytes::Bytes>>> {
    // A local path as it is (a name with '*' or '[' is a file here, not a pattern), a URL
    // through the session's store for it.
    let (store, path): (Arc<dyn ObjectStore>, object_store::path::Path) =
        match Place::parse(location, "input") {
            // In chunks of 4 MiB: the store's own are 8 KiB, each read on a blocking thread of
            // its own, which for a whole file took longer than the decoding.
            Ok(Place::Local(file)) => (
                Arc::new(ChunkedStore::new(Arc::new(LocalFileSystem::new()), 1 << 22)),
                object_store::path::Path::from_filesystem_path(&file).ok()?,
            ),
            _ => {
                let url = ListingTableUrl::parse(location).ok()?;
                let store = ctx.runtime_env().object_store(&url).ok()?;
                (store, url.prefix().clone())
            }
        };
    let bytes = store
        .get(&path)
        .await
        .ok()?
        .into_stream()
        .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))
        .boxed();
    compression.datafusion().convert_stream(bytes).ok()
}

/// A line longer than this is not held to be checked: the search gives up (the error then
/// names the file only). Far beyond any document the job reads whole.
const LONGEST_LINE: usize = if cfg!(test) { 1 << 10 } else { 1 << 30 };

/// Checks a text chunk by chunk for its first line that is neither blank nor one JSON object.
#[derive(Debug)]
struct JsonLines {
    /// The current line so far.
    line: Vec<u8>,
    /// Its number, from 1.
    number: u64,
    /// A line was longer than `LONGEST_LINE`.
    gave_up: bool,
    /// A field whose value must also be of a kind, in a line that is one JSON object.
    field: Option<FieldKind>,
    /// Whole-number columns whose values must be read as written, and the file's columns, of
    /// which every key must be one; when there are some, only they are checked.
    whole: Vec<WholeColumn>,
    names: Vec<String>,
}

impl Default for JsonLines {
    fn default() -> Self {
        Self {
            line: Vec::new(),
            number: 1,
            gave_up: false,
            field: None,
            whole: Vec::new(),
            names: Vec::new(),
        }
    }
}

/// A top-level field and the kind of JSON value its column takes (or null), as the JSON
/// reader's error for a value of another kind states them.
#[derive(Debug, PartialEq)]
struct FieldKind {
    name: String,
    kind: JsonKind,
    /// The value the reader stopped on is not a list, so where the field holds a list (a list
    /// column, whose reader names no element) the wrong value is one of its elements.
    in_list: bool,
}

#[derive(Debug, PartialEq)]
enum JsonKind {
    String,
    Boolean,
    /// A number or a string (a number column, which also parses strings).
    Primitive,
    Object,
    Array,
    /// A number column's value that does not parse, as the reader shows it (`"abc"`), with the
    /// column's type (`Int64`).
    Unparsed {
        value: serde_json::Value,
        column: String,
    },
}

impl JsonKind {
    fn fits(&self, value: &serde_json::Value) -> bool {
        use serde_json::Value;
        match (self, value) {
            (_, Value::Null) => true,
            (JsonKind::String, v) => v.is_string(),
            (JsonKind::Boolean, v) => v.is_boolean(),
            (JsonKind::Primitive, v) => v.is_number() || v.is_string(),
            (JsonKind::Object, v) => v.is_object(),
            (JsonKind::Array, v) => v.is_array(),
            (JsonKind::Unparsed { value, .. }, v) => v != value,
        }
    }

    /// What the column holds, for the message.
    fn column(&self) -> String {
        match self {
            JsonKind::String => "strings".into(),
            JsonKind::Boolean => "booleans".into(),
            JsonKind::Primitive => "numbers".into(),
            JsonKind::Object => "objects".into(),
            JsonKind::Array => "lists".into(),
            JsonKind::Unparsed { column, .. } => format!("{column} values"),
        }
    }
}

impl FieldKind {
    /// From `... whilst decoding field 'text': expected string got 7` or `... field 'id':
    /// failed to parse "abc" as Int64`; `None` for a message of another form, or about a field
    /// inside another (whose line is not searched).
    fn from_message(message: &str) -> Option<FieldKind> {
        const FIELD: &str = "whilst decoding field '";
        let (_, rest) = message.split_once(FIELD)?;
        let (name, rest) = rest.split_once("': ")?;
        if rest.contains(FIELD) {
            return None;
        }
        let name = name.to_string();
        if let Some(unparsed) = rest.strip_prefix("failed to parse ") {
            let (shown, column) = unparsed.rsplit_once(" as ")?;
            let column = column.split_whitespace().next()?.to_string();
            let value: serde_json::Value = serde_json::from_str(shown).ok()?;
            let in_list = !value.is_array();
            let kind = JsonKind::Unparsed { value, column };
            return Some(FieldKind {
                name,
                kind,
                in_list,
            });
        }
        let (expected, got) = rest.strip_prefix("expected ")?.split_once(" got ")?;
        let kind = match expected {
            "string" => JsonKind::String,
            "boolean" => JsonKind::Boolean,
            "primitive" => JsonKind::Primitive,
            "{" => JsonKind::Object,
            "[" => JsonKind::Array,
            _ => return None,
        };
        let got = serde_json::from_str::<serde_json::Value>(got.trim()).ok();
        let in_list = got.is_some_and(|got| !got.is_array());
        Some(FieldKind {
            name,
            kind,
            in_list,
        })
    }

    /// What is wrong with this field in `object`, if anything.
    fn check(&self, object: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
        let value = object.get(&self.name)?;
        let column = self.kind.column();
        let name = &self.name;
        if self.in_list && value.is_array() {
            let wrong = first_element_not(value, &self.kind)?;
            let wrong = shown(wrong);
            return Some(format!(
                "its \"{name}\" holds {wrong} in a list, where the column (inferred from the first \
                 lines) holds lists of {column}"
            ));
        }
        if self.kind.fits(value) {
            return None;
        }
        let value = shown(value);
        Some(format!(
            "its \"{name}\" is {value}, where the column (inferred from the first lines) holds \
             {column}"
        ))
    }
}

/// The first value inside the list `value` (in lists of lists too) that is not of `kind`.
fn first_element_not<'a>(
    value: &'a serde_json::Value,
    kind: &JsonKind,
) -> Option<&'a serde_json::Value> {
    match value {
        serde_json::Value::Array(items) => items.iter().find_map(|v| first_element_not(v, kind)),
        v => (!kind.fits(v)).then_some(v),
    }
}

/// A value as JSON, cut to about 40 bytes.
fn shown(value: &serde_json::Value) -> String {
    let mut shown = value.to_string();
    if shown.len() > 40 {
        let cut = (0..=40)
            .rev()
            .find(|&i| shown.is_char_boundary(i))
            .unwrap_or(0);
        shown.truncate(cut);
        shown.push_str("...");
    }
    shown
}

impl LineCheck for JsonLines {
    type Found = (u64, String);

    fn read(&mut self, mut chunk: &[u8]) -> Option<(u64, String)> {
        while !self.gave_up
            && let Some(end) = chunk.iter().position(|&b| b == b'\n')
        {
            self.extend(&chunk[..end]);
            chunk = &chunk[end + 1..];
            if let Some(found) = self.check() {
                return Some(found);
            }
            self.line.clear();
            self.number += 1;
        }
        self.extend(chunk);
        None
    }

    fn end(self) -> Option<(u64, String)> {
        self.check()
    }
}

impl JsonLines {
    fn extend(&mut self, bytes: &[u8]) {
        if self.gave_up || self.line.len() + bytes.len() > LONGEST_LINE {
            self.gave_up = true;
            self.line = Vec::new();
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    /// What is wrong with the current line, if anything: serde's message, with the column in
    /// the line (serde's own line is always 1, the line alone being parsed).
    fn check(&self) -> Option<(u64, String)> {
        if self.gave_up {
            return None;
        }
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        if self.number == 1 && line.starts_with(BYTE_ORDER_MARK) {
            let why = "it starts with a byte order mark (EF BB BF), which the JSON reader does \
                       not take; remove those three bytes";
            return Some((1, why.to_string()));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if !self.names.is_empty() {
            let why = whole_numbers::unknown_key_in_line(&self.names, line)
                .or_else(|| whole_numbers::changed_in_line(&self.whole, line))?;
            return Some((self.number, why));
        }
        type Object = serde_json::Map<String, serde_json::Value>;
        let error = match (serde_json::from_slice::<Object>(line), &self.field) {
            (Ok(object), Some(field)) => return Some((self.number, field.check(&object)?)),
            (Ok(_), None) => return None,
            // Searching for a value of the wrong kind: a line that serde refuses, the reader
            // may have taken (`1e400`, two objects on one line).
            (Err(_), Some(_)) => return None,
            (Err(error), None) => error,
        };
        let full = error.to_string();
        let place = format!(" at line {} column {}", error.line(), error.column());
        let what = full.strip_suffix(&place).unwrap_or(&full);
        Some((self.number, format!("{what}, at column {}", error.column())))
    }
}

/// UTF-8's byte order mark, which some tools write first and the JSON reader refuses.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// Checks a text chunk by chunk for its first line that is not UTF-8.
#[derive(Debug)]
struct Utf8Lines {
    /// What is not checked yet: at most a character cut by the end of the last chunk.
    pending: Vec<u8>,
    /// The line and offset of `pending`'s first byte.
    line: u64,
    offset: u64,
}

impl Default for Utf8Lines {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
            line: 1,
            offset: 0,
        }
    }
}

impl LineCheck for Utf8Lines {
    type Found = (u64, u64);

    /// Checks the next chunk; the line and offset of the first bad byte once there is one.
    fn read(&mut self, chunk: &[u8]) -> Option<(u64, u64)> {
        self.pending.extend_from_slice(chunk);
        let (good, bad) = match std::str::from_utf8(&self.pending) {
            Ok(_) => (self.pending.len(), false),
            // A character cut by the chunk's end is bad only if the text ends there (`end`).
            Err(e) => (e.valid_up_to(), e.error_len().is_some()),
        };
        let lines = self.pending[..good].iter().filter(|&&b| b == b'\n').count() as u64;
        self.line += lines;
        self.offset += good as u64;
        if bad {
            return Some((self.line, self.offset));
        }
        self.pending.drain(..good);
        None
    }

    /// At the end of the text: a character left cut there is the first bad byte.
    fn end(self) -> Option<(u64, u64)> {
        (!self.pending.is_empty()).then_some((self.line, self.offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `check` finds in `text` cut into chunks of `size` bytes (as `found_by` reads a
    /// stream).
    fn found_in_chunks<C: LineCheck>(mut check: C, text: &[u8], size: usize) -> Option<C::Found> {
        text.chunks(size)
            .find_map(|chunk| check.read(chunk))
            .or_else(|| check.end())
    }

    /// The first line of `text` that is not UTF-8, cut into chunks of `size` bytes.
    fn in_chunks(text: &[u8], size: usize) -> Option<(u64, u64)> {
        found_in_chunks(Utf8Lines::default(), text, size)
    }

    #[test]
    fn the_first_bad_line_is_found_whatever_the_chunks() {
        // Lines 1 and 2 are 11 bytes each with their newlines (é is two); the bad byte follows
        // `{"a":"x`, 7 bytes into line 3.
        let text = b"{\"a\":\"\xc3\xa9\"}\n{\"a\":\"ok\"}\n{\"a\":\"x\xff\"}\n{\"a\":\"\xff\"}\n";
        for size in 1..=text.len() {
            assert_eq!(in_chunks(text, size), Some((3, 11 + 11 + 7)), "{size}");
        }
        let good = "{\"a\":\"é\"}\n{\"a\":\"中文\"}".as_bytes();
        for size in 1..=good.len() {
            assert_eq!(in_chunks(good, size), None, "{size}");
        }
        // A character cut by the text's end.
        let cut = b"ok\n\xe4\xb8";
        for size in 1..=cut.len() {
            assert_eq!(in_chunks(cut, size), Some((2, 3)), "{size}");
        }
        assert_eq!(in_chunks(b"", 1), None);
    }

    #[test]
    fn the_first_line_that_is_not_one_json_object_is_found_whatever_the_chunks() {
        let text = b"{\"a\":1}\n\n  \r\n{\"a\":\"x\"}\r\n{\"a\":\"cut\n{\"a\":2}\n";
        for size in 1..=text.len() {
            let (line, why) = found_in_chunks(JsonLines::default(), text, size).unwrap();
            assert_eq!(line, 5, "{size}");
            assert_eq!(why, "EOF while parsing a string, at column 9", "{size}");
        }
        let mut lines = JsonLines::default();
        let (line, why) = lines.read(b"\xEF\xBB\xBF{\"a\":1}\n").unwrap();
        assert_eq!(line, 1);
        assert!(why.contains("byte order mark"), "{why}");
        // A line past the longest held gives up rather than holding it.
        let mut lines = JsonLines::default();
        let long = vec![b'x'; LONGEST_LINE / 2 + 1];
        assert_eq!(lines.read(&long), None);
        assert_eq!(lines.read(&long), None);
        assert_eq!(lines.read(b"\n{"), None);
        assert!(lines.gave_up && lines.line.is_empty());
        assert_eq!(lines.end(), None);
        for (text, line) in [(&b"{}\n[1, 2]\n"[..], 2), (b"{}\n{\"a\":1} x", 2)] {
            let mut lines = JsonLines::default();
            assert_eq!(
                lines.read(text).or_else(|| lines.end()).map(|f| f.0),
                Some(line)
            );
        }
        let mut lines = JsonLines::default();
        assert_eq!(
            lines.read(b"{}\n{\"a\": [1]}\n\n").or_else(|| lines.end()),
            None
        );
    }

    #[tokio::test]
    async fn a_file_is_read_again_through_its_store_and_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = SessionContext::new();
        // Many chunks without a line break, characters cut by the chunks' ends (one ASCII byte
        // first puts each end inside an é), then a bad byte on the second line.
        let mut text = b"x".to_vec();
        text.extend("é".repeat(100_000).into_bytes());
        text.extend(b"\n\xff");
        let plain = dir.path().join("bad.jsonl");
        std::fs::write(&plain, &text).unwrap();
        let location = plain.display().to_string();
        assert_eq!(
            first_line_not_utf8(&ctx, &location, Compression::None).await,
            Some((2, 200_002))
        );
        // The `gzip` of every Debian, as a user would have compressed it.
        let gzipped = dir.path().join("bad.jsonl.gz");
        let status = std::process::Command::new("gzip")
            .arg("-k")
            .arg(&plain)
            .status()
            .unwrap();
        assert!(status.success());
        let location = gzipped.display().to_string();
        assert_eq!(
            first_line_not_utf8(&ctx, &location, Compression::Gzip).await,
            Some((2, 200_002))
        );
        text.pop();
        std::fs::write(&plain, &text).unwrap();
        let location = plain.display().to_string();
        assert_eq!(
            first_line_not_utf8(&ctx, &location, Compression::None).await,
            None
        );
        let missing = dir.path().join("missing.jsonl").display().to_string();
        assert_eq!(
            first_line_not_utf8(&ctx, &missing, Compression::None).await,
            None
        );
    }

    /// The line `message`'s field has a value of the wrong kind in, cut into chunks of `size`.
    fn wrong_kind(text: &[u8], message: &str, size: usize) -> Option<(u64, String)> {
        let lines = JsonLines {
            field: Some(FieldKind::from_message(message)?),
            ..JsonLines::default()
        };
        found_in_chunks(lines, text, size)
    }

    #[test]
    fn the_line_of_a_value_of_another_kind_is_found_from_the_readers_message() {
        let text =
            b"{\"id\":1,\"text\":\"a\"}\n\n{\"id\":2,\"text\":null}\n{\"id\":\"x3\",\"text\":7}\n";
        let message =
            "Arrow error: Json error: whilst decoding field 'text': expected string got 7";
        for size in 1..=text.len() {
            let (line, why) = wrong_kind(text, message, size).unwrap();
            assert_eq!(line, 4, "{size}");
            assert!(
                why.contains("\"text\" is 7") && why.contains("holds strings"),
                "{why}"
            );
        }
        // A number column's value that does not parse: the line whose value the reader shows.
        let message = "Json error: whilst decoding field 'id': failed to parse \"x3\" as Int64";
        let (line, why) = wrong_kind(text, message, 5).unwrap();
        assert_eq!(line, 4);
        assert!(
            why.contains("\"id\" is \"x3\"") && why.contains("holds Int64 values"),
            "{why}"
        );
        // Null fits any column; a field inside another, or another message, is not searched.
        assert_eq!(
            wrong_kind(
                b"{\"text\":null}\n",
                "whilst decoding field 'text': expected string got 7",
                3
            ),
            None
        );
        // A boolean in a number column; a line serde refuses (`1e400`, which the reader
        // takes) is passed over, not blamed.
        let numbers = b"{\"n\":1}\n{\"n\":1e400}\n{\"n\":\"2\"}\n{\"n\":true}\n";
        let message = "whilst decoding field 'n': expected primitive got true";
        let (line, why) = wrong_kind(numbers, message, 4).unwrap();
        assert_eq!(line, 4);
        assert!(
            why.contains("\"n\" is true") && why.contains("holds numbers"),
            "{why}"
        );
        // A list column's element names no element: the list holding it, not the first list.
        let lists = b"{\"tags\":[\"a\",\"b\"]}\n{\"tags\":[]}\n{\"tags\":[\"c\",[7]]}\n";
        let message = "whilst decoding field 'tags': expected string got 7";
        let (line, why) = wrong_kind(lists, message, 7).unwrap();
        assert_eq!(line, 3);
        assert!(
            why.contains("holds 7 in a list") && why.contains("lists of strings"),
            "{why}"
        );
        // A list where the column holds strings is the wrong value itself.
        let message = "whilst decoding field 'tags': expected string got [\"a\", \"b\"]";
        assert_eq!(wrong_kind(lists, message, 7).map(|found| found.0), Some(1));
        let nested =
            "whilst decoding field 'a': whilst decoding field 'b': expected primitive got []";
        assert_eq!(FieldKind::from_message(nested), None);
        assert_eq!(
            FieldKind::from_message("Json error: Encountered unexpected 'x'"),
            None
        );
    }
}
