//! Character n-grams: the letters, digits and Han characters of a text, with spaces and
//! punctuation dropped, taken `n` at a time. Needs no segmenter, so it treats every script
//! alike and survives typos and re-segmentation; the usual choice for short texts.

/// Calls `f` with each run of `n` consecutive letters, digits or Han characters of `text`.
/// A text of fewer than `n` such characters is one n-gram.
pub fn for_each_ngram(text: &str, n: usize, buffer: &mut String, mut f: impl FnMut(&str)) {
    buffer.clear();
    buffer.extend(text.chars().filter(|c| c.is_alphanumeric()));
    let starts: Vec<usize> = buffer.char_indices().map(|(i, _)| i).collect();
    if starts.is_empty() {
        return;
    }
    let n = n.min(starts.len());
    for first in 0..=starts.len() - n {
        let end = starts.get(first + n).copied().unwrap_or(buffer.len());
        f(&buffer[starts[first]..end]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grams(text: &str, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for_each_ngram(text, n, &mut String::new(), |g| out.push(g.to_string()));
        out
    }

    #[test]
    fn ngrams_skip_spaces_and_punctuation() {
        assert_eq!(grams("今天，天气好", 2), ["今天", "天天", "天气", "气好"]);
        assert_eq!(grams("a b-c", 2), ["ab", "bc"]);
        assert_eq!(grams("ab", 3), ["ab"]);
        assert!(grams("。！ ", 2).is_empty());
        assert_eq!(grams("x1", 1), ["x", "1"]);
    }
}
