//! Traditional-to-Simplified conversion of a run of Han characters by table: the same text as
//! OpenCC's `t2s` converter (ferrous-opencc) gives, at a fraction of its cost.
//!
//! The converter walks two finite-state dictionaries (TSPhrases, TSCharacters) at every
//! character and builds a list of candidate strings for each match; on a Traditional page that
//! is most of the cleaning's time. Its rule is simple: at each position take the longest key of
//! either dictionary that starts there (a phrase over a character), write its first value and
//! move past it; where no key starts, copy the character. The table keeps the same rule over
//! the same entries: what each character becomes alone and what each phrase becomes, both asked
//! of the converter itself once, and the phrase keys from `t2s_phrases.txt`, the keys of the
//! TSPhrases dictionary that the locked ferrous-opencc compiles in (its API does not list them).
//! Characters outside the Basic Multilingual Plane are left to the converter.

use std::collections::HashMap;

use ferrous_opencc::OpenCC;

/// The phrase keys, one per line after the `#` lines of the notice.
const PHRASE_KEYS: &str = include_str!("t2s_phrases.txt");

/// A phrase key and what it becomes.
struct Phrase {
    key: Box<str>,
    value: Box<str>,
    /// The key's second character's bytes (`three_bytes`), compared before the whole key:
    /// most phrases that start with a character differ in the next, and a comparison of the
    /// whole key was a call to memcmp per phrase listed.
    second: Option<u32>,
}

/// The three bytes of `bytes` from `at` as a number, `None` past its end.
fn three_bytes(bytes: &[u8], at: usize) -> Option<u32> {
    match *bytes.get(at..at + 3)? {
        [a, b, c] => Some(u32::from_le_bytes([a, b, c, 0])),
        _ => None,
    }
}

pub struct T2sTable {
    /// For each character of the Basic Multilingual Plane: 0, or the index plus one in
    /// `singles` of what it becomes alone.
    single: Vec<u16>,
    singles: Vec<Box<str>>,
    /// For each character of the Basic Multilingual Plane: 0, or the index plus one in
    /// `phrases` of the list of phrases that start with it (a lookup without hashing).
    phrase_list: Vec<u16>,
    /// The phrases that start with a character, longest first, each with what it becomes.
    phrases: Vec<Vec<Phrase>>,
}

impl T2sTable {
    /// Asks `converter` what each of `han` (characters of the Basic Multilingual Plane) becomes
    /// alone, and what each phrase key becomes.
    pub fn new(converter: &OpenCC, han: &[char]) -> Self {
        // One character a line: no key holds a line break, so no match spans two characters.
        let lines: String = han.iter().flat_map(|&c| [c, '\n']).collect();
        let converted = converter.convert(&lines);
        let mut single = vec![0u16; 0x10000];
        let mut singles: Vec<Box<str>> = Vec::new();
        for (&c, alone) in han.iter().zip(converted.split('\n')) {
            let code = c as usize;
            let unchanged = alone.chars().eq(std::iter::once(c));
            if unchanged || code >= 0x10000 {
                continue;
            }
            singles.push(alone.into());
            // About four thousand characters change: the index fits.
            single[code] = u16::try_from(singles.len()).unwrap_or(0);
        }
        let mut by_first: HashMap<char, Vec<Phrase>> = HashMap::new();
        for key in PHRASE_KEYS
            .lines()
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
        {
            let Some(first) = key.chars().next() else {
                continue;
            };
            let value = converter.convert(key);
            by_first.entry(first).or_default().push(Phrase {
                key: key.into(),
                value: value.into(),
                second: three_bytes(key.as_bytes(), first.len_utf8()),
            });
        }
        let mut phrase_list = vec![0u16; 0x10000];
        let mut phrases = Vec::new();
        for (first, mut list) in by_first {
            list.sort_by_key(|phrase| std::cmp::Reverse(phrase.key.len()));
            phrases.push(list);
            if let (Some(slot), Ok(index)) = (
                phrase_list.get_mut(first as usize),
                u16::try_from(phrases.len()),
            ) {
                *slot = index;
            }
        }
        Self {
            single,
            singles,
            phrase_list,
            phrases,
        }
    }

    /// The characters that change alone.
    pub fn changed_alone(&self) -> impl Iterator<Item = char> + '_ {
        (0..0x10000u32)
            .filter(|&code| self.single[code as usize] != 0)
            .filter_map(char::from_u32)
    }

    /// The phrase keys, each with what it becomes.
    #[cfg(test)]
    pub fn phrases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.phrases
            .iter()
            .flatten()
            .map(|phrase| (&*phrase.key, &*phrase.value))
    }

    /// Whether a phrase key starts with `c`.
    pub fn starts_phrase(&self, c: char) -> bool {
        self.phrase_list
            .get(c as usize)
            .is_some_and(|&list| list != 0)
    }

    /// The conversion of a run of Han characters, or `None` when it holds a character outside
    /// the Basic Multilingual Plane (the converter's to do).
    pub fn convert_run(&self, run: &str) -> Option<String> {
        let mut out = String::with_capacity(run.len());
        let mut rest = run;
        while !rest.is_empty() {
            let (piece, consumed) = self.convert_first(rest)?;
            out.push_str(piece);
            rest = &rest[consumed..];
        }
        Some(out)
    }

    /// The conversion's step at the start of `rest`, a run of Han characters or what is left of
    /// one: what the longest phrase key that `rest` starts with becomes, or else what its first
    /// character becomes alone (itself, when it does not change), with the bytes of `rest` that
    /// stand for it. `None` when `rest` is empty or starts with a character outside the Basic
    /// Multilingual Plane.
    pub fn convert_first<'a>(&'a self, rest: &'a str) -> Option<(&'a str, usize)> {
        let c = rest.chars().next()?;
        let code = c as usize;
        if code >= 0x10000 {
            return None;
        }
        let width = c.len_utf8();
        if let Some(list) = usize::from(self.phrase_list[code]).checked_sub(1) {
            let second = three_bytes(rest.as_bytes(), width);
            let matched = self.phrases.get(list).and_then(|list| {
                list.iter().find(|phrase| {
                    (phrase.second.is_none() || phrase.second == second)
                        && rest.starts_with(&*phrase.key)
                })
            });
            if let Some(phrase) = matched {
                return Some((&phrase.value, phrase.key.len()));
            }
        }
        Some(match self.single[code] {
            0 => (&rest[..width], width),
            index => (&self.singles[usize::from(index) - 1], width),
        })
    }
}
