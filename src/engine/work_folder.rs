//! A folder for the files a job writes on its way (an executor's shuffle files, spilled sorts)
//! that goes when its owner is done with it.
//!
//! Ballista gives an executor without a work folder a temporary one that it never removes,
//! and `--cluster standalone` always ran that way: each run left the job's shuffle files (the
//! corpus's rows between stages) in the system's temporary folder; DataFusion's spill files
//! stayed behind a Ctrl-C. This folder is removed when dropped, and by the interrupt handler
//! on Ctrl-C or SIGTERM (which end the process without dropping anything). A process killed
//! outright (`kill -9`, the kernel's out-of-memory killer) removes nothing, so each folder has
//! a lock file beside it that its process holds locked (`flock`) while it lives: the kernel
//! lets go of the lock when the process ends, however it ends, and the next folder made in the
//! same TMPDIR removes those whose lock it can take. A lock says more than a process number,
//! which another machine sharing TMPDIR, or a container, numbers apart.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// The work folders this process has now, for the interrupt handler.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every work folder this process has, and its lock file; called on Ctrl-C or SIGTERM.
/// A task still running may write into a folder while it goes, which fails the removal or
/// makes the folder again, so each is removed until it is gone (a few tries).
pub fn remove_live() {
    let places = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for place in places {
        for _ in 0..5 {
            if std::fs::remove_dir_all(&place).is_ok() && !place.exists() {
                break;
            }
        }
        let _ = std::fs::remove_file(lock_path(&place));
    }
}

/// A temporary folder for a job's intermediate files, removed on drop and on interrupt.
#[derive(Debug)]
pub struct WorkFolder {
    path: PathBuf,
    /// The lock file beside the folder, locked while this lives.
    _lock: File,
}

impl WorkFolder {
    /// A new empty folder in the system's temporary folder (`TMPDIR`), named after `role` and
    /// this process (`neardup-<role>-<pid>-<random>`), with its lock file beside it (the same
    /// name and `.lock`). First removes the folders there whose process has ended.
    pub fn create(role: &str) -> Result<Self> {
        let parent = std::env::temp_dir();
        remove_abandoned(&parent);
        let failed = |e: std::io::Error| {
            Error::Input(format!(
                "cannot create a folder for {role} files in {} (TMPDIR): {e}",
                parent.display()
            ))
        };
        // The lock first, taken before the folder exists: a folder is never seen without its
        // lock held.
        let (lock, lock_file) = tempfile::Builder::new()
            .prefix(&format!("neardup-{role}-{}-", std::process::id()))
            .suffix(LOCK_SUFFIX)
            .tempfile_in(&parent)
            .map_err(failed)?
            .keep()
            .map_err(|e| failed(e.error))?;
        lock.try_lock().map_err(|e| failed(e.into()))?;
        let name = lock_file.to_string_lossy();
        let path = PathBuf::from(name.strip_suffix(LOCK_SUFFIX).unwrap_or(&name));
        if let Err(e) = std::fs::create_dir(&path) {
            let _ = std::fs::remove_file(&lock_file);
            return Err(failed(e));
        }
        if let Ok(mut live) = LIVE.lock() {
            live.push(path.clone());
        }
        Ok(Self { path, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What the lock file's name adds to its folder's.
const LOCK_SUFFIX: &str = ".lock";

/// The roles `create` is given, the only folders `remove_abandoned` considers.
const ROLES: [&str; 4] = ["spill", "shuffle", "executor", "test"];

fn lock_path(folder: &Path) -> PathBuf {
    let mut name = folder.as_os_str().to_owned();
    name.push(LOCK_SUFFIX);
    PathBuf::from(name)
}

/// Removes the work folders in `parent` whose lock file can be locked: their process has
/// ended. A folder without a lock file (made by an older neardup, or whose lock file is gone)
/// is left alone, as is one whose lock cannot be asked for (a file system without locks).
fn remove_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let is_folder = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_folder || !is_work_folder(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let lock_file = lock_path(&entry.path());
        let Ok(lock) = File::open(&lock_file) else {
            continue;
        };
        if lock.try_lock().is_ok() {
            let _ = std::fs::remove_dir_all(entry.path());
            let _ = std::fs::remove_file(&lock_file);
        }
    }
}

/// Whether `name` is one `create` gives a folder: `neardup-<role>-...` of a known role.
fn is_work_folder(name: &str) -> bool {
    name.strip_prefix("neardup-")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(role, _)| ROLES.contains(&role))
}

impl Drop for WorkFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        let _ = std::fs::remove_file(lock_path(&self.path));
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

    /// A folder goes when its lock can be taken (its process has ended); one whose lock is
    /// held, one without a lock file, one of another name and a file stay.
    #[test]
    fn folders_whose_lock_is_free_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str, lock: bool| {
            let path = parent.path().join(name);
            std::fs::create_dir_all(path.join("datafusion-x")).unwrap();
            std::fs::write(path.join("datafusion-x/spill.arrow"), b"rows").unwrap();
            if lock {
                std::fs::write(lock_path(&path), b"").unwrap();
            }
            path
        };
        let ended = make("neardup-spill-4000000-AbC123", true);
        let ended_executor = make("neardup-executor-17-z9", true);
        let held = make("neardup-shuffle-4000000-Xy7", true);
        let holder = File::open(lock_path(&held)).unwrap();
        holder.try_lock().unwrap();
        let no_lock = make("neardup-spill-4000000-NoL0ck", false);
        let other_role = make("neardup-final-4000000-AbC123", true);
        let file = parent.path().join("neardup-spill-4000000-f1le");
        std::fs::write(&file, b"a user's file").unwrap();
        std::fs::write(lock_path(&file), b"").unwrap();
        remove_abandoned(parent.path());
        for gone in [&ended, &ended_executor] {
            assert!(
                !gone.exists() && !lock_path(gone).exists(),
                "{}",
                gone.display()
            );
        }
        for kept in [&held, &no_lock, &other_role, &file] {
            assert!(kept.exists(), "{}", kept.display());
        }
        assert!(lock_path(&held).exists());
        drop(holder);
    }

    /// A folder made by `create` holds its lock: a sweep leaves it, and it goes with its lock
    /// file when dropped.
    #[test]
    fn a_live_folder_is_not_swept() {
        let folder = WorkFolder::create("test").unwrap();
        let parent = folder.path().parent().unwrap().to_path_buf();
        assert!(lock_path(folder.path()).exists());
        remove_abandoned(&parent);
        assert!(folder.path().is_dir());
        let (path, lock) = (folder.path().to_path_buf(), lock_path(folder.path()));
        drop(folder);
        assert!(!path.exists() && !lock.exists());
    }
}
