//! Content digests of the files a run's features read (`idf=`, `stop_words=`): the path alone
//! does not say whether a file was edited between two batches of an index.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};
use crate::text::FeatureOptions;

/// Each file the features read, by the path as given, with the XXH3-128 digest of its bytes
/// (`xxh3-128:<32 hex digits>`). Empty when the features read no file.
pub fn feature_files(features: &FeatureOptions) -> Result<BTreeMap<String, String>> {
    let mut digests = BTreeMap::new();
    for path in [&features.idf, &features.stop_words].into_iter().flatten() {
        digests.insert(path.display().to_string(), file_digest(path)?);
    }
    Ok(digests)
}

/// The digest of a file's bytes, read in blocks.
pub fn file_digest(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut block = vec![0u8; 1 << 16];
    loop {
        let read = file.read(&mut block).map_err(|e| Error::io(path, e))?;
        if read == 0 {
            break;
        }
        hasher.update(&block[..read]);
    }
    Ok(format!("xxh3-128:{:032x}", hasher.digest128()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_follow_the_content_not_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("idf.txt");
        std::fs::write(&a, "新闻 8.0\n").unwrap();
        let first = file_digest(&a).unwrap();
        assert_eq!(first, file_digest(&a).unwrap());
        assert!(
            first.starts_with("xxh3-128:") && first.len() == 9 + 32,
            "{first}"
        );
        std::fs::write(&a, "新闻 9.0\n").unwrap();
        assert_ne!(first, file_digest(&a).unwrap());
        let options = FeatureOptions::parse(&format!("idf={}", a.display())).unwrap();
        let files = feature_files(&options).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[&a.display().to_string()], file_digest(&a).unwrap());
        assert!(
            feature_files(&FeatureOptions::default())
                .unwrap()
                .is_empty()
        );
        let missing = FeatureOptions::parse("stop_words=/no/such/file").unwrap();
        assert!(
            feature_files(&missing)
                .unwrap_err()
                .to_string()
                .contains("/no/such/file")
        );
    }
}
