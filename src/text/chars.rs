//! Character n-grams: the letters, digits and Han characters of a text, with spaces and
//! punctuation dropped, taken `n` at a time. Needs no segmenter, so it treats every script
//! alike and survives typos and re-segmentation; the usual choice for short texts.

use super::is_han;
use crate::fingerprint::feature_hash_bytes;

/// Script-aware n-grams (`mode=auto`): `letters` cut into runs of Han and of other characters;
/// Han runs give `N_HAN`-grams, the others `N_OTHER`-grams, and no n-gram straddles the two,
/// so English terms inside Chinese prose (and the reverse) give the same features they would
/// alone. A run shorter than its n is one feature. One pass over the characters: the start of
/// each of the run's last few characters is kept in a small ring, so an n-gram is the slice from
/// the start `n - 1` characters back to the end of the current one.
pub fn for_each_script_ngram<const N_HAN: usize, const N_OTHER: usize>(
    letters: &str,
    mut f: impl FnMut(&str),
) {
    const RING: usize = 8;
    const { assert!(N_HAN >= 1 && N_HAN <= RING && N_OTHER >= 1 && N_OTHER <= RING) };
    if letters.is_ascii() {
        for_each_ngram(letters, N_OTHER, f);
        return;
    }
    let length = |han: bool| if han { N_HAN } else { N_OTHER };
    let mut starts = [0usize; RING];
    // The current run: whether it is Han, where it starts, how many characters it has.
    let (mut han, mut run_start, mut run_length) = (false, 0, 0);
    for (at, c) in letters.char_indices() {
        let is_han = is_han(c);
        if is_han != han || run_length == 0 {
            if run_length > 0 && run_length < length(han) {
                f(&letters[run_start..at]);
            }
            (han, run_start, run_length) = (is_han, at, 0);
        }
        starts[run_length % RING] = at;
        run_length += 1;
        let n = length(han);
        if run_length >= n {
            f(&letters[starts[(run_length - n) % RING]..at + c.len_utf8()]);
        }
    }
    if run_length > 0 && run_length < length(han) {
        f(&letters[run_start..]);
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

/// The feature hashes of `for_each_ngram(text, N, ..)` for an ASCII `text`, appended to
/// `hashes` in the same order. Each n-gram is N bytes, a length the compiler knows: the hash is
/// inlined into the loop at that length, where a call per n-gram through `for_each_ngram`'s
/// closure branched on a length it did not know (the n-gram loop and the hash calls were a fifth
/// of the signature stage's CPU on debian_docs).
pub fn ascii_ngram_hashes<const N: usize>(text: &[u8], hashes: &mut Vec<u64>) {
    const { assert!(N >= 1) };
    debug_assert!(text.is_ascii());
    if text.len() <= N {
        if !text.is_empty() {
            hashes.push(feature_hash_bytes(text));
        }
        return;
    }
    hash_windows::<N, 1>(text, text.len() - N + 1, hashes);
}

/// The feature hashes of `for_each_script_ngram::<2, 3>(letters, ..)`, appended to `hashes` in
/// the same order: each script run's n-grams, as `for_each_ngram` cuts the run alone. Where the
/// n-grams of a run all have one length in bytes (an ASCII run's trigrams; a run of Han
/// characters of three bytes each, whose bigrams are six) they are hashed at that length known
/// when compiled (`ascii_ngram_hashes`, `fixed_width_ngram_hashes`); other runs one n-gram at a
/// time.
pub fn script_ngram_hashes(letters: &str, hashes: &mut Vec<u64>) {
    let mut start = 0;
    while let Some(first) = letters[start..].chars().next() {
        if is_han(first) {
            let (end, chars) = han_run(letters, start);
            let run = &letters[start..end];
            if run.len() == 3 * chars && chars > 2 {
                fixed_width_ngram_hashes::<6, 3>(run.as_bytes(), hashes);
            } else {
                for_each_ngram(run, 2, |g| hashes.push(feature_hash_bytes(g.as_bytes())));
            }
            start = end;
        } else {
            let (end, ascii) = other_run(letters, start);
            let run = &letters[start..end];
            if ascii {
                ascii_ngram_hashes::<3>(run.as_bytes(), hashes);
            } else {
                for_each_ngram(run, 3, |g| hashes.push(feature_hash_bytes(g.as_bytes())));
            }
            start = end;
        }
    }
}

/// The end of the run of Han characters at `start`, and how many characters it has. A
/// character of three bytes (the Basic Multilingual Plane, where nearly all Han text is) is
/// told from its first two bytes without decoding it (`is_three_byte_han`); the others are
/// decoded. Decoding each character and testing all of `is_han`'s blocks was the hottest loop
/// of cutting Chinese pages into n-grams (about 4% of the signature stage on zh200k).
fn han_run(letters: &str, start: usize) -> (usize, usize) {
    let bytes = letters.as_bytes();
    let (mut at, mut chars) = (start, 0);
    while let Some(&lead) = bytes.get(at) {
        let width = if lead & 0xF0 == 0xE0 {
            match bytes.get(at + 1) {
                Some(&second) if is_three_byte_han(lead, second) => 3,
                _ => break,
            }
        } else {
            match letters[at..].chars().next() {
                Some(c) if is_han(c) => c.len_utf8(),
                _ => break,
            }
        };
        at += width;
        chars += 1;
    }
    (at, chars)
}

/// Whether the three-byte character that starts with the bytes `lead`, `second` is Han. The
/// Han blocks of the Basic Multilingual Plane begin and end on multiples of 64, so the
/// character's top ten bits (four of `lead`, six of `second`) decide it.
fn is_three_byte_han(lead: u8, second: u8) -> bool {
    let top = (u32::from(lead & 0x0F) << 12) | (u32::from(second & 0x3F) << 6);
    matches!(top, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF)
}

/// The end of the run of characters other than Han at `start`, and whether it is all ASCII.
/// ASCII is never Han, so it is passed over eight bytes at a time; only the other characters
/// are decoded and looked up.
fn other_run(letters: &str, start: usize) -> (usize, bool) {
    let bytes = letters.as_bytes();
    let mut at = start;
    let mut ascii = true;
    loop {
        at += ascii_prefix_len(&bytes[at..]);
        let Some(c) = letters[at..].chars().next() else {
            return (letters.len(), ascii);
        };
        if is_han(c) {
            return (at, ascii);
        }
        ascii = false;
        at += c.len_utf8();
    }
}

/// How many bytes `bytes` starts with that are ASCII, eight at a time: the texts are mostly
/// long ASCII runs, and a byte at a time this was a fifth of the cleaning's pass.
pub fn ascii_prefix_len(bytes: &[u8]) -> usize {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let (words, rest) = bytes.as_chunks::<8>();
    for (index, word) in words.iter().enumerate() {
        let high = u64::from_le_bytes(*word) & HIGH_BITS;
        if high != 0 {
            // The lowest set bit is in the first byte that is not ASCII.
            return 8 * index + (high.trailing_zeros() / 8) as usize;
        }
    }
    8 * words.len() + rest.iter().take_while(|b| b.is_ascii()).count()
}

/// The hashes of the `WIDTH`-byte windows of `bytes` that start every `STEP` bytes: the
/// n-grams of a run of characters of `STEP` bytes each, `WIDTH / STEP` characters long. The run
/// is longer than one n-gram.
fn fixed_width_ngram_hashes<const WIDTH: usize, const STEP: usize>(
    bytes: &[u8],
    hashes: &mut Vec<u64>,
) {
    debug_assert!(bytes.len() > WIDTH && bytes.len().is_multiple_of(STEP));
    let windows = (bytes.len() - WIDTH) / STEP + 1;
    hash_windows::<WIDTH, STEP>(bytes, windows, hashes);
}

/// Appends the hashes of `windows` n-grams of `WIDTH` bytes, one every `STEP` bytes. XXH3 of a
/// short n-gram is mostly two 64-bit multiplies; the loop is vectorized, and baseline x86-64
/// (what the build targets) has no 64-bit vector multiply, so each is made of three 32-bit
/// ones. Where the CPU has AVX-512DQ (checked when run) the same loop is compiled for it, one
/// instruction per multiply, eight n-grams at a time.
fn hash_windows<const WIDTH: usize, const STEP: usize>(
    bytes: &[u8],
    windows: usize,
    hashes: &mut Vec<u64>,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512dq") {
        // SAFETY: the CPU has AVX-512DQ (and so AVX-512F), checked above.
        unsafe { hash_windows_avx512::<WIDTH, STEP>(bytes, windows, hashes) };
        return;
    }
    hash_windows_portable::<WIDTH, STEP>(bytes, windows, hashes);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn hash_windows_avx512<const WIDTH: usize, const STEP: usize>(
    bytes: &[u8],
    windows: usize,
    hashes: &mut Vec<u64>,
) {
    hash_windows_portable::<WIDTH, STEP>(bytes, windows, hashes);
}

#[inline(always)]
fn hash_windows_portable<const WIDTH: usize, const STEP: usize>(
    bytes: &[u8],
    windows: usize,
    hashes: &mut Vec<u64>,
) {
    hashes.extend((0..windows).map(|i| feature_hash_bytes(&bytes[i * STEP..i * STEP + WIDTH])));
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
        for_each_script_ngram::<2, 3>(&letters(text), |g| out.push(g.to_string()));
        out
    }

    /// Oracle: `for_each_ngram` with each n-gram hashed by `feature_hash`, over ASCII texts of
    /// every length from empty to well past N.
    #[test]
    fn ascii_ngram_hashes_are_the_ngrams_hashes() {
        fn check<const N: usize>(text: &str) {
            let mut expected = Vec::new();
            for_each_ngram(text, N, |g| {
                expected.push(crate::fingerprint::feature_hash(g))
            });
            let mut got = vec![7];
            ascii_ngram_hashes::<N>(text.as_bytes(), &mut got);
            assert_eq!(got[0], 7, "appends");
            assert_eq!(got[1..], expected[..], "n={N} text={text:?}");
        }
        let alphabet = b"abcXYZ019";
        let mut random = crate::rng::SplitMix64(11);
        for length in 0..40 {
            for _ in 0..5 {
                let text: String = (0..length)
                    .map(|_| char::from(alphabet[random.below(alphabet.len())]))
                    .collect();
                check::<1>(&text);
                check::<2>(&text);
                check::<3>(&text);
                check::<4>(&text);
                check::<5>(&text);
            }
        }
    }

    /// Oracle: `for_each_script_ngram::<2, 3>` with each n-gram hashed by `feature_hash`, over
    /// random letters of Han characters of three and four bytes, ASCII and other scripts.
    #[test]
    fn script_ngram_hashes_are_the_script_ngrams_hashes() {
        let alphabet = ['a', 'Z', '7', 'é', 'ж', '中', '文', '字', '𠀀', '𪚥'];
        let mut random = crate::rng::SplitMix64(5);
        for length in 0..60 {
            for _ in 0..20 {
                // Runs of one kind, so that long Han and ASCII runs are common.
                let mut text = String::new();
                while text.chars().count() < length {
                    let c = alphabet[random.below(alphabet.len())];
                    for _ in 0..=random.below(8) {
                        text.push(c);
                    }
                }
                let mut expected = Vec::new();
                for_each_script_ngram::<2, 3>(&text, |g| {
                    expected.push(crate::fingerprint::feature_hash(g))
                });
                let mut got = Vec::new();
                script_ngram_hashes(&text, &mut got);
                assert_eq!(got, expected, "{text:?}");
            }
        }
    }

    /// Oracle: `is_han` on every character of three bytes.
    #[test]
    fn three_byte_han_is_han() {
        for c in ('\u{800}'..='\u{FFFF}').filter(|c| c.len_utf8() == 3) {
            let mut bytes = [0; 4];
            c.encode_utf8(&mut bytes);
            assert_eq!(is_three_byte_han(bytes[0], bytes[1]), is_han(c), "{c:?}");
        }
    }

    #[test]
    fn han_runs_end_at_the_first_other_character() {
        // 㐀 and 一 open extension A and the main block; ䷀ (a hexagram) lies between them;
        // 豈 is a compatibility ideograph; 𠀀 has four bytes.
        let text = "ab㐀一豈𠀀中䷀字x";
        let start = 2;
        let end = text.find('䷀').unwrap();
        assert_eq!(han_run(text, start), (end, 5));
        assert_eq!(han_run(text, end), (end, 0));
        assert_eq!(han_run("中文", 0), (6, 2));
        assert_eq!(han_run("", 0), (0, 0));
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
        assert_eq!(
            script_grams("a中b文字cd"),
            ["a", "中", "b", "文字", "cd"],
            "runs shorter than n"
        );
    }

    /// Oracle: each run cut on its own by `for_each_ngram`, on random mixes of Han, other
    /// letters of one to four bytes, and runs of every length around n.
    #[test]
    fn script_runs_are_each_runs_ngrams() {
        let pieces = ["中", "文字", "𠀀", "a", "bc", "é", "Ж", "1", "가", "ß", "𝒜"];
        let mut random = crate::rng::SplitMix64(5);
        for case in 0..3000 {
            let text: String = (0..random.below(20))
                .map(|_| pieces[random.below(pieces.len())])
                .collect();
            let mut expected = Vec::new();
            let mut rest = text.as_str();
            while let Some(first) = rest.chars().next() {
                let han = is_han(first);
                let end = rest
                    .char_indices()
                    .find(|&(_, c)| is_han(c) != han)
                    .map_or(rest.len(), |(i, _)| i);
                for_each_ngram(&rest[..end], if han { 2 } else { 3 }, |g| {
                    expected.push(g.to_string())
                });
                rest = &rest[end..];
            }
            let mut got = Vec::new();
            for_each_script_ngram::<2, 3>(&text, |g| got.push(g.to_string()));
            assert_eq!(got, expected, "case {case}: {text:?}");
        }
    }

    #[test]
    fn ascii_prefix_is_the_bytes_before_the_first_other() {
        // Oracle: a byte at a time; every length around the eight-byte words, the first
        // non-ASCII byte (the lowest, 0x80, and a lead byte) at every place, ASCII's highest
        // byte around it, and a second non-ASCII byte later in the same word or the next.
        for len in 0..40 {
            for other in 0..=len {
                for (first, ascii) in [(0xE4, b'a'), (0x80, 0x7F)] {
                    let mut bytes = vec![ascii; len];
                    if other < len {
                        bytes[other] = first;
                    }
                    if other + 3 < len {
                        bytes[other + 3] = 0xC3;
                    }
                    let expected = bytes.iter().take_while(|b| b.is_ascii()).count();
                    assert_eq!(ascii_prefix_len(&bytes), expected, "{len} {other} {first}");
                }
            }
        }
    }
}
