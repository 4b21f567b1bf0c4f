//! A Delta table as a job's input: `delta:PATH|URL[@version=N|@timestamp=T]`, or any folder or
//! prefix holding `_delta_log/`. The table's log says which Parquet files make up the version
//! read; the job reads those files as it reads any Parquet input (their partition values from
//! their folder names), so the version is read exactly, locally or on a cluster. The version goes
//! into summary.json, so a run can be repeated on the same rows.

use serde::{Deserialize, Serialize};

use crate::delta::{At, delta_error, open, version_of};
use crate::error::{Error, Result};
use crate::storage::Place;

/// The prefix that says an input is a Delta table.
pub const PREFIX: &str = "delta:";

/// A Delta table a job read, and the version it read (summary.json's `delta_inputs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableRead {
    pub table: String,
    pub version: u64,
}

/// An input given as `delta:...`: the table and the version asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub place: Place,
    pub at: At,
}

/// `delta:LOCATION[@version=N|@timestamp=RFC3339]`, or `None` for an input without the prefix.
pub fn parse_spec(input: &str) -> Result<Option<Spec>> {
    let Some(rest) = input.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    let (location, at) = match rest.rsplit_once('@') {
        Some((location, version)) if version.starts_with("version=") => {
            let number = &version["version=".len()..];
            let number = number.parse::<u64>().map_err(|_| {
                Error::Usage(format!(
                    "--input {input}: @version= takes a version number (0, 1, ...), not {}",
                    crate::error::echo(number)
                ))
            })?;
            (location, At::Version(number))
        }
        Some((location, time)) if time.starts_with("timestamp=") => {
            let text = &time["timestamp=".len()..];
            let time = chrono::DateTime::parse_from_rfc3339(text).map_err(|e| {
                Error::Usage(format!(
                    "--input {input}: @timestamp= takes an RFC 3339 time such as \
                     2026-11-30T00:00:00Z, not {} ({e})",
                    crate::error::echo(text)
                ))
            })?;
            (location, At::Timestamp(time.with_timezone(&chrono::Utc)))
        }
        _ => (rest, At::Latest),
    };
    if location.is_empty() {
        return Err(Error::Usage(format!(
            "--input {input}: name the table after delta: (delta:s3://lake/crawl, delta:crawl/)"
        )));
    }
    Ok(Some(Spec {
        place: Place::parse(location, "--input")?,
        at,
    }))
}

/// The files of the table at `spec`'s version, sorted by path, and the version read.
pub async fn resolve(spec: &Spec) -> Result<(Vec<Place>, TableRead)> {
    let Some(table) = open(&spec.place, &spec.at).await? else {
        return Err(Error::Input(format!(
            "--input {}: not a Delta table (no commits in {}/_delta_log)",
            spec.place, spec.place
        )));
    };
    let version = version_of(&table);
    let state = table.snapshot().map_err(|e| delta_error(&spec.place, e))?;
    let snapshot = state.snapshot();
    let named = |what: &str| {
        Error::Input(format!(
            "--input {} (version {version}): the table uses {what}, which neardup does not \
             read yet; rewrite it without (e.g. with delta-rs or Spark) or read a version \
             from before",
            spec.place
        ))
    };
    let mapping = snapshot
        .metadata()
        .configuration()
        .get("delta.columnMapping.mode")
        .map(String::as_str);
    if mapping.is_some_and(|mode| mode != "none") {
        return Err(named("column mapping"));
    }
    let features: Vec<String> = snapshot
        .protocol()
        .reader_features()
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect();
    if features.iter().any(|f| f.starts_with("typeWidening")) {
        return Err(named("type widening"));
    }
    let log_store = table.log_store();
    let mut files = Vec::new();
    for file in snapshot.log_data().iter() {
        if file.deletion_vector_descriptor().is_some() {
            return Err(named("deletion vectors"));
        }
        let place = match &spec.place {
            // The relative path, decoded: a local path is not a URL (spaces, non-ASCII names).
            Place::Local(root) => Place::Local(
                std::path::absolute(root)
                    .map_err(|e| Error::io(root, e))?
                    .join(file.path().as_ref()),
            ),
            Place::Remote(_) => {
                Place::parse(&log_store.to_uri(&file.object_store_path()), "--input")?
            }
        };
        check_partition_folders(&place, &file.partition_values_map(), &spec.place)?;
        files.push(place);
    }
    if files.is_empty() {
        return Err(Error::Input(format!(
            "--input {} (version {version}): the table has no data files",
            spec.place
        )));
    }
    files.sort_by_key(ToString::to_string);
    let read = TableRead {
        table: spec.place.to_string(),
        version,
    };
    Ok((files, read))
}

/// The job takes a file's partition values from its folder names (`dt=2026-11-30/`); a table
/// whose files sit elsewhere (randomised prefixes) is refused rather than read without them.
fn check_partition_folders(
    file: &Place,
    values: &std::collections::HashMap<String, Option<String>>,
    table: &Place,
) -> Result<()> {
    if values.is_empty() {
        return Ok(());
    }
    let path = match file {
        Place::Local(path) => path.clone(),
        Place::Remote(url) => std::path::PathBuf::from(url.path()),
    };
    let folders: std::collections::HashMap<String, Option<String>> =
        crate::input::hive_partitions(&path).into_iter().collect();
    for (column, value) in values {
        if folders.get(column) != Some(value) {
            return Err(Error::Input(format!(
                "--input {table}: {file} holds partition {column}={} but its path does not say \
                 so ({column}=.../); neardup reads partition values from folder names",
                value.as_deref().unwrap_or("NULL")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_table_and_a_version() {
        assert_eq!(parse_spec("crawl/").unwrap(), None);
        let spec = parse_spec("delta:s3://lake/crawl@version=41")
            .unwrap()
            .unwrap();
        assert_eq!(spec.at, At::Version(41));
        assert_eq!(spec.place.to_string(), "s3://lake/crawl");
        let spec = parse_spec("delta:/data/crawl").unwrap().unwrap();
        assert_eq!(spec.at, At::Latest);
        let spec = parse_spec("delta:/data/crawl@timestamp=2026-11-30T12:00:00Z")
            .unwrap()
            .unwrap();
        assert!(
            matches!(spec.at, At::Timestamp(t) if t.to_rfc3339() == "2026-11-30T12:00:00+00:00")
        );
        // An '@' that is not a version stays in the path.
        let spec = parse_spec("delta:/data/a@b").unwrap().unwrap();
        assert_eq!(spec.place.to_string(), "/data/a@b");
        for bad in [
            "delta:",
            "delta:x@version=ten",
            "delta:x@timestamp=yesterday",
        ] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }
}
