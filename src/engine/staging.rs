//! Outputs appear whole or not at all: the job writes into a staging folder beside the target,
//! marks it complete, and renames it into place. An existing target is replaced only when asked,
//! and only if it is a neardup output (never someone's home folder).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Staging folders and partial files of this process, for the interrupt handler to remove (a
/// Ctrl-C ends the process without unwinding, so `Drop` does not run).
static LIVE_STAGING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Set by the interrupt handler before it cleans up: a job that fails meanwhile (a cluster job
/// it cancelled, say) is the interrupt's doing, and `main` leaves the exit to the handler.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records that Ctrl-C or SIGTERM arrived.
pub fn mark_interrupted() {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether Ctrl-C or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Where the commits of a Delta output stand, for the interrupt handler. Those commits are
/// one per table: ending the process between two would leave tables of two runs side by
/// side, so while they run an interrupt is left to them (they stop before the next table and
/// put back those already committed) instead of ending the process at once.
struct Commits {
    running: bool,
    /// The handler left the interrupt to the commits.
    deferred: bool,
}

static COMMITS: Mutex<Commits> = Mutex::new(Commits {
    running: false,
    deferred: false,
});

/// While alive, an interrupt is left to the commits ([`defer_interrupt_to_commits`]).
pub struct CommitsRunning(());

impl Drop for CommitsRunning {
    fn drop(&mut self) {
        if let Ok(mut commits) = COMMITS.lock() {
            commits.running = false;
        }
    }
}

/// Marks the start of a Delta output's commits. Refused once Ctrl-C has arrived: the handler
/// marks the interrupt before it looks at the commits, so under this lock either it sees them
/// running, or they see the interrupt and never start (the handler exits in a moment).
pub fn begin_commits() -> Result<CommitsRunning> {
    let mut commits = COMMITS.lock().unwrap_or_else(|e| e.into_inner());
    if interrupted() {
        return Err(Error::Input("interrupted before the commits".into()));
    }
    commits.running = true;
    Ok(CommitsRunning(()))
}

/// For the interrupt handler, after [`mark_interrupted`]: true when commits are running, which
/// then stop at the next table (they check [`interrupted`]) and the job ends with exit code
/// 130; false when the handler ends the process itself.
pub fn defer_interrupt_to_commits() -> bool {
    let mut commits = COMMITS.lock().unwrap_or_else(|e| e.into_inner());
    commits.deferred = commits.running;
    commits.running
}

/// Whether the handler left an interrupt to the commits (so `main` ends the process).
pub fn interrupt_deferred() -> bool {
    COMMITS.lock().is_ok_and(|commits| commits.deferred)
}

/// Removes every staging folder and partial file this process still has; called on Ctrl-C or
/// SIGTERM. Says whether there was any (a scheduler or an executor has none).
pub fn remove_live_staging() -> bool {
    let places = live_places();
    remove_places(&places);
    !places.is_empty()
}

/// As [`remove_live_staging`], and the same places again after `pause`: on a cluster run the
/// executors' tasks may write into the staging folder until they have stopped (the job's
/// error path may have forgotten the places by then).
pub fn remove_live_staging_twice(pause: std::time::Duration) -> bool {
    let places = live_places();
    remove_places(&places);
    std::thread::sleep(pause);
    remove_places(&places);
    !places.is_empty()
}

/// The staging folders and partial files this process has now.
pub fn live_places() -> Vec<PathBuf> {
    LIVE_STAGING.lock().map(|l| l.clone()).unwrap_or_default()
}

/// Removes `places` (folders or files) if they exist.
pub fn remove_places(places: &[PathBuf]) {
    for place in places {
        if place.is_dir() {
            let _ = std::fs::remove_dir_all(place);
        } else {
            let _ = std::fs::remove_file(place);
        }
    }
}

/// Records a staging folder or partial file for `remove_live_staging`.
pub(crate) fn register_live(place: &Path) {
    if let Ok(mut live) = LIVE_STAGING.lock() {
        live.push(place.to_path_buf());
    }
}

/// Forgets a place once it is committed or removed. Not once interrupted: the handler may
/// read the places after the job has failed and removed its staging folder, and a cluster's
/// tasks that have not yet stopped can create it again, so the handler removes it once more.
pub(crate) fn forget_live(place: &Path) {
    if interrupted() {
        return;
    }
    if let Ok(mut live) = LIVE_STAGING.lock() {
        live.retain(|p| p != place);
    }
}

fn staging_prefix(name: &str) -> String {
    format!(".{name}.neardup-staging-")
}

/// The file whose presence says a folder holds a complete neardup output.
pub const COMPLETE_MARKER: &str = "_SUCCESS";
pub const SUMMARY_FILE: &str = "summary.json";
/// The page `neardup report` writes beside an output's summary.json.
pub const REPORT_FILE: &str = "report.html";

/// The tables an output may hold, as `neardup query --data` registers them.
pub const OUTPUT_TABLES: [&str; 4] = ["signatures", "pairs", "groups", "dedup"];

/// Everything a neardup output (or index batch) folder may hold that neardup wrote: the only
/// names `--overwrite` ever replaces. Anything else in the folder is the user's and is kept.
pub const OWNED_ENTRIES: [&str; 7] = [
    "signatures",
    "pairs",
    "groups",
    "dedup",
    SUMMARY_FILE,
    COMPLETE_MARKER,
    REPORT_FILE,
];

/// How an existing output folder may be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// Never: an existing folder is refused.
    #[default]
    No,
    /// A neardup output holding only what neardup wrote.
    Owned,
    /// A neardup output that also holds other files: neardup's entries are replaced and the
    /// other files are carried into the new output.
    KeepingOthers,
}

impl Overwrite {
    /// From the `--overwrite` and `--keep-other-files` flags.
    pub fn from_flags(overwrite: bool, keep_others: bool) -> Self {
        match (overwrite, keep_others) {
            (false, _) => Overwrite::No,
            (true, false) => Overwrite::Owned,
            (true, true) => Overwrite::KeepingOthers,
        }
    }
}

/// A folder being written that becomes `target` on `commit`, and is removed if dropped before.
#[derive(Debug)]
pub struct StagingDir {
    target: PathBuf,
    staging: PathBuf,
    overwrite: Overwrite,
    committed: bool,
}

impl StagingDir {
    /// Checks `target` can be written (absent, or `overwrite` and a neardup output) and creates
    /// the staging folder `.<name>.neardup-staging-<pid>` beside it.
    pub fn create(target: &Path, overwrite: Overwrite) -> Result<Self> {
        let target = std::path::absolute(target).map_err(|e| Error::io(target, e))?;
        let name = target
            .file_name()
            .ok_or_else(|| Error::Usage(format!("--output {} names no folder", target.display())))?
            .to_string_lossy()
            .into_owned();
        if has_glob_characters(&target) {
            return Err(Error::Usage(format!(
                "--output {} holds '*', '?' or '[', which DataFusion would read as a pattern; \
                 choose another name",
                target.display()
            )));
        }
        refuse_symlink(&target, "--output")?;
        let parent = target.parent().unwrap_or(Path::new("/")).to_path_buf();
        // First what killed runs left, which may put an old output back in place.
        remove_abandoned_staging(&parent, &name);
        if target.exists() {
            if !target.is_dir() {
                return Err(Error::Usage(format!(
                    "--output {} is a file, not a folder",
                    target.display()
                )));
            }
            if overwrite == Overwrite::No {
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
            if is_output_dir(&target) && !summary_written_by_neardup(&target) {
                return Err(Error::Usage(format!(
                    "refusing to replace {}: its {SUMMARY_FILE} was not written by neardup (it \
                     has no neardup_version and parameters), so the folder may be another \
                     tool's output; choose another --output",
                    target.display()
                )));
            }
            let others = other_entries(&target)?;
            if !others.is_empty() && overwrite != Overwrite::KeepingOthers {
                return Err(Error::Usage(format!(
                    "refusing to replace {}: besides neardup's tables it holds {}, which neardup \
                     did not write; move them out, choose another --output, or pass \
                     --keep-other-files to replace only neardup's tables, {SUMMARY_FILE} and \
                     {COMPLETE_MARKER} and keep the rest",
                    target.display(),
                    list_names(&others)
                )));
            }
        }
        std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
        let staging = parent.join(format!("{}{}", staging_prefix(&name), std::process::id()));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        }
        std::fs::create_dir(&staging).map_err(|e| {
            // The staging folder's name means nothing to the user: name the folder it goes in.
            Error::Input(format!(
                "cannot write --output {}: its folder {} takes no new folder ({e}); the run \
                 writes beside the output first and renames it into place",
                target.display(),
                parent.display()
            ))
        })?;
        register_live(&staging);
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
    /// aside first; once the new one is in place, whatever the old folder held that neardup did
    /// not write moves into the new one, and only neardup's own entries are removed.
    pub fn commit(mut self) -> Result<PathBuf> {
        let marker = self.staging.join(COMPLETE_MARKER);
        std::fs::write(&marker, b"").map_err(|e| Error::io(&marker, e))?;
        let mut old = None;
        if self.overwrite != Overwrite::No && self.target.exists() {
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
            retire_old_output(&old, &self.target)?;
        }
        Ok(self.target.clone())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: a failed run must not leave a half-written folder behind. A writer
            // of the failed stage may still be closing a file in it, which makes a removal
            // fail ("directory not empty"), or finish just after one, putting the folder back
            // (the local object store creates a file's missing folders): so the folder is
            // removed until it is still gone a moment later.
            for attempt in 0..6 {
                let _ = std::fs::remove_dir_all(&self.staging);
                std::thread::sleep(std::time::Duration::from_millis(20 << attempt.min(3)));
                if !self.staging.exists() {
                    break;
                }
            }
        }
        forget_live(&self.staging);
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
            } else if is_old_output {
                // Killed after the new output was in place: the user's files still go there.
                if let Err(e) = retire_old_output(&entry.path(), &target) {
                    crate::to_stderr!("neardup: warning: {e}");
                }
            } else {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Empties a replaced output moved aside to `old`: entries neardup did not write move into the
/// new output at `target`, neardup's own are removed, and `old` goes only once it is empty. A
/// user's file is never deleted: one that cannot be moved stays in `old`, and the error says so.
fn retire_old_output(old: &Path, target: &Path) -> Result<()> {
    for name in other_entries(old)? {
        let from = old.join(&name);
        let to = target.join(&name);
        let moved = if to.exists() {
            Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists", to.display()),
            ))
        } else {
            std::fs::rename(&from, &to)
        };
        moved.map_err(|e| {
            Error::Input(format!(
                "the new output is in {}, but {} could not be moved into it ({e}); it is kept \
                 in {}",
                target.display(),
                from.display(),
                old.display()
            ))
        })?;
    }
    for name in OWNED_ENTRIES {
        let path = old.join(name);
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else if path.exists() {
            std::fs::remove_file(&path)
        } else {
            Ok(())
        };
        removed.map_err(|e| Error::io(&path, e))?;
    }
    std::fs::remove_dir(old).map_err(|e| Error::io(old, e))
}

/// Refuses a symbolic link where neardup writes (`role` names the flag): its output takes
/// the place of what is there in one rename, which would replace the link itself and leave
/// what it points to behind (or, for a folder, empty it through the link).
pub fn refuse_symlink(target: &Path, role: &str) -> Result<()> {
    // Without a trailing '/': `link/` names what the link points to, and is looked up through it.
    let target: PathBuf = target.components().collect();
    let is_link = std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return Ok(());
    }
    let points_to = std::fs::read_link(&target)
        .map(|to| to.display().to_string())
        .unwrap_or_else(|_| "?".to_string());
    let name_instead = match target.canonicalize() {
        Ok(real) if real.is_file() || real.is_dir() => {
            format!("give the path it points to instead ({})", real.display())
        }
        Ok(_) if role == "--out" => {
            "it points to a device, a pipe or a socket; leave out --out to write the result to \
             standard output"
                .to_string()
        }
        Ok(_) => "it points to a device, a pipe or a socket; choose a file".to_string(),
        Err(_) => "it points to nothing; remove the link or choose another path".to_string(),
    };
    Err(Error::Usage(format!(
        "{role} {} is a symbolic link to {points_to}: neardup writes its output beside it and \
         renames it into place, which would replace the link; {name_instead}",
        target.display()
    )))
}

/// Names in `dir` that neardup did not write, sorted.
fn other_entries(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let name = entry.map_err(|e| Error::io(dir, e))?.file_name();
        let name = name.to_string_lossy().into_owned();
        if !OWNED_ENTRIES.contains(&name.as_str()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Up to five names, then how many more.
fn list_names(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
    match names.len() {
        n if n > 5 => format!("{} and {} more", shown.join(", "), n - 5),
        _ => shown.join(", "),
    }
}

/// Refuses a path the job reads or keeps (`role`: "--input", "--index") that lies inside the
/// output folder, or an output inside an input folder: replacing the output would delete it,
/// and a later run over the folder would read neardup's tables as documents.
pub fn refuse_overlap(output: &Path, role: &str, path: &Path) -> Result<()> {
    let out = resolved(output);
    let other = resolved(path);
    if other.starts_with(&out) {
        return Err(Error::Usage(format!(
            "{role} {} is inside --output {}: writing the output would replace it; choose an \
             output folder elsewhere",
            path.display(),
            output.display()
        )));
    }
    if out.starts_with(&other) && (role != "--input" || path.is_dir()) {
        let why = if role == "--input" {
            "a later run over that folder would read neardup's tables as documents"
        } else {
            "the output would be written among the index's batches"
        };
        return Err(Error::Usage(format!(
            "--output {} is inside {role} {}: {why}; choose an output folder elsewhere",
            output.display(),
            path.display()
        )));
    }
    Ok(())
}

/// Whether `path` is `folder` or inside it, with symbolic links resolved as far as they exist.
pub fn is_inside(path: &Path, folder: &Path) -> bool {
    resolved(path).starts_with(resolved(folder))
}

/// `path` with symbolic links resolved as far as it exists (the rest appended), so two
/// spellings of one folder compare equal.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// True when `dir` holds a complete neardup output.
pub fn is_output_dir(dir: &Path) -> bool {
    dir.join(COMPLETE_MARKER).is_file() && dir.join(SUMMARY_FILE).is_file()
}

/// A summary.json larger than this is not one neardup wrote (its own are a few KB).
const LARGEST_SUMMARY: u64 = 16 << 20;

/// True when `dir`'s summary.json is neardup's: a JSON object with the version that wrote it
/// and the run's parameters. Other tools also mark finished folders with `_SUCCESS` (Spark,
/// Hadoop) and may write a summary.json of their own; `--overwrite` must not take those.
fn summary_written_by_neardup(dir: &Path) -> bool {
    let path = dir.join(SUMMARY_FILE);
    let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= LARGEST_SUMMARY);
    let Some(bytes) = small.then(|| std::fs::read(&path).ok()).flatten() else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&bytes).is_ok_and(|summary| {
        summary
            .get("neardup_version")
            .is_some_and(|v| v.is_string())
            && summary.get("parameters").is_some_and(|p| p.is_object())
    })
}

fn is_empty_dir(dir: &Path) -> Result<bool> {
    let mut entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok(entries.next().is_none())
}

/// True when DataFusion would take `path` for a glob pattern.
pub fn has_glob_characters(path: &Path) -> bool {
    path.to_string_lossy().contains(['*', '?', '['])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary.json as neardup writes it, as far as `--overwrite` looks.
    fn summary(run: &str) -> String {
        format!("{{\"neardup_version\": \"{run}\", \"parameters\": {{}}}}")
    }

    #[test]
    fn commit_moves_into_place_and_drop_cleans_up() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("out");
        let staging = StagingDir::create(&target, Overwrite::No).unwrap();
        std::fs::write(staging.path().join(SUMMARY_FILE), summary("test")).unwrap();
        let staged = staging.path().to_path_buf();
        staging.commit().unwrap();
        assert!(is_output_dir(&target));
        assert!(!staged.exists());

        // Existing output: refused without overwrite.
        let err = StagingDir::create(&target, Overwrite::No).unwrap_err();
        assert!(err.to_string().contains("--overwrite"), "{err}");

        // Dropped without commit: nothing left beside the target, old output untouched.
        let staging = StagingDir::create(&target, Overwrite::Owned).unwrap();
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
        let staging = StagingDir::create(&root.path().join("out"), Overwrite::No).unwrap();
        assert!(!dead.exists());
        assert!(other.exists());
        assert!(staging.path().exists());
    }

    #[test]
    fn never_replaces_a_folder_that_is_not_an_output() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("precious.txt"), "keep me").unwrap();
        let err = StagingDir::create(root.path(), Overwrite::Owned).unwrap_err();
        assert!(err.to_string().contains("not a neardup output"), "{err}");
        assert!(root.path().join("precious.txt").exists());
    }

    /// Another tool's finished folder (Spark and Hadoop mark theirs with `_SUCCESS`) with a
    /// summary.json of its own is not taken for an output, with or without --keep-other-files.
    #[test]
    fn never_replaces_another_tools_folder_with_a_summary_of_its_own() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("theirs");
        std::fs::create_dir_all(target.join("groups")).unwrap();
        std::fs::write(target.join(COMPLETE_MARKER), "").unwrap();
        for own in ["{\"my\": \"own\"}", "{}", "not json", "[1, 2]"] {
            std::fs::write(target.join(SUMMARY_FILE), own).unwrap();
            std::fs::write(target.join("groups/members.csv"), "data").unwrap();
            for overwrite in [Overwrite::Owned, Overwrite::KeepingOthers] {
                let err = StagingDir::create(&target, overwrite).unwrap_err();
                assert!(err.to_string().contains("not written by neardup"), "{err}");
                assert_eq!(err.exit_code(), 2);
            }
            assert_eq!(
                std::fs::read_to_string(target.join(SUMMARY_FILE)).unwrap(),
                own
            );
            assert!(target.join("groups/members.csv").is_file());
        }
        // Nothing was staged beside it.
        let beside: Vec<_> = std::fs::read_dir(root.path()).unwrap().flatten().collect();
        assert_eq!(beside.len(), 1, "{beside:?}");
    }

    /// A committed output with one table and the user's `NOTES.txt` and `analysis/` beside it.
    fn output_with_user_files(root: &Path) -> PathBuf {
        let target = root.join("out");
        let staging = StagingDir::create(&target, Overwrite::No).unwrap();
        std::fs::write(staging.path().join(SUMMARY_FILE), summary("old")).unwrap();
        std::fs::create_dir(staging.path().join("groups")).unwrap();
        std::fs::write(staging.path().join("groups/part-0.parquet"), "old").unwrap();
        staging.commit().unwrap();
        std::fs::write(target.join("NOTES.txt"), "mine").unwrap();
        std::fs::create_dir(target.join("analysis")).unwrap();
        std::fs::write(target.join("analysis/plot.txt"), "mine too").unwrap();
        target
    }

    #[test]
    fn overwrite_refuses_an_output_holding_other_files() {
        let root = tempfile::tempdir().unwrap();
        let target = output_with_user_files(root.path());
        let err = StagingDir::create(&target, Overwrite::Owned).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("NOTES.txt"), "{message}");
        assert!(message.contains("analysis"), "{message}");
        assert!(message.contains("--keep-other-files"), "{message}");
        assert_eq!(err.exit_code(), 2);
        assert_eq!(
            std::fs::read_to_string(target.join("NOTES.txt")).unwrap(),
            "mine"
        );
        assert!(target.join("groups/part-0.parquet").exists());
    }

    #[test]
    fn keeping_other_files_replaces_only_what_neardup_wrote() {
        let root = tempfile::tempdir().unwrap();
        let target = output_with_user_files(root.path());
        let staging = StagingDir::create(&target, Overwrite::KeepingOthers).unwrap();
        std::fs::write(staging.path().join(SUMMARY_FILE), summary("new")).unwrap();
        std::fs::create_dir(staging.path().join("pairs")).unwrap();
        staging.commit().unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("NOTES.txt")).unwrap(),
            "mine"
        );
        assert_eq!(
            std::fs::read_to_string(target.join("analysis/plot.txt")).unwrap(),
            "mine too"
        );
        let summary = std::fs::read_to_string(target.join(SUMMARY_FILE)).unwrap();
        assert!(summary.contains("new"), "{summary}");
        // The old table is gone (the new run wrote none of that name), the new one is there.
        assert!(!target.join("groups").exists());
        assert!(target.join("pairs").is_dir());
        assert!(is_output_dir(&target));
        // Nothing is left beside the output.
        let beside: Vec<_> = std::fs::read_dir(root.path()).unwrap().flatten().collect();
        assert_eq!(beside.len(), 1, "{beside:?}");
    }

    #[test]
    fn a_commit_killed_after_the_swap_still_keeps_the_users_files() {
        let root = tempfile::tempdir().unwrap();
        let target = output_with_user_files(root.path());
        // What `kill -9` between the two renames and the clean-up leaves: the old output aside
        // (named for a process that no longer runs), the new one in place.
        let aside = root.path().join(".out.neardup-staging-4000000000.old");
        std::fs::rename(&target, &aside).unwrap();
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join(SUMMARY_FILE), summary("new")).unwrap();
        std::fs::write(target.join(COMPLETE_MARKER), "").unwrap();
        let next = StagingDir::create(&root.path().join("out"), Overwrite::Owned);
        assert!(!aside.exists());
        assert_eq!(
            std::fs::read_to_string(target.join("NOTES.txt")).unwrap(),
            "mine"
        );
        assert!(target.join("analysis/plot.txt").exists());
        // The next run is refused: the output now holds the user's files.
        assert!(next.is_err());
    }

    #[test]
    fn inputs_and_indexes_inside_the_output_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("out");
        std::fs::create_dir_all(out.join("index")).unwrap();
        let err = refuse_overlap(&out, "--index", &out.join("index")).unwrap_err();
        assert!(err.to_string().contains("inside --output"), "{err}");
        let err = refuse_overlap(&out, "--input", &out.join("dedup/part-0.parquet")).unwrap_err();
        assert!(err.to_string().contains("--input"), "{err}");
        // An output inside an input folder, or inside the index.
        let err =
            refuse_overlap(&root.path().join("data/out"), "--input", root.path()).unwrap_err();
        assert!(err.to_string().contains("inside --input"), "{err}");
        let err =
            refuse_overlap(&out.join("index/out"), "--index", &out.join("index")).unwrap_err();
        assert!(err.to_string().contains("inside --index"), "{err}");
        // Side by side is fine, and so is an output beside the input file it reads.
        refuse_overlap(&root.path().join("out2"), "--input", &out).unwrap();
        std::fs::write(root.path().join("corpus.parquet"), "x").unwrap();
        refuse_overlap(
            &root.path().join("out3"),
            "--input",
            &root.path().join("corpus.parquet"),
        )
        .unwrap();
    }
}
