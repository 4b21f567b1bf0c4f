//! jieba segmentation and TF-IDF keywords. One dictionary and one IDF table serve every thread:
//! both are immutable after loading and `Send + Sync`.

use std::sync::LazyLock;

use jieba_rs::{Jieba, KeywordExtract, TfIdf};

static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);
static TFIDF: LazyLock<TfIdf> = LazyLock::new(TfIdf::default);

/// The `top_k` keywords of `text` by TF-IDF with their weights, best first (ties broken by the
/// word, so the result is deterministic).
pub fn tfidf_keywords(text: &str, top_k: usize) -> impl Iterator<Item = (String, f64)> {
    TFIDF
        .extract_keywords(&JIEBA, text, top_k, Vec::new())
        .into_iter()
        .map(|k| (k.keyword, k.weight))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_match_jieba_reference_example() {
        // The example jieba-rs documents for its TF-IDF extractor.
        let words: Vec<String> = tfidf_keywords(
            "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。后天纽约的天气不好，\
             昨天纽约的天气也不好，北京烤鸭真好吃",
            3,
        )
        .map(|(w, _)| w)
        .collect();
        assert_eq!(words, ["北京烤鸭", "纽约", "天气"]);
    }

    #[test]
    fn weights_descend() {
        let weights: Vec<f64> = tfidf_keywords("数据库系统的查询优化器选择连接顺序和索引", 10)
            .map(|(_, w)| w)
            .collect();
        assert!(!weights.is_empty());
        assert!(weights.windows(2).all(|w| w[0] >= w[1]));
    }
}
