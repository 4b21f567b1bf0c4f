//! The line of a JSON Lines file the reader stopped at. DataFusion's JSON reader says only that
//! the stream is not UTF-8, or gives a line number counted within one of its own chunks; on
//! that error path the file is read again, through the store it lives in (a local disk or an
//! object store alike) and decompressed as the reader did, to name the line. Read in the
//! store's chunks: for UTF-8 a file without line breaks is never held whole, for JSON one line
//! at a time.

use datafusion::datasource::listing::ListingTableUrl;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

use super::format::Compression;

/// The first line of the file at `location` (a local path or a store URL) that is not UTF-8,
/// numbered from 1, and the offset of its first bad byte in the uncompressed text, from 0;
/// `None` when every line is, or the file cannot be read again.
pub async fn first_line_not_utf8(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<(u64, u64)> {
    let mut text = read_again(ctx, location, compression).await?;
    let mut lines = Utf8Lines::default();
    while let Some(chunk) = text.next().await {
        if let Some(found) = lines.read(&chunk.ok()?) {
            return Some(found);
        }
    }
    lines.end()
}

/// The first line of the file at `location` that is not blank and not one JSON object, numbered
/// from 1, with what is wrong with it; `None` when every line is one, or the file cannot be read
/// again.
pub async fn first_line_not_json(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<(u64, String)> {
    let mut text = read_again(ctx, location, compression).await?;
    let mut lines = JsonLines::default();
    while let Some(chunk) = text.next().await {
        if let Some(found) = lines.read(&chunk.ok()?) {
            return Some(found);
        }
    }
    lines.end()
}

/// The file's bytes as the reader saw them, in the store's chunks.
async fn read_again(
    ctx: &SessionContext,
    location: &str,
    compression: Compression,
) -> Option<futures::stream::BoxStream<'static, datafusion::error::Result<bytes::Bytes>>> {
    let url = ListingTableUrl::parse(location).ok()?;
    let store = ctx.runtime_env().object_store(&url).ok()?;
    let bytes = store
        .get(url.prefix())
        .await
        .ok()?
        .into_stream()
        .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))
        .boxed();
    compression.datafusion().convert_stream(bytes).ok()
}

/// Checks a text chunk by chunk for its first line that is neither blank nor one JSON object.
#[derive(Debug)]
struct JsonLines {
    /// The current line so far.
    line: Vec<u8>,
    /// Its number, from 1.
    number: u64,
}

impl Default for JsonLines {
    fn default() -> Self {
        Self {
            line: Vec::new(),
            number: 1,
        }
    }
}

impl JsonLines {
    fn read(&mut self, mut chunk: &[u8]) -> Option<(u64, String)> {
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&chunk[..end]);
            chunk = &chunk[end + 1..];
            if let Some(found) = self.check() {
                return Some(found);
            }
            self.line.clear();
            self.number += 1;
        }
        self.line.extend_from_slice(chunk);
        None
    }

    fn end(mut self) -> Option<(u64, String)> {
        self.check()
    }

    /// What is wrong with the current line, if anything.
    fn check(&mut self) -> Option<(u64, String)> {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        type Object = serde_json::Map<String, serde_json::Value>;
        serde_json::from_slice::<Object>(line)
            .err()
            .map(|e| (self.number, e.to_string()))
    }
}

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

impl Utf8Lines {
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

    /// The text cut into chunks of `size` bytes.
    fn in_chunks(text: &[u8], size: usize) -> Option<(u64, u64)> {
        let mut lines = Utf8Lines::default();
        for chunk in text.chunks(size) {
            if let Some(found) = lines.read(chunk) {
                return Some(found);
            }
        }
        lines.end()
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
            let mut lines = JsonLines::default();
            let found = text
                .chunks(size)
                .find_map(|chunk| lines.read(chunk))
                .or_else(|| lines.end());
            let (line, why) = found.unwrap();
            assert_eq!(line, 5, "{size}");
            assert!(why.contains("EOF while parsing a string"), "{why}");
        }
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
}
