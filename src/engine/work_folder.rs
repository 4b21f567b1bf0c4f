//! A folder for the files a job writes on its way (an executor's shuffle files, spilled sorts)
//! that goes when its owner is done with it.
//!
//! Ballista gives an executor without a work folder a temporary one that it never removes,
//! and `--cluster standalone` always ran that way: each run left the job's shuffle files (the
//! corpus's rows between stages) in the system's temporary folder; DataFusion's spill files
//! stayed behind a Ctrl-C. This folder is removed when dropped, and by the interrupt handler
//! on Ctrl-C or SIGTERM (which end the process without dropping anything). A process killed
//! outright (`kill -9`, the kernel's out-of-memory killer) removes nothing, so each folder is
//! named after its process, and the next one made removes those whose process is gone. The
//! name also carries the process's PID namespace: a TMPDIR shared with a container numbers its
//! processes apart, and a folder of another namespace is never taken for a dead one's.

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
    /// A new empty folder in the system's temporary folder (`TMPDIR`), named after `role` and
    /// this process (`neardup-<role>-<pid>-<pid namespace>-<random>`). First removes the
    /// folders there of processes that no longer exist.
    pub fn create(role: &str) -> Result<Self> {
        let namespace = pid_namespace();
        if let Some(namespace) = namespace {
            remove_abandoned(&std::env::temp_dir(), namespace);
        }
        let path = tempfile::Builder::new()
            .prefix(&format!(
                "neardup-{role}-{}-{}-",
                std::process::id(),
                namespace.unwrap_or(0)
            ))
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

/// The roles `create` is given, the only folders `remove_abandoned` considers.
const ROLES: [&str; 4] = ["spill", "shuffle", "executor", "test"];

/// This process's PID namespace (the inode /proc/self/ns/pid names), or `None` where there is
/// no /proc (not Linux): there nothing is removed.
fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let link = link.to_str()?;
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Removes the work folders in `parent` made in PID namespace `namespace` by processes that no
/// longer exist. A folder of a live process, of another namespace, or of another user (which
/// cannot be removed) is left alone.
fn remove_abandoned(parent: &Path, namespace: u64) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let Some((pid, made_in)) = owner(&entry.file_name().to_string_lossy()) else {
            continue;
        };
        let is_folder = entry.file_type().is_ok_and(|t| t.is_dir());
        let gone = !Path::new("/proc").join(pid.to_string()).exists();
        if is_folder && made_in == namespace && gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The process and PID namespace a work folder's name says made it:
/// `neardup-<role>-<pid>-<namespace>-<random>`.
fn owner(name: &str) -> Option<(u32, u64)> {
    let (role, rest) = name.strip_prefix("neardup-")?.split_once('-')?;
    let (pid, rest) = rest.split_once('-')?;
    let (namespace, random) = rest.split_once('-')?;
    if !ROLES.contains(&role) || random.is_empty() {
        return None;
    }
    Some((pid.parse().ok()?, namespace.parse().ok()?))
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

    /// Only folders named as `create` names them, in this PID namespace, of a process that
    /// is gone, are removed: no process has a number above the kernel's limit of 2^22.
    #[test]
    fn folders_of_processes_that_are_gone_are_removed() {
        let Some(ns) = pid_namespace() else {
            eprintln!("skipped: no /proc/self/ns/pid (not Linux)");
            return;
        };
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let path = parent.path().join(name);
            std::fs::create_dir_all(path.join("datafusion-x")).unwrap();
            std::fs::write(path.join("datafusion-x/spill.arrow"), b"rows").unwrap();
            path
        };
        let gone = make(&format!("neardup-spill-4000000000-{ns}-AbC123"));
        let gone_executor = make(&format!("neardup-executor-4000000001-{ns}-z9"));
        let live = make(&format!("neardup-spill-{}-{ns}-Xy7", std::process::id()));
        let other_namespace = make(&format!("neardup-spill-4000000000-{}-AbC", ns + 1));
        let other_role = make(&format!("neardup-final-4000000000-{ns}-AbC123"));
        let no_namespace = make("neardup-spill-4000000000-AbC123");
        let no_random = make(&format!("neardup-spill-4000000000-{ns}-"));
        let file = parent
            .path()
            .join(format!("neardup-shuffle-4000000000-{ns}-f1le"));
        std::fs::write(&file, b"a user's file").unwrap();
        remove_abandoned(parent.path(), ns);
        assert!(!gone.exists() && !gone_executor.exists());
        for kept in [
            &live,
            &other_namespace,
            &other_role,
            &no_namespace,
            &no_random,
            &file,
        ] {
            assert!(kept.exists(), "{}", kept.display());
        }
    }

    #[test]
    fn the_owner_is_read_from_the_name() {
        assert_eq!(
            owner("neardup-shuffle-17-4026531836-q1"),
            Some((17, 4026531836))
        );
        assert_eq!(owner("neardup-shuffle-x17-4026531836-q1"), None);
        assert_eq!(owner("neardup-shuffle-17-q1"), None);
        assert_eq!(owner("neardup-base"), None);
    }
}
