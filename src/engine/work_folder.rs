//! A folder for the files a job writes on its way (an executor's shuffle files, spilled sorts)
//! that goes when its owner is done with it.
//!
//! Ballista gives an executor without a work folder a temporary one that it never removes,
//! and `--cluster standalone` always ran that way: each run left the job's shuffle files (the
//! corpus's rows between stages) in the system's temporary folder; DataFusion's spill files
//! stayed behind a Ctrl-C. This folder is removed when dropped, and by the interrupt handler
//! on Ctrl-C or SIGTERM (which end the process without dropping anything).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// The work folders this process has now, for the interrupt handler.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every work folder this process has; called on Ctrl-C or SIGTERM. A task still
/// running may write into a folder while it goes, which fails the removal or makes the folder
/// again, so each is removed until it is gone (a few tries).
pub fn remove_live() {
    let places = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for place in places {
        for _ in 0..5 {
            if std::fs::remove_dir_all(&place).is_ok() && !place.exists() {
                break;
            }
        }
    }
}

/// A temporary folder for a job's intermediate files, removed on drop and on interrupt.
#[derive(Debug)]
pub struct WorkFolder {
    path: PathBuf,
}

impl WorkFolder {
    /// A new empty folder in the system's temporary folder (`TMPDIR`), named after `role`.
    pub fn create(role: &str) -> Result<Self> {
        let path = tempfile::Builder::new()
            .prefix(&format!("neardup-{role}-"))
            .tempdir()
            .map_err(|e| {
                Error::Input(format!(
                    "cannot create a folder for {role} files in {} (TMPDIR): {e}",
                    std::env::temp_dir().display()
                ))
            })?
            .keep();
        if let Ok(mut live) = LIVE.lock() {
            live.push(path.clone());
        }
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|p| p != &self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dropped, the folder goes with its files and leaves the interrupt handler's list. (The
    /// handler's removal, which takes every folder of the process, is tested through the
    /// binary: `robustness::spill_folders_go_with_the_run_and_with_ctrl_c`.)
    #[test]
    fn removed_with_what_was_written_into_it() {
        let folder = WorkFolder::create("test").unwrap();
        let path = folder.path().to_path_buf();
        assert!(path.is_dir());
        assert!(LIVE.lock().unwrap().contains(&path));
        std::fs::create_dir_all(path.join("job/1/0")).unwrap();
        std::fs::write(path.join("job/1/0/data-0.arrow"), b"rows").unwrap();
        drop(folder);
        assert!(!path.exists());
        assert!(!LIVE.lock().unwrap().contains(&path));
    }
}
