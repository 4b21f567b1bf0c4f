//! Character n-grams: the letters, digits and Han characters of a text, with spaces and
//! punctuation dropped, taken `n` at a time. Needs no segmenter, so it treats every script
//! alike and survives typos and re-segmentation; the usual choice for short texts.

use super::is_han;

/// Script-aware n-grams (`mode=auto`): `letters` cut into runs of Han and of other characters;
/// Han runs give `n_han`-grams, the others `n_other`-grams, and no n-gram straddles the two,
/// so English terms inside Chinese prose (and the reverse) give the same features they would
/// alone.
pub fn for_each_script_ngram(letters: &str, n_han: usize, n_other: usize, mut f: impl FnMut(&str)) {
    if letters.is_ascii() {
        for_each_ngram(letters, n_other, f);
        return;
    }
    let mut rest = letters;
    while let Some(first) = rest.chars().next() {
        let han = is_han(first);
        let end = rest
            .char_indices()
            .find(|&(_, c)| is_han(c) != han)
            .map_or(rest.len(), |(i, _)| i);
        for_each_ngram(&rest[..end], if han { n_han } else { n_other }, &mut f);
        rest = &rest[end..];
    }
}

/// Calls `f` with each run of `n` consecutive characters of `text` (a text's letters, digits
/// and Han characters, see `clean::alphanumerics`); fewer than `n` characters are one n-gram.
/// Walks two character cursors n apart: no allocation per document or per script run. ASCII
/// text is cut by byte offsets.
pub fn for_each_ngram(text: &str, n: usize, mut f: impl FnMut(&str)) {
    if text.is_empty() {
        return;
    }
    let n = n.max(1);
    if text.is_ascii() {
        if text.len() <= n {
            f(text);
        } else {
            for start in 0..=text.len() - n {
                f(&text[start..start + n]);
            }
        }
        return;
    }
    if text.chars().nth(n - 1).is_none() {
        f(text);
        return;
    }
    let starts = text.char_indices().map(|(i, _)| i);
    let ends = text
        .char_indices()
        .map(|(i, _)| i)
        .skip(n)
        .chain(std::iter::once(text.len()));
    for (start, end) in starts.zip(ends) {
        f(&text[start..end]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letters(text: &str) -> String {
        text.chars().filter(|c| c.is_alphanumeric()).collect()
    }

    fn grams(text: &str, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for_each_ngram(&letters(text), n, |g| out.push(g.to_string()));
        out
    }

    fn script_grams(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_script_ngram(&letters(text), 2, 3, |g| out.push(g.to_string()));
        out
    }

    #[test]
    fn ngrams_skip_spaces_and_punctuation() {
        assert_eq!(grams("今天，天气好", 2), ["今天", "天天", "天气", "气好"]);
        assert_eq!(grams("a b-c", 2), ["ab", "bc"]);
        assert_eq!(grams("ab", 3), ["ab"]);
        assert!(grams("。！ ", 2).is_empty());
        assert_eq!(grams("x1", 1), ["x", "1"]);
        assert_eq!(grams("abcd", 3), ["abc", "bcd"], "ASCII by byte offsets");
        assert_eq!(grams("abc", 3), ["abc"]);
        assert_eq!(grams("aé", 3), ["aé"]);
        assert_eq!(grams("aébc", 3), ["aéb", "ébc"]);
    }

    #[test]
    fn script_runs_take_their_own_lengths() {
        assert_eq!(
            script_grams("用 apt 安装软件"),
            ["用", "apt", "安装", "装软", "软件"]
        );
        assert_eq!(
            script_grams("Debian 系统"),
            ["Deb", "ebi", "bia", "ian", "系统"]
        );
        assert!(script_grams(" ... ").is_empty());
    }
}
