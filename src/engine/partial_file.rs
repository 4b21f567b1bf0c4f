//! A file that appears whole or not at all: written under a hidden partial name beside its
//! target (`.<name>.<pid>.partial`) and renamed into place once complete. The partial file is
//! removed when the writer fails or is dropped, and on Ctrl-C (the same registry as the staging
//! folders), so no command leaves half a file behind or in place of the old one.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::engine::staging::{forget_live, refuse_symlink, register_live};
use crate::error::{Error, Result};

/// Whether an existing file at the target may be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refuse it: the message names the flag that allows replacing it (`--overwrite`).
    Refuse,
    /// Replace it (the user asked, or the file is neardup's own).
    Replace,
}

impl Existing {
    pub fn from_overwrite(overwrite: bool) -> Self {
        if overwrite {
            Existing::Replace
        } else {
            Existing::Refuse
        }
    }
}

/// A file being written for `target`; `commit` puts it in place.
#[derive(Debug)]
pub struct PartialFile {
    target: PathBuf,
    partial: PathBuf,
    committed: bool,
}

impl PartialFile {
    /// Checks the target (`role` names it in messages, e.g. `--out`), then creates the partial
    /// file beside it. A folder at the target is always refused; a file unless `Replace`.
    pub fn create(target: &Path, role: &str, existing: Existing) -> Result<(Self, File)> {
        check_target(target, role, existing)?;
        // A new file in a new folder, as `run --output` makes its folders.
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let partial = partial_path(target);
        let file = File::create(&partial).map_err(|e| Error::io(&partial, e))?;
        register_live(&partial);
        let this = Self {
            target: target.to_path_buf(),
            partial,
            committed: false,
        };
        Ok((this, file))
    }

    /// Where the content is being written.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// Renames the complete file into place (replacing the old one in one step).
    pub fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.partial, &self.target).map_err(|e| Error::io(&self.target, e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.partial);
        }
        forget_live(&self.partial);
    }
}

/// Refuses a folder at `target`, a symbolic link, a device, pipe or socket (the new file would
/// take its place: `--out /dev/null --overwrite` would replace the device), and an existing
/// file unless it may be replaced.
pub fn check_target(target: &Path, role: &str, existing: Existing) -> Result<()> {
    refuse_symlink(target, role)?;
    if target.exists() && !target.is_file() && !target.is_dir() {
        let instead = if role == "--out" {
            "name a file, or leave out --out to write the result to standard output"
        } else {
            "name a file"
        };
        return Err(Error::Usage(format!(
            "{role} {} is a device, a pipe or a socket, not a file: neardup writes a new file \
             and renames it into place, which would replace it; {instead}",
            target.display()
        )));
    }
    if target.is_dir() {
        return Err(Error::Usage(format!(
            "{role} {} is a folder; name a file",
            target.display()
        )));
    }
    if existing == Existing::Refuse && target.exists() {
        return Err(Error::Usage(format!(
            "{role} {} already exists; pass --overwrite to replace it",
            target.display()
        )));
    }
    Ok(())
}

/// Writes `bytes` to `target` whole or not at all, replacing an existing file.
pub fn write_atomically(target: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let (partial, mut file) = PartialFile::create(target, "the file", Existing::Replace)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::io(partial.path(), e))?;
    drop(file);
    partial.commit()
}

/// `.<name>.<pid>.partial` beside `target`: hidden, and unique to this process, so two runs
/// writing the same target do not write into one file.
fn partial_path(target: &Path) -> PathBuf {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    target.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_appears_only_when_committed_and_replaces_only_when_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.csv");
        let (partial, file) = PartialFile::create(&target, "--out", Existing::Refuse).unwrap();
        std::fs::write(partial.path(), "a\n").unwrap();
        drop(file);
        assert!(!target.exists());
        partial.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "a\n");

        let err = PartialFile::create(&target, "--out", Existing::Refuse).unwrap_err();
        assert!(err.to_string().contains("pass --overwrite"), "{err}");
        let (abandoned, _file) = PartialFile::create(&target, "--out", Existing::Replace).unwrap();
        let partial_name = abandoned.path().to_path_buf();
        assert!(partial_name.exists());
        drop(abandoned);
        assert!(!partial_name.exists(), "a dropped partial file is removed");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "a\n");

        write_atomically(&target, b"b\n").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "b\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the target is left");

        let err = PartialFile::create(dir.path(), "--out", Existing::Replace).unwrap_err();
        assert!(err.to_string().contains("is a folder"), "{err}");
    }
}
