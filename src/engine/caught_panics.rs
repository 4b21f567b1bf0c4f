//! Panics of the Parquet and Arrow readers on damaged files, caught and turned into errors that
//! name the file. Those crates assert what a file's bytes say (a page longer than its chunk, a
//! type code in the footer's Arrow schema that no version defines) and panic where the bytes
//! disagree; to a user that is a damaged input, not a bug. While a caught section runs, the
//! process's panic hook (`main.rs`) stays silent for a panic raised inside those crates, since
//! it is reported as an error; any other panic is neardup's own bug and the hook says so.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::FutureExt;

/// Caught sections running now, on any thread.
static CAUGHT_SECTIONS: AtomicUsize = AtomicUsize::new(0);

/// Whether a panic now is caught and reported by one of the sections below.
pub fn panics_are_caught() -> bool {
    CAUGHT_SECTIONS.load(Ordering::SeqCst) > 0
}

/// The crates that read Parquet and Arrow bytes (`bytes` is what they slice pages with), as
/// their sources' paths name them.
const READER_CRATES: [&str; 3] = ["/parquet-", "/arrow-", "/bytes-"];

/// Whether a panic raised in source file `file` is a reader's on a damaged file that a section
/// reports as an error, so that the hook should stay silent.
pub fn reported_as_error(file: &str) -> bool {
    panics_are_caught() && READER_CRATES.iter().any(|name| file.contains(name))
}

/// Where the last reader's panic inside a section was raised (`file:line`), kept by the hook for
/// the error that reports it when no damaged file explains it.
static LAST_PLACE: Mutex<Option<String>> = Mutex::new(None);

/// Called by the panic hook for a panic inside a section.
pub fn record_place(place: String) {
    if let Ok(mut last) = LAST_PLACE.lock() {
        *last = Some(place);
    }
}

/// Where the last reader's panic inside a section was raised, if the hook said; forgotten once
/// asked.
pub fn take_last_place() -> Option<String> {
    LAST_PLACE.lock().ok().and_then(|mut last| last.take())
}

/// Counts a section while it runs, however it ends.
struct Section;

impl Section {
    fn enter() -> Section {
        CAUGHT_SECTIONS.fetch_add(1, Ordering::SeqCst);
        Section
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        CAUGHT_SECTIONS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `read`; a panic inside it comes back as its message.
pub fn catch<R>(read: impl FnOnce() -> R) -> Result<R, String> {
    let _section = Section::enter();
    catch_unwind(AssertUnwindSafe(read)).map_err(message)
}

/// Awaits `read`; a panic while it runs comes back as its message.
pub async fn catch_async<R>(read: impl Future<Output = R>) -> Result<R, String> {
    let _section = Section::enter();
    AssertUnwindSafe(read).catch_unwind().await.map_err(message)
}

/// What to say of a file a reader stopped on, with what it said.
pub fn damaged_file(stopped: &str) -> String {
    format!(
        "the reader stopped on it ({stopped}): the file is damaged, or written in a way the \
         reader cannot read"
    )
}

/// The text a panic was raised with.
pub fn message(payload: Box<dyn Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_readers_panics_are_left_to_the_sections() {
        let reader = "/root/.cargo/registry/src/index.crates.io-x/bytes-1.12.2/src/bytes.rs";
        let ours = "src/job/mod.rs";
        let _section = Section::enter();
        assert!(reported_as_error(reader));
        assert!(!reported_as_error(ours));
    }

    #[test]
    fn a_panic_comes_back_as_its_message() {
        assert_eq!(catch(|| 7), Ok(7));
        let caught = catch(|| -> u8 { panic!("range end out of bounds: {} <= {}", 49, 16) });
        assert_eq!(caught, Err("range end out of bounds: 49 <= 16".to_string()));
    }

    // Whether a section has ended cannot be asserted here: the sections are counted for the
    // whole process, and other tests run at the same time.
    #[tokio::test]
    async fn a_panic_in_a_future_comes_back_as_its_message() {
        let caught = catch_async(async {
            assert!(panics_are_caught());
            if std::hint::black_box(true) {
                panic!("not implemented: Type NONE not supported");
            }
        })
        .await;
        assert_eq!(
            caught,
            Err("not implemented: Type NONE not supported".to_string())
        );
    }
}
