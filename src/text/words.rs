//! Word features for space-delimited languages: Unicode word boundaries (UAX #29), lower-cased,
//! with jieba's English stop words and one-letter words left out.

use jieba_rs::DEFAULT_STOP_WORDS;
use unicode_segmentation::UnicodeSegmentation;

/// Calls `f` with each feature word of `text`, in order. Each occurrence counts, so summing
/// them weights a word by its term frequency.
pub fn for_each_word(text: &str, mut f: impl FnMut(&str)) {
    // One buffer for every word instead of an allocation per word.
    let mut lower = String::new();
    for word in text.unicode_words() {
        lower.clear();
        lower.extend(word.chars().flat_map(char::to_lowercase));
        if lower.chars().nth(1).is_none() || DEFAULT_STOP_WORDS.contains(lower.as_str()) {
            continue;
        }
        f(&lower);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn lowercases_and_drops_stop_words_and_single_letters() {
        assert_eq!(
            words("The Quick brown fox, a fox: it's FAST!"),
            ["quick", "brown", "fox", "fox", "it's", "fast"]
        );
    }

    #[test]
    fn non_latin_scripts_are_words_too() {
        assert_eq!(words("Привет мир"), ["привет", "мир"]);
    }
}
