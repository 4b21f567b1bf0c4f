//! Text to weighted features: what a document "says", independent of how it is hashed.
//!
//! The default reproduces the original method: Chinese text is segmented with jieba and its
//! top-50 TF-IDF keywords (jieba's IDF table and stop words) are the features; text with no Han
//! characters falls back to lower-cased Unicode words weighted by term frequency, so English
//! documents fingerprint too. Further modes (cleaning, shingles, options) belong here.

mod chinese;
mod words;

use crate::fingerprint::{SimHasher, feature_hash};

/// Number of TF-IDF keywords kept per Chinese document, as in the original system.
pub const DEFAULT_TOP_K: usize = 50;

/// True for characters of the CJK Unified Ideographs blocks (Han script).
pub fn is_han(c: char) -> bool {
    matches!(c,
        '\u{4E00}'..='\u{9FFF}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2A6DF}'
        | '\u{2A700}'..='\u{2EBEF}'
        | '\u{30000}'..='\u{3134F}')
}

/// Feeds the features of `text` into `hasher` (which the caller has reset).
pub fn add_features(text: &str, hasher: &mut SimHasher) {
    if text.chars().any(is_han) {
        for (keyword, weight) in chinese::tfidf_keywords(text, DEFAULT_TOP_K) {
            hasher.add(feature_hash(&keyword), weight);
        }
    } else {
        words::for_each_word(text, |word| hasher.add(feature_hash(word), 1.0));
    }
}

/// The SimHash of one document with the default features; `None` when it has no features
/// (empty, whitespace, punctuation only).
pub fn simhash(text: &str) -> Option<u64> {
    let mut hasher = SimHasher::default();
    add_features(text, &mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::hamming;

    #[test]
    fn han_detection() {
        assert!(is_han('中'));
        assert!(is_han('體'));
        assert!(!is_han('a'));
        assert!(!is_han('。'));
        assert!(!is_han('カ'));
    }

    #[test]
    fn nothing_to_fingerprint() {
        assert_eq!(simhash(""), None);
        assert_eq!(simhash("   \n\t "), None);
        assert_eq!(simhash("!!! ... ???"), None);
    }

    #[test]
    fn english_features_are_the_words_by_hand() {
        // "is", "for" are stop words and "a" is one letter: six words remain, weight 1 each.
        let mut by_hand = SimHasher::default();
        for word in ["debian", "free", "operating", "system", "your", "computer"] {
            by_hand.add(feature_hash(word), 1.0);
        }
        assert_eq!(
            simhash("Debian is a free operating system for your computer"),
            by_hand.finish()
        );
    }

    #[test]
    fn chinese_features_are_the_tfidf_keywords_by_hand() {
        let text = "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。";
        let mut by_hand = SimHasher::default();
        let keywords: Vec<(String, f64)> = chinese::tfidf_keywords(text, 50).collect();
        assert!(keywords.iter().any(|(k, _)| k == "北京烤鸭"));
        for (keyword, weight) in &keywords {
            by_hand.add(feature_hash(keyword), *weight);
        }
        assert_eq!(simhash(text), by_hand.finish());
    }

    #[test]
    fn english_is_case_and_spacing_insensitive() {
        let a = simhash("The quick brown fox jumps over the lazy dog");
        let b = simhash("the  QUICK brown fox,\njumps over the lazy dog!");
        assert!(a.is_some());
        assert_eq!(a, b);
    }

    #[test]
    fn small_edit_small_distance_unrelated_far() {
        let base = "Debian is a free operating system for your computer. An operating system is \
                    the set of basic programs and utilities that make your computer run. Debian \
                    provides more than a pure operating system: it comes with thousands of \
                    packages, precompiled software bundled up in a nice format for easy \
                    installation on your machine.";
        let edited = base.replace("thousands of", "many thousands of");
        let other = "The kernel schedules processes, manages memory and talks to the hardware \
                     through device drivers; user programs ask it for services with system calls.";
        let (a, b, c) = (
            simhash(base).unwrap(),
            simhash(&edited).unwrap(),
            simhash(other).unwrap(),
        );
        assert!(hamming(a, b) <= 6, "edited copy at {}", hamming(a, b));
        assert!(hamming(a, c) > 12, "unrelated text at {}", hamming(a, c));
    }

    #[test]
    fn chinese_uses_keywords() {
        let text = "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。";
        let a = simhash(text).unwrap();
        // Punctuation and particles are not keywords: removing them changes nothing.
        let b = simhash("今天纽约的天气真好啊 京华大酒店的张尧经理吃了一只北京烤鸭").unwrap();
        assert_eq!(a, b);
    }

    /// Property: any text, of any script or none, fingerprints without panicking, the same
    /// way every time, and has a fingerprint exactly when it has a feature. Random texts from a
    /// fixed seed (SplitMix64), so a failure reproduces; no property-testing crate, whose
    /// dependencies would make release and test builds of DataFusion differ.
    #[test]
    fn random_texts_fingerprint_deterministically() {
        const RANGES: [(u32, u32); 9] = [
            (0x4E00, 0x9FFF),   // Han
            (0x61, 0x7A),       // a-z
            (0x41, 0x5A),       // A-Z
            (0x0400, 0x04FF),   // Cyrillic
            (0x21, 0x2F),       // ASCII punctuation
            (0x3000, 0x303F),   // CJK punctuation
            (0x1F600, 0x1F64F), // emoji
            (0x00, 0x20),       // controls and space
            (0x80, 0x10FFFF),   // anything else
        ];
        let mut state = 0x5EED_u64;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        for case in 0..2000 {
            let length = next() % 400;
            let text: String = (0..length)
                .filter_map(|_| {
                    let (lo, hi) = RANGES[(next() % RANGES.len() as u64) as usize];
                    char::from_u32(lo + (next() % u64::from(hi - lo + 1)) as u32)
                })
                .collect();
            let first = simhash(&text);
            assert_eq!(first, simhash(&text), "case {case}: {text:?}");
            let mut hasher = SimHasher::default();
            add_features(&text, &mut hasher);
            assert_eq!(first.is_some(), hasher.feature_count() > 0, "case {case}");
        }
    }
}
