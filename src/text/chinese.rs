//! jieba segmentation and TF-IDF keywords. The dictionary and the default IDF table load once
//! and serve every thread (both are immutable and `Send + Sync`); a user's IDF or stop-word file
//! gives its own table, loaded once per option string.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use jieba_rs::{Jieba, KeywordExtract, KeywordExtractConfig, TfIdf};

use super::options::OptionError;

static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);
static DEFAULT_TFIDF: LazyLock<TfIdf> = LazyLock::new(TfIdf::default);

/// A TF-IDF table with its stop words: jieba's own, parsed on first use (about 0.1 s, which
/// every run would otherwise spend before its first document, whatever its feature mode), or
/// one built from a user's files.
#[derive(Clone)]
pub enum Keywords {
    Default,
    Own(Arc<TfIdf>),
}

impl std::fmt::Debug for Keywords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keywords")
    }
}

impl Keywords {
    /// jieba's own IDF table and stop words.
    pub fn default_table() -> Self {
        Self::Default
    }

    /// jieba's IDF table, or the one in `idf`; jieba's stop words, or `stop_words`.
    pub fn load(
        idf: Option<&Path>,
        stop_words: Option<&BTreeSet<String>>,
    ) -> Result<Self, OptionError> {
        if idf.is_none() && stop_words.is_none() {
            return Ok(Self::default_table());
        }
        let mut config = KeywordExtractConfig::builder();
        if let Some(stop_words) = stop_words {
            config = config.set_stop_words(stop_words.clone());
        }
        let config = config.build();
        let tfidf = match idf {
            None => {
                let mut tfidf = TfIdf::default();
                *tfidf.config_mut() = config;
                tfidf
            }
            Some(path) => {
                let table = std::fs::read_to_string(path).map_err(|e| {
                    OptionError(format!(
                        "idf={}: cannot read the IDF file: {e}",
                        path.display()
                    ))
                })?;
                check_idf_table(&table, path)?;
                let mut tfidf = TfIdf::new(None::<&mut std::io::Empty>, config);
                tfidf.load_dict(&mut table.as_bytes()).map_err(|e| {
                    OptionError(format!(
                        "idf={}: cannot load the IDF file: {e}",
                        path.display()
                    ))
                })?;
                tfidf
            }
        };
        Ok(Self::Own(Arc::new(tfidf)))
    }

    /// The `top_k` keywords of `text` by TF-IDF with their weights, best first (ties broken by
    /// the word, so the result is deterministic). `usize::MAX` keeps every word.
    pub fn extract(&self, text: &str, top_k: usize) -> impl Iterator<Item = (String, f64)> {
        let table: &TfIdf = match self {
            Self::Default => &DEFAULT_TFIDF,
            Self::Own(table) => table,
        };
        table
            .extract_keywords(&JIEBA, text, top_k, Vec::new())
            .into_iter()
            .map(|k| (k.keyword, k.weight))
    }
}

/// An IDF file must have at least one `word number` line (jieba takes the median of them for
/// unknown words, and has none to take from an empty table); lines that are not are named.
fn check_idf_table(table: &str, path: &Path) -> Result<(), OptionError> {
    let mut entries = 0usize;
    for (index, line) in table.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next().map(str::parse::<f64>)) {
            (Some(_), Some(Ok(idf))) if idf.is_finite() => entries += 1,
            _ => {
                // The line itself is not echoed: an option string may name any readable file.
                return Err(OptionError(format!(
                    "idf={}: line {} is not `word idf` (a word, whitespace, a number)",
                    path.display(),
                    index + 1
                )));
            }
        }
    }
    if entries == 0 {
        return Err(OptionError(format!(
            "idf={}: the IDF file has no `word idf` lines",
            path.display()
        )));
    }
    Ok(())
}

/// Stop words from a file, one per line (blank lines ignored).
pub fn load_stop_words(path: &Path) -> Result<BTreeSet<String>, OptionError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        OptionError(format!(
            "stop_words={}: cannot read the stop-word file: {e}",
            path.display()
        ))
    })?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_keywords() -> Keywords {
        Keywords::load(None, None).unwrap()
    }

    #[test]
    fn keywords_match_jieba_reference_example() {
        // The example jieba-rs documents for its TF-IDF extractor.
        let words: Vec<String> = default_keywords()
            .extract(
                "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。后天纽约的天气不好，\
                 昨天纽约的天气也不好，北京烤鸭真好吃",
                3,
            )
            .map(|(w, _)| w)
            .collect();
        assert_eq!(words, ["北京烤鸭", "纽约", "天气"]);
    }

    #[test]
    fn weights_descend_and_all_words_without_a_cut() {
        let text = "数据库系统的查询优化器选择连接顺序和索引";
        let weights: Vec<f64> = default_keywords()
            .extract(text, 10)
            .map(|(_, w)| w)
            .collect();
        assert!(!weights.is_empty());
        assert!(weights.windows(2).all(|w| w[0] >= w[1]));
        let all = default_keywords().extract(text, usize::MAX).count();
        let three = default_keywords().extract(text, 3).count();
        assert!(all > three && three == 3, "{all} {three}");
    }

    #[test]
    fn user_idf_and_stop_words_change_the_keywords() {
        let dir = tempfile::tempdir().unwrap();
        let idf = dir.path().join("idf.txt");
        std::fs::write(&idf, "光化学 99.0\n生化学 1.0\n").unwrap();
        let stop = dir.path().join("stop.txt");
        std::fs::write(&stop, "不是\n\n").unwrap();
        let stop_words = load_stop_words(&stop).unwrap();
        let keywords = Keywords::load(Some(&idf), Some(&stop_words)).unwrap();
        let words: Vec<String> = keywords
            .extract("生化学不是光化学的", 3)
            .map(|(w, _)| w)
            .collect();
        assert_eq!(words, ["光化学", "生化学"]);
    }

    #[test]
    fn bad_idf_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "\n").unwrap();
        let e = Keywords::load(Some(&empty), None).unwrap_err().0;
        assert!(
            e.contains("empty.txt") && e.contains("no `word idf`"),
            "{e}"
        );
        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "词 1.5\n词二 many\n").unwrap();
        let e = Keywords::load(Some(&bad), None).unwrap_err().0;
        assert!(e.contains("line 2"), "{e}");
        let e = Keywords::load(Some(&dir.path().join("missing.txt")), None)
            .unwrap_err()
            .0;
        assert!(
            e.contains("missing.txt") && e.contains("cannot read"),
            "{e}"
        );
    }
}
