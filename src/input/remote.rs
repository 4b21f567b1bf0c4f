//! Inputs on object stores: an object, a prefix (searched like a folder) or a pattern
//! (`s3://lake/crawl/*/part-*.jsonl.zst`), listed with the store's own listing.

use url::Url;

use crate::engine::commit::read_manifest;
use crate::error::{Error, Result};
use crate::input::folder_files;
use crate::input::format::{FileFormat, Format};
use crate::storage::Remote;

/// The objects an input URL names, sorted by key: the object itself; else, for a pattern,
/// those under its fixed prefix that match it; else those under it as a prefix, of the
/// folder's format (`folder_files`), skipping hidden and `_`-prefixed names (markers such as
/// `_SUCCESS`, a neardup output's `run-*` folders are not skipped: name them directly).
/// The folder of table `table` when `url` is a committed neardup output (its `_SUCCESS` is a
/// neardup manifest), `None` otherwise: another tool's `_SUCCESS` (Spark's empty marker) leaves
/// the prefix an ordinary input.
pub async fn committed_table(url: &Url, table: &str) -> Result<Option<Url>> {
    if url.path().contains(['*', '?', '[']) {
        return Ok(None);
    }
    let output = Remote::open(url)?;
    // Any failure to read a manifest (none there, another tool's `_SUCCESS`, or no right to
    // read it: a store answers 403 for a missing key to a caller who cannot list) leaves the
    // input as it was named.
    let Ok(Some(manifest)) = read_manifest(&output).await else {
        return Ok(None);
    };
    let Some(folder) = manifest.tables.get(table) else {
        return Err(Error::Input(format!(
            "input {url} is a neardup output without a {table} table (an output of `match` has \
             pairs and groups only); name the files to read"
        )));
    };
    Ok(Some(output.child(folder).url().clone()))
}

pub async fn expand(url: &Url, format: Option<Format>) -> Result<Vec<(Url, FileFormat)>> {
    let path = url.path();
    if path.contains(['*', '?', '[']) {
        return expand_pattern(url, format).await;
    }
    let target = Remote::open(url)?;
    if target.exists_as_object().await? {
        let format_of = FileFormat::of_file(path, format);
        return Ok(vec![(url.clone(), format_of)]);
    }
    let listed = target.list().await?;
    let prefix = target.key().to_string();
    let mut urls = Vec::new();
    let mut names = Vec::new();
    for object in listed {
        let key = object.location.to_string();
        let relative = key
            .strip_prefix(prefix.as_str())
            .unwrap_or(&key)
            .trim_start_matches('/');
        let hidden = relative
            .split('/')
            .any(|segment| segment.starts_with('.') || segment.starts_with('_'));
        if !hidden && object.size > 0 {
            urls.push(target.url_of(&object.location));
            names.push(key);
        }
    }
    let keep = folder_files(&names, format);
    if keep.is_empty() {
        let what = if names.is_empty() {
            "nothing (no such object or prefix, or it is empty)".to_string()
        } else {
            format!(
                "no {} files",
                format.map_or("Parquet, JSON Lines or CSV".into(), |f| f.to_string())
            )
        };
        return Err(Error::Input(format!("input {url} holds {what}")));
    }
    super::warn_left_out(url.as_str(), &names, &keep, format);
    Ok(keep
        .into_iter()
        .map(|i| {
            let format_of = FileFormat::of_file(&names[i], format);
            (urls[i].clone(), format_of)
        })
        .collect())
}

/// A pattern: the objects under its literal prefix (up to the first segment with a wildcard)
/// whose keys match it, as the glob crate matches paths (`*` within a segment, `**` across).
async fn expand_pattern(url: &Url, format: Option<Format>) -> Result<Vec<(Url, FileFormat)>> {
    // The key as the store lists it: decoded from the URL's %XX escapes.
    let decoded = object_store::path::Path::from_url_path(url.path())
        .map_err(|e| Error::Usage(format!("input pattern {url} is not a valid key: {e}")))?;
    let path = decoded.as_ref();
    let pattern = glob::Pattern::new(path)
        .map_err(|e| Error::Usage(format!("input pattern {url} is not a valid glob: {e}")))?;
    let fixed: Vec<&str> = path
        .split('/')
        .take_while(|segment| !segment.contains(['*', '?', '[']))
        .collect();
    let mut base = url.clone();
    base.set_path(&format!("/{}", fixed.join("/")));
    let target = Remote::open(&base)?;
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    let mut found = Vec::new();
    for object in target.list().await? {
        let key = object.location.to_string();
        if pattern.matches_with(&key, options) {
            let format_of = FileFormat::of_file(&key, format);
            found.push((target.url_of(&object.location), format_of));
        }
    }
    if found.is_empty() {
        return Err(Error::Input(format!(
            "input pattern {url} matches no object"
        )));
    }
    Ok(found)
}
