//! A COPY that fails part way (a value that does not cast in the millionth row, a full disk)
//! has already written the files of the partitions that finished: DataFusion writes them in
//! place. Left there, a reader of the folder would take them for the result. What was in the
//! destination before the COPY is noted, and on failure only what the COPY added is removed:
//! files already there are never touched.
//!
//! Local destinations only. On an object store the objects a failed COPY wrote stay (removing
//! them would need a listing and a delete per object, racing other writers of the prefix).

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::storage::Place;

/// What a local COPY destination held before the COPY ran.
pub enum Before {
    /// A folder (the destination ends in '/', or is an existing folder) and its entries; `None`
    /// when the folder did not exist yet.
    Folder(PathBuf, Option<HashSet<OsString>>),
    /// A single file, and whether it existed.
    File(PathBuf, bool),
}

impl Before {
    /// Notes the destination of a COPY; `None` for an object store.
    pub fn note(destination: &str) -> Option<Before> {
        let Ok(Place::Local(path)) = Place::parse(destination, "COPY") else {
            return None;
        };
        if destination.ends_with('/') || path.is_dir() {
            let entries = std::fs::read_dir(&path).ok().map(|entries| {
                entries
                    .filter_map(|entry| entry.ok().map(|e| e.file_name()))
                    .collect()
            });
            Some(Before::Folder(path, entries))
        } else {
            let existed = path.exists();
            Some(Before::File(path, existed))
        }
    }

    /// Removes what the failed COPY added: the files new in the folder (the folder too if it
    /// was new and is empty after), or the file if it was new. Best effort: the COPY's own
    /// error is what the user is told.
    pub fn remove_added(&self) {
        match self {
            Before::Folder(folder, before) => {
                let Ok(entries) = std::fs::read_dir(folder) else {
                    return;
                };
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    if before.as_ref().is_none_or(|b| !b.contains(&name)) {
                        remove(&entry.path());
                    }
                }
                if before.is_none() {
                    // Only if empty: never a folder someone else filled meanwhile.
                    let _ = std::fs::remove_dir(folder);
                }
            }
            Before::File(file, existed) => {
                if !existed {
                    remove(file);
                }
            }
        }
    }
}

fn remove(path: &Path) {
    let removed = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    if let Err(e) = removed {
        log::debug!("{}: not removed after the failed COPY: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_copy_added_is_removed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let folder = dir.path().join("out");
        std::fs::create_dir(&folder).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(folder.join("mine.parquet"), "x").unwrap_or_else(|e| panic!("{e}"));
        let destination = format!("{}/", folder.display());
        let before = Before::note(&destination).unwrap_or_else(|| panic!("local"));
        std::fs::write(folder.join("abc_0.parquet"), "y").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(folder.join("part=1")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(folder.join("part=1/abc_1.parquet"), "z").unwrap_or_else(|e| panic!("{e}"));
        before.remove_added();
        let left: Vec<_> = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![OsString::from("mine.parquet")]);

        // A folder the COPY created goes; a file it created goes, one that was there stays.
        let new_folder = dir.path().join("new");
        let before =
            Before::note(&format!("{}/", new_folder.display())).unwrap_or_else(|| panic!("local"));
        std::fs::create_dir(&new_folder).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(new_folder.join("abc_0.parquet"), "y").unwrap_or_else(|e| panic!("{e}"));
        before.remove_added();
        assert!(!new_folder.exists());
        let file = dir.path().join("one.parquet");
        let before = Before::note(&file.display().to_string()).unwrap_or_else(|| panic!("local"));
        std::fs::write(&file, "partial").unwrap_or_else(|e| panic!("{e}"));
        before.remove_added();
        assert!(!file.exists());
        std::fs::write(&file, "earlier").unwrap_or_else(|e| panic!("{e}"));
        let before = Before::note(&file.display().to_string()).unwrap_or_else(|| panic!("local"));
        before.remove_added();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap_or_default(),
            "earlier"
        );
        assert!(Before::note("s3://bucket/out/").is_none());
    }
}
