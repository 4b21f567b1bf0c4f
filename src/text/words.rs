//! Word features for space-delimited languages, and word shingles. Words are Unicode word
//! boundaries (UAX #29), which also cut Han text into single characters, so a mixed document
//! still has features in these modes. Case is the cleaning's business (`case=on` by default).

use std::collections::BTreeSet;

use unicode_segmentation::UnicodeSegmentation;

use super::is_han;

/// Calls `f` with each feature word of `text`, in order: stop words and one-character words
/// are left out, except a single Han character, which is a word. Each occurrence counts,
/// so summing them weights a word by its term frequency.
pub fn for_each_word(text: &str, stop_words: &BTreeSet<String>, mut f: impl FnMut(&str)) {
    for word in text.unicode_words() {
        let mut chars = word.chars();
        let single = chars.next().filter(|_| chars.next().is_none());
        if single.is_some_and(|c| !is_han(c)) || stop_words.contains(word) {
            continue;
        }
        f(word);
    }
}

/// Calls `f` with each run of `n` consecutive words of `text` (joined by one space), stop words
/// included: the order of words is the signal. A text of fewer than `n` words is one shingle.
pub fn for_each_shingle(text: &str, n: usize, buffer: &mut String, mut f: impl FnMut(&str)) {
    let words: Vec<&str> = text.unicode_words().collect();
    if words.is_empty() {
        return;
    }
    for window in words.windows(n.min(words.len())) {
        buffer.clear();
        for (i, word) in window.iter().enumerate() {
            if i > 0 {
                buffer.push(' ');
            }
            buffer.push_str(word);
        }
        f(buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jieba_rs::DEFAULT_STOP_WORDS;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, &DEFAULT_STOP_WORDS, |w| out.push(w.to_string()));
        out
    }

    fn shingles(text: &str, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for_each_shingle(text, n, &mut String::new(), |s| out.push(s.to_string()));
        out
    }

    #[test]
    fn drops_stop_words_and_single_letters() {
        assert_eq!(
            words("the quick brown fox, a fox: it's fast!"),
            ["quick", "brown", "fox", "fox", "it's", "fast"]
        );
    }

    #[test]
    fn other_scripts_and_han_are_words_too() {
        assert_eq!(words("привет мир"), ["привет", "мир"]);
        assert_eq!(words("用 rust 写"), ["用", "rust", "写"]);
    }

    #[test]
    fn shingles_are_overlapping_word_runs() {
        assert_eq!(
            shingles("a rose is a rose", 3),
            ["a rose is", "rose is a", "is a rose"]
        );
        assert_eq!(shingles("two words", 3), ["two words"]);
        assert!(shingles(" ,. ", 3).is_empty());
        assert_eq!(shingles("中文abc", 2), ["中 文", "文 abc"]);
    }
}
