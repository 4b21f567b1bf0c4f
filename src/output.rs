//! Outputs appear whole or not at all: the job writes into a staging folder beside the target,
//! marks it complete, and renames it into place. An existing target is replaced only when asked,
//! and only if it is a neardup output (never someone's home folder).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Staging folders of this process, for the interrupt handler to remove (a Ctrl-C ends the
/// process without unwinding, so `Drop` does not run).
static LIVE_STAGING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every staging folder this process still has; called on Ctrl-C or SIGTERM. Says
/// whether there was any (a scheduler or an executor has none).
pub fn remove_live_staging() -> bool {
    match LIVE_STAGING.lock() {
        Ok(folders) => {
            for folder in folders.iter() {
                let _ = std::fs::remove_dir_all(folder);
            }
            !folders.is_empty()
        }
        Err(_) => false,
    }
}

fn staging_prefix(name: &str) -> String {
    format!(".{name}.neardup-staging-")
}

/// The file whose presence says a folder holds a complete neardup output.
pub const COMPLETE_MARKER: &str = "_SUCCESS";
pub const SUMMARY_FILE: &str = "summary.json";

/// A folder being written that becomes `target` on `commit`, and is removed if dropped before.
#[derive(Debug)]
pub struct StagingDir {
    target: PathBuf,
    staging: PathBuf,
    overwrite: bool,
    committed: bool,
}

impl StagingDir {
    /// Checks `target` can be written (absent, or `overwrite` and a neardup output) and creates
    /// the staging folder `.<name>.neardup-staging-<pid>` beside it.
    pub fn create(target: &Path, overwrite: bool) -> Result<Self> {
        let target = std::path::absolute(target).map_err(|e| Error::io(target, e))?;
        let name = target
            .file_name()
            .ok_or_else(|| Error::Usage(format!("--output {} names no folder", target.display())))?
            .to_string_lossy()
            .into_owned();
        if crate::input::has_glob_characters(&target) {
            return Err(Error::Usage(format!(
                "--output {} holds '*', '?' or '[', which DataFusion would read as a pattern; \
                 choose another name",
                target.display()
            )));
        }
        if target.exists() {
            if !target.is_dir() {
                return Err(Error::Usage(format!(
                    "--output {} is a file, not a folder",
                    target.display()
                )));
            }
            if !overwrite {
                return Err(Error::Usage(format!(
                    "output folder {} already exists; pass --overwrite to replace it",
                    target.display()
                )));
            }
            if !is_output_dir(&target) && !is_empty_dir(&target)? {
                return Err(Error::Usage(format!(
                    "refusing to replace {}: it is not a neardup output (no {COMPLETE_MARKER} or \
                     {SUMMARY_FILE}); choose another --output",
                    target.display()
                )));
            }
        }
        let parent = target.parent().unwrap_or(Path::new("/")).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
        remove_abandoned_staging(&parent, &name);
        let staging = parent.join(format!("{}{}", staging_prefix(&name), std::process::id()));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        }
        std::fs::create_dir(&staging).map_err(|e| Error::io(&staging, e))?;
        if let Ok(mut live) = LIVE_STAGING.lock() {
            live.push(staging.clone());
        }
        Ok(Self {
            target,
            staging,
            overwrite,
            committed: false,
        })
    }

    /// Where the job writes.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Marks the staging folder complete and moves it into place. An old output is moved
    /// aside first and removed only once the new one is in place.
    pub fn commit(mut self) -> Result<PathBuf> {
        let marker = self.staging.join(COMPLETE_MARKER);
        std::fs::write(&marker, b"").map_err(|e| Error::io(&marker, e))?;
        let mut old = None;
        if self.overwrite && self.target.exists() {
            let mut aside_name = self.staging.as_os_str().to_os_string();
            aside_name.push(".old");
            let aside = PathBuf::from(aside_name);
            std::fs::rename(&self.target, &aside).map_err(|e| Error::io(&self.target, e))?;
            old = Some(aside);
        }
        if let Err(e) = std::fs::rename(&self.staging, &self.target) {
            // Put the old output back: a failed commit must not lose it.
            if let Some(old) = &old {
                let _ = std::fs::rename(old, &self.target);
            }
            return Err(Error::io(&self.target, e));
        }
        self.committed = true;
        if let Some(old) = old {
            std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
        }
        Ok(self.target.clone())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: a failed run must not leave a half-written folder behind.
            let _ = std::fs::remove_dir_all(&self.staging);
        }
        if let Ok(mut live) = LIVE_STAGING.lock() {
            live.retain(|folder| folder != &self.staging);
        }
    }
}

/// Removes staging folders for the same target left by runs that were killed (`kill -9`, power
/// loss): their process no longer exists. Linux only (it asks /proc); elsewhere they stay, and
/// their names say what they are.
fn remove_abandoned_staging(parent: &Path, name: &str) {
    let prefix = staging_prefix(name);
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let is_old_output = pid.ends_with(".old");
        let pid = pid.trim_end_matches(".old");
        let alive = Path::new("/proc").join(pid).exists();
        if Path::new("/proc/self").exists() && !alive && pid.parse::<u32>().is_ok() {
            let target = parent.join(name);
            if is_old_output && !target.exists() {
                // Killed between moving the old output aside and moving the new one in:
                // the old output is the only complete one, so it goes back.
                let _ = std::fs::rename(entry.path(), &target);
            } else {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// True when `dir` holds a complete neardup output.
pub fn is_output_dir(dir: &Path) -> bool {
    dir.join(COMPLETE_MARKER).is_file() && dir.join(SUMMARY_FILE).is_file()
}

fn is_empty_dir(dir: &Path) -> Result<bool> {
    let mut entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok(entries.next().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_moves_into_place_and_drop_cleans_up() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("out");
        let staging = StagingDir::create(&target, false).unwrap();
        std::fs::write(staging.path().join(SUMMARY_FILE), "{}").unwrap();
        let staged = staging.path().to_path_buf();
        staging.commit().unwrap();
        assert!(is_output_dir(&target));
        assert!(!staged.exists());

        // Existing output: refused without overwrite.
        let err = StagingDir::create(&target, false).unwrap_err();
        assert!(err.to_string().contains("--overwrite"), "{err}");

        // Dropped without commit: nothing left beside the target, old output untouched.
        let staging = StagingDir::create(&target, true).unwrap();
        let staged = staging.path().to_path_buf();
        drop(staging);
        assert!(!staged.exists());
        assert!(is_output_dir(&target));
    }

    #[test]
    fn abandoned_staging_of_a_dead_process_is_removed() {
        let root = tempfile::tempdir().unwrap();
        // No process has pid 4000000000; one of another target is left alone.
        let dead = root.path().join(".out.neardup-staging-4000000000");
        let other = root.path().join(".other.neardup-staging-4000000000");
        std::fs::create_dir(&dead).unwrap();
        std::fs::create_dir(&other).unwrap();
        let staging = StagingDir::create(&root.path().join("out"), false).unwrap();
        assert!(!dead.exists());
        assert!(other.exists());
        assert!(staging.path().exists());
    }

    #[test]
    fn never_replaces_a_folder_that_is_not_an_output() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("precious.txt"), "keep me").unwrap();
        let err = StagingDir::create(root.path(), true).unwrap_err();
        assert!(err.to_string().contains("not a neardup output"), "{err}");
        assert!(root.path().join("precious.txt").exists());
    }
}
