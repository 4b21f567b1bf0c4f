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
//! same TMPDIR removes those whose lock it can take. Only folders of this machine since it last
//! started (its boot id is in the name) are looked at: on some file systems another machine
//! sharing TMPDIR would see a lock it does not hold as free; on one kernel a lock is what it says.

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
            if remove_folder(&place) {
                break;
            }
        }
    }
}

/// Removes a work folder, then its lock file if the folder is gone. A folder that stays (a task
/// still writing into it) keeps its lock file, so that a later run removes both once the lock
/// is free. True when the folder is gone.
fn remove_folder(path: &Path) -> bool {
    let _ = std::fs::remove_dir_all(path);
    let gone = !path.exists();
    if gone {
        let _ = std::fs::remove_file(lock_path(path));
    }
    gone
}

/// A temporary folder for a job's intermediate files, removed on drop and on interrupt.
#[derive(Debug)]
pub struct WorkFolder {
    path: PathBuf,
    /// The lock file beside the folder, locked while this lives; `None` where the file system
    /// takes no lock (the folder is then never taken for an abandoned one).
    _lock: Option<File>,
}

impl WorkFolder {
    /// A new empty folder in the system's temporary folder (`TMPDIR`), named after `role`, this
    /// machine's boot and this process (`neardup-<role>-<boot>-<pid>-<random>`), with its lock
    /// file beside it (the same name and `.lock`). First removes the folders there whose
    /// process has ended.
    pub fn create(role: &str) -> Result<Self> {
        let parent = std::env::temp_dir();
        let boot = boot_id();
        if let Some(boot) = &boot {
            remove_abandoned(&parent, boot);
        }
        let failed = |e: std::io::Error| {
            Error::Input(format!(
                "cannot create a folder for {role} files in {} (TMPDIR): {e}",
                parent.display()
            ))
        };
        // The lock first, taken before the folder exists: a folder is never seen without its
        // lock held.
        let boot = boot.as_deref().unwrap_or(UNKNOWN_BOOT);
        let (lock, lock_file) = tempfile::Builder::new()
            .prefix(&format!("neardup-{role}-{boot}-{}-", std::process::id()))
            .suffix(LOCK_SUFFIX)
            .tempfile_in(&parent)
            .map_err(failed)?
            .keep()
            .map_err(|e| failed(e.error))?;
        // The random part of the name has no dot: this takes `.lock` off.
        let path = lock_file.with_extension("");
        let lock = match lock.try_lock() {
            Ok(()) => Some(lock),
            Err(_) => {
                let _ = std::fs::remove_file(&lock_file);
                None
            }
        };
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

/// The boot part of a name where the machine does not say its boot id (not Linux): such folders
/// are never swept.
const UNKNOWN_BOOT: &str = "unknown";

/// This machine's boot, from the kernel's boot id (new at every start, different on every
/// machine): its first 12 hex digits, or `None` where there is none.
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let digits: String = id
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .take(12)
        .collect();
    (digits.len() == 12).then_some(digits)
}

fn lock_path(folder: &Path) -> PathBuf {
    let mut name = folder.as_os_str().to_owned();
    name.push(LOCK_SUFFIX);
    PathBuf::from(name)
}

/// Removes the work folders in `parent` made since this machine's `boot` whose lock file can be
/// locked: their process has ended. A folder without a lock file (made by an older neardup, or
/// on a file system without locks) is left alone. A lock file without its folder (its process
/// killed between making the one and the other) goes too, once free and a minute old: younger,
/// it may be one a starting run has made and not yet locked.
fn remove_abandoned(parent: &Path, boot: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_folder = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_folder && is_work_folder(&name, boot) {
            let lock_file = lock_path(&entry.path());
            if let Some(_free) = free_lock(&lock_file) {
                remove_folder(&entry.path());
            }
            continue;
        }
        let alone = name
            .strip_suffix(LOCK_SUFFIX)
            .is_some_and(|folder| is_work_folder(folder, boot))
            && !entry.path().with_extension("").exists();
        if alone
            && is_older_than(&entry.path(), LONE_LOCK_AGE)
            && free_lock(&entry.path()).is_some()
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How old a lock file without its folder must be before a sweep removes it.
const LONE_LOCK_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// The lock file at `path`, locked here, when no process holds it (and it is still the file
/// at `path`); `None` when it is held or cannot be opened.
fn free_lock(path: &Path) -> Option<File> {
    // Open for writing too: over NFS an exclusive lock needs it.
    let lock = File::options().read(true).write(true).open(path).ok()?;
    (lock.try_lock().is_ok() && still_named(&lock, path)).then_some(lock)
}

/// Whether the file at `path` was last modified at least `age` ago.
fn is_older_than(path: &Path, age: std::time::Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|elapsed| elapsed >= age)
}

/// Whether the file locked is still the one at `path`: another run may have removed that
/// folder and its lock file between the opening and the lock.
fn still_named(lock: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (lock.metadata(), std::fs::metadata(path)) {
            (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = lock;
        path.exists()
    }
}

/// Whether `name` is one `create` gives a folder on this machine since `boot`:
/// `neardup-<role>-<boot>-...` of a known role.
fn is_work_folder(name: &str, boot: &str) -> bool {
    let Some((role, rest)) = name
        .strip_prefix("neardup-")
        .and_then(|r| r.split_once('-'))
    else {
        return false;
    };
    ROLES.contains(&role) && rest.split_once('-').is_some_and(|(made, _)| made == boot)
}

impl Drop for WorkFolder {
    fn drop(&mut self) {
        remove_folder(&self.path);
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
    /// held, one without a lock file, one of another boot or name, and a file stay.
    #[test]
    fn folders_whose_lock_is_free_are_removed() {
        let Some(boot) = boot_id() else {
            crate::to_stderr!("skipped: no boot id (not Linux)");
            return;
        };
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
        let ended = make(&format!("neardup-spill-{boot}-4000000-AbC123"), true);
        let ended_executor = make(&format!("neardup-executor-{boot}-17-z9"), true);
        let held = make(&format!("neardup-shuffle-{boot}-4000000-Xy7"), true);
        let holder = File::options()
            .read(true)
            .write(true)
            .open(lock_path(&held))
            .unwrap();
        holder.try_lock().unwrap();
        let no_lock = make(&format!("neardup-spill-{boot}-4000000-NoL0ck"), false);
        let other_boot = make("neardup-spill-0123456789ab-4000000-AbC123", true);
        let unknown_boot = make("neardup-spill-unknown-4000000-AbC123", true);
        let other_role = make(&format!("neardup-final-{boot}-4000000-AbC123"), true);
        let file = parent
            .path()
            .join(format!("neardup-spill-{boot}-4000000-f1le"));
        std::fs::write(&file, b"a user's file").unwrap();
        std::fs::write(lock_path(&file), b"").unwrap();
        remove_abandoned(parent.path(), &boot);
        for gone in [&ended, &ended_executor] {
            assert!(
                !gone.exists() && !lock_path(gone).exists(),
                "{}",
                gone.display()
            );
        }
        for kept in [
            &held,
            &no_lock,
            &other_boot,
            &unknown_boot,
            &other_role,
            &file,
        ] {
            assert!(kept.exists(), "{}", kept.display());
        }
        assert!(lock_path(&held).exists());
        drop(holder);
    }

    /// A folder a task makes again after its removal keeps its lock file, so that it is not
    /// left where no sweep would find it.
    #[test]
    fn a_folder_that_stays_keeps_its_lock_file() {
        let parent = tempfile::tempdir().unwrap();
        let folder = parent.path().join("neardup-test-x-1-AbC");
        std::fs::write(lock_path(&folder), b"").unwrap();
        // Not a folder but a file: remove_dir_all fails and it stays.
        std::fs::write(&folder, b"").unwrap();
        assert!(!remove_folder(&folder));
        assert!(lock_path(&folder).exists());
        std::fs::remove_file(&folder).unwrap();
        std::fs::create_dir(&folder).unwrap();
        assert!(remove_folder(&folder));
        assert!(!lock_path(&folder).exists());
    }

    /// A lock file without its folder goes when it is free and a minute old; one held, one
    /// younger, and one of another boot stay.
    #[test]
    fn lone_lock_files_go_once_free_and_old() {
        let Some(boot) = boot_id() else {
            crate::to_stderr!("skipped: no boot id (not Linux)");
            return;
        };
        let parent = tempfile::tempdir().unwrap();
        let lone = |name: &str, age_secs: u64| {
            let folder = parent.path().join(name);
            let file = File::create(lock_path(&folder)).unwrap();
            let modified = std::time::SystemTime::now() - std::time::Duration::from_secs(age_secs);
            file.set_modified(modified).unwrap();
            lock_path(&folder)
        };
        let ended = lone(&format!("neardup-spill-{boot}-4000000-AbC123"), 120);
        let young = lone(&format!("neardup-spill-{boot}-4000000-Yng123"), 5);
        let held = lone(&format!("neardup-shuffle-{boot}-4000000-Xy7"), 120);
        let holder = File::options().read(true).write(true).open(&held).unwrap();
        holder.try_lock().unwrap();
        let other_boot = lone("neardup-spill-0123456789ab-4000000-AbC123", 120);
        let not_ours = lone(&format!("neardup-final-{boot}-4000000-AbC123"), 120);
        remove_abandoned(parent.path(), &boot);
        assert!(!ended.exists(), "{}", ended.display());
        for kept in [&young, &held, &other_boot, &not_ours] {
            assert!(kept.exists(), "{}", kept.display());
        }
        drop(holder);
    }

    /// A folder made by `create` holds its lock: a sweep leaves it, and it goes with its lock
    /// file when dropped.
    #[test]
    fn a_live_folder_is_not_swept() {
        let folder = WorkFolder::create("test").unwrap();
        let parent = folder.path().parent().unwrap().to_path_buf();
        assert!(lock_path(folder.path()).exists());
        remove_abandoned(&parent, &boot_id().unwrap_or_default());
        assert!(folder.path().is_dir());
        let (path, lock) = (folder.path().to_path_buf(), lock_path(folder.path()));
        drop(folder);
        assert!(!path.exists() && !lock.exists());
    }
}
