//! Cleaning: what the fingerprint should not see (markup, compatibility forms, width, script
//! variant, case, spacing), removed before features are taken. Each step is switchable
//! (`FeatureOptions::cleaning`) and runs in the order of the fields there; a step that would
//! change nothing does not copy the text.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use ferrous_opencc::OpenCC;
use ferrous_opencc::config::BuiltinConfig;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

use super::chars::ascii_prefix_len;
use super::is_han;
use super::markup::strip_markup;
use super::options::{Cleaning, OptionError, T2s};
use super::t2s_table::T2sTable;

/// OpenCC's Traditional-to-Simplified conversion (characters, and phrases only where a character
/// is ambiguous), loaded once. Not the Taiwan-vocabulary variant (`tw2sp`, 軟體 -> 软件): it
/// rewrites Simplified text too (程序 -> 进程 inside 可执行程序), so a copy that needed converting
/// and an original that did not would drift apart.
static T2S: LazyLock<Result<OpenCC, String>> =
    LazyLock::new(|| OpenCC::from_config(BuiltinConfig::T2s).map_err(|e| e.to_string()));

/// The Taiwan-vocabulary variant for `t2s=tw`. It must see every Chinese text, Simplified or
/// not, so that its rewrites fall the same way on both sides of a pair; that costs about a
/// millisecond per page.
static TW2SP: LazyLock<Result<OpenCC, String>> =
    LazyLock::new(|| OpenCC::from_config(BuiltinConfig::Tw2sp).map_err(|e| e.to_string()));

/// The T2S conversion by table (`T2sTable`), what every Han run with a character that could
/// change goes through.
static T2S_TABLE: LazyLock<Option<T2sTable>> = LazyLock::new(|| {
    let converter = T2S.as_ref().ok()?;
    let han: Vec<char> = ('\u{3400}'..='\u{9FFF}')
        .chain('\u{F900}'..='\u{FAFF}')
        .filter(|&c| is_han(c))
        .collect();
    Some(T2sTable::new(converter, &han))
});

/// The characters of the Basic Multilingual Plane's Han blocks that the conversion changes on
/// their own: a text with none of them is not Traditional and skips the conversion (Simplified
/// and non-Chinese text go through at no charge).
static TRADITIONAL: LazyLock<Vec<u64>> = LazyLock::new(|| {
    let mut bits = vec![0u64; 0x10000 / 64];
    let Some(table) = &*T2S_TABLE else {
        return bits;
    };
    // Characters the conversion keeps alone but changes inside phrases (回覆 -> 回复, 瞭解 ->
    // 了解, 沈默 -> 沉默, 藉口 -> 借口, 牴觸 -> 抵触, 衹 in 衹是), from OpenCC's TSPhrases; a
    // test checks every phrase that changes holds one of them or a character that changes alone.
    for c in table
        .changed_alone()
        .chain(['覆', '瞭', '沈', '藉', '牴', '衹'])
    {
        bits[c as usize / 64] |= 1 << (c as usize % 64);
    }
    bits
});

/// Whether a phrase of the T2S conversion starts with `c`.
fn starts_phrase(c: char) -> bool {
    T2S_TABLE
        .as_ref()
        .is_some_and(|table| table.starts_phrase(c))
}

/// A bit per Basic Multilingual Plane character: one load and a mask, no hashing, per
/// character of every Chinese text.
fn is_traditional(c: char) -> bool {
    let c = c as usize;
    c < 0x10000 && (TRADITIONAL[c / 64] >> (c % 64)) & 1 == 1
}

/// Checks that every resource the cleaning needs loads, so a bad setup fails before any row.
pub fn prepare(cleaning: &Cleaning) -> Result<(), OptionError> {
    let converter = match cleaning.t2s {
        T2s::Off => return Ok(()),
        T2s::Characters => &*T2S,
        T2s::Taiwan => &*TW2SP,
    };
    match converter {
        Ok(_) => Ok(()),
        Err(e) => Err(OptionError(format!(
            "t2s={}: the Traditional-to-Simplified dictionaries do not load: {e}",
            cleaning.t2s.name()
        ))),
    }
}

/// Builds the tables every text's cleaning looks characters up in (a few tens of milliseconds
/// on one core, the T2S dictionaries among them), so that the first batches need not wait.
pub fn build_tables() {
    LazyLock::force(&CHAR_CLASSES);
}

/// The cleaned text.
pub fn clean<'a>(text: &'a str, cleaning: &Cleaning) -> Cow<'a, str> {
    finish(normalize(text, cleaning), cleaning)
}

/// The letters and digits of the cleaned text, in order, into `out`: exactly
/// `clean(text).chars().filter(char::is_alphanumeric)`, which is all the n-gram modes read.
/// Most texts take one pass after the markup (`letters_in_one_pass`); the others take the
/// steps one after the other, without the copies the case and spacing steps make. Spacing only
/// moves spaces, which are dropped here anyway, and lower-casing is per character except for a
/// capital sigma (final or not depends on the next letter), which takes the general path.
pub fn alphanumerics(text: &str, cleaning: &Cleaning, out: &mut String) {
    out.clear();
    let text = strip_markup_if(text, cleaning);
    if !cleaning.cjk_only && letters_by_table(&text, cleaning, out) {
        return;
    }
    out.clear();
    let text = normalize_characters(text, cleaning);
    if cleaning.cjk_only || (cleaning.case && text.contains('Σ')) {
        out.extend(
            finish(text, cleaning)
                .chars()
                .filter(|c| c.is_alphanumeric()),
        );
        return;
    }
    if text.is_ascii() {
        let letters = text.bytes().filter(u8::is_ascii_alphanumeric);
        if cleaning.case {
            out.extend(letters.map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            out.extend(letters.map(char::from));
        }
        return;
    }
    // The case step lower-cases only a text with an upper-case letter: a title-case letter
    // alone (ǅ) stays as it is.
    let lower = cleaning.case && text.chars().any(char::is_uppercase);
    for c in text.chars() {
        // ASCII and the CJK Unified Ideographs (all letters, no case) without table lookups.
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                out.push(if lower { c.to_ascii_lowercase() } else { c });
            }
        } else if is_common_han(c) {
            out.push(c);
        } else if lower {
            out.extend(c.to_lowercase().filter(|l| l.is_alphanumeric()));
        } else if c.is_alphanumeric() {
            out.push(c);
        }
    }
}

/// `alphanumerics` of a text without markup by `letters_in_one_pass`, when it can. False when
/// the text needs the steps one after the other.
fn letters_by_table(text: &str, cleaning: &Cleaning, out: &mut String) -> bool {
    let stops = CharClass::stops(cleaning);
    letters_in_one_pass(text, cleaning, stops, out) == Pass::Done
}

/// How far `letters_in_one_pass` got.
#[derive(Debug, PartialEq, Eq)]
enum Pass {
    /// `out` holds the letters.
    Done,
    /// A character needs the steps one after the other.
    General,
}

/// The letters of a text without markup in one pass and one table lookup per character, when
/// every character is one that the enabled steps either leave alone wherever it stands or, for
/// NFKC, spell in ASCII by itself (full-width forms, the ideographic space, the ellipsis).
/// `General` at the first character that needs the steps one after the other: one NFKC may
/// change together with its neighbours, one lower-casing changes (a capital sigma among
/// them), one outside the Basic Multilingual Plane, and one of the `stops` classes. Why the
/// result is the same: the NFKC step spells such a text's ASCII forms and stops there
/// (`normalize_characters`), the width and script steps then find nothing to change, and
/// lower-casing changes only ASCII capitals.
///
/// With the character-level script step on, a character that changes alone or starts a
/// phrase does not stop the pass: it is converted where it stands (`convert_here`: the longest
/// phrase that starts there, or the character alone) and the letters it gives are checked as
/// any other character's. The same letters as converting every Han run (`simplify_han_runs`):
/// the conversion takes a phrase or a character at a time from a run's start, a phrase is Han
/// characters only (so none crosses a run's end), and at a character of neither class it is
/// the character itself; a run without a Traditional character does not change, so converting
/// only those is converting all. The same as NFKC first: such a text's NFKC only spells ASCII
/// forms, which are not Han. A character the conversion gives is not converted again (覆 in
/// 覆盖 is Simplified text, as the script step leaves it).
fn letters_in_one_pass(text: &str, cleaning: &Cleaning, stops: u8, out: &mut String) -> Pass {
    // The letters are written as bytes, then checked back into `out` once: pushing one char at
    // a time cost a branch per byte on whether to keep it, which mispredicts at every space
    // and punctuation mark.
    let mut letters = std::mem::take(out).into_bytes();
    letters.clear();
    let pass = letters_as_bytes(text, cleaning, stops, &mut letters);
    debug_assert!(std::str::from_utf8(&letters).is_ok());
    // SAFETY: `letters_as_bytes` writes only ASCII bytes and the bytes of whole characters of
    // `text`, a `str`, or of the T2S table's strings, so `letters` is UTF-8. Checking it again
    // cost 4.6% of the signature stage's CPU on a million generated pages (perf,
    // `core::str::from_utf8`).
    *out = unsafe { String::from_utf8_unchecked(letters) };
    pass
}

/// What `letters_as_bytes` keeps of a character other than ASCII under one cleaning.
struct Keep<'a> {
    cleaning: &'a Cleaning,
    /// The classes that send the text to the general path.
    stop: u8,
    /// `ASCII_LETTERS` or, with the case step, `ASCII_LETTERS_LOWERED`.
    ascii: &'static [u8; 128],
}

impl Keep<'_> {
    /// Whether a Han letter that no enabled step changes (`CharClass::PLAIN_HAN`) is kept as
    /// it is, which `push` would do, so that the callers may copy it without asking: unless
    /// Han characters send the text to the general path (the Taiwan-vocabulary step).
    #[inline(always)]
    fn copies_plain_han(&self) -> bool {
        self.stop & CharClass::PLAIN_HAN == 0
    }

    /// Writes the letters `c` (of class `class`, spelled `bytes` in UTF-8) stands for into
    /// `out`; false when it is of a `stop` class.
    #[inline]
    fn push(&self, class: u8, c: char, bytes: &[u8], out: &mut Vec<u8>) -> bool {
        // An ASCII form is ASCII before the steps after NFKC see it: its own case, width or
        // script do not matter.
        if self.cleaning.nfkc && class & CharClass::ASCII_FORM != 0 {
            let spelled = ASCII_FORMS.spelling(c).unwrap_or_default();
            for b in spelled.bytes() {
                let letter = self.ascii[usize::from(b & 0x7F)];
                if letter != 0 {
                    out.push(letter);
                }
            }
            true
        } else if class & self.stop != 0 {
            false
        } else {
            if class & CharClass::LETTER != 0 {
                copy_char(bytes, out);
            }
            true
        }
    }
}

/// Appends a character's own bytes (no encoding it again) at a length known when compiled: a
/// copy of one to four bytes of unknown length was a call to memcpy per character (memmove
/// was 8.0% of the stage's samples on Chinese pages before, 2.9% after).
#[inline(always)]
fn copy_char(bytes: &[u8], out: &mut Vec<u8>) {
    match *bytes {
        [a, b, c] => out.extend_from_slice(&[a, b, c]),
        [a, b] => out.extend_from_slice(&[a, b]),
        [a, b, c, d] => out.extend_from_slice(&[a, b, c, d]),
        _ => out.extend_from_slice(bytes),
    }
}

/// The character-level script step at byte `at` of `text`, a character that changes alone or
/// starts a phrase: the letters of what the longest phrase starting there, or else the
/// character alone, becomes, written to `out`; the bytes of `text` it stands for. `None` when
/// the table is missing (the T2S dictionaries did not load), the character is beyond the Basic
/// Multilingual Plane (the converter's to do), or a letter it gives is of a `stop` class.
fn convert_here(text: &str, at: usize, keep: &Keep, out: &mut Vec<u8>) -> Option<usize> {
    let table = T2S_TABLE.as_ref()?;
    let (converted, consumed) = table.convert_first(text.get(at..)?)?;
    let classes = &*CHAR_CLASSES;
    // A phrase's characters after the first (which the caller checked): the steps before the
    // script step see them too.
    let mut taken = text.get(at..at + consumed)?.chars().skip(1);
    if taken.any(|c| {
        classes
            .get(c as usize)
            .is_none_or(|&class| class & keep.stop != 0)
    }) {
        return None;
    }
    for (at, c) in converted.char_indices() {
        let class = match classes.get(c as usize) {
            Some(&class) => class,
            // Beyond the Basic Multilingual Plane (𫛣 for 鴥, a Han character of the extension
            // blocks): the steps after the script step see whether it is a letter and whether
            // lower-casing changes it. NFKC and width come before, and its output is not
            // converted again.
            None => letter_and_case(c),
        };
        let bytes = &converted.as_bytes()[at..at + c.len_utf8()];
        if !keep.push(class, c, bytes, out) {
            return None;
        }
    }
    Some(consumed)
}

/// The `LETTER` and `CASED` bits of a character's class.
fn letter_and_case(c: char) -> u8 {
    let mut class = 0;
    if c.is_alphanumeric() {
        class |= CharClass::LETTER;
    }
    if !c.to_lowercase().eq([c]) {
        class |= CharClass::CASED;
    }
    class
}

/// `letters_in_one_pass` into a byte buffer.
fn letters_as_bytes(text: &str, cleaning: &Cleaning, stops: u8, out: &mut Vec<u8>) -> Pass {
    let script = stops & CharClass::TRADITIONAL;
    let keep = Keep {
        cleaning,
        stop: stops & !script,
        ascii: if cleaning.case {
            &ASCII_LETTERS_LOWERED
        } else {
            &ASCII_LETTERS
        },
    };
    let classes = &*CHAR_CLASSES;
    let bytes = text.as_bytes();
    // With the script step on, the classes it converts at; and the bits that do not keep a Han
    // letter from being copied as it is (without the step, whether it could change).
    let converts = match script {
        0 => 0,
        _ => CharClass::TRADITIONAL | CharClass::PHRASE_START,
    };
    let plain = !(CharClass::TRADITIONAL | CharClass::PHRASE_START) | converts;
    let plain_han_kept = keep.copies_plain_han();
    let mut at = 0;
    'text: while at < bytes.len() {
        // A run of ASCII by a table: each byte's letter or digit as the case step leaves it,
        // or 0. Every byte is written and the length moves past the letters only, without a
        // branch on the byte.
        let ascii_run = ascii_prefix_len(&bytes[at..]);
        if ascii_run > 0 {
            let start = out.len();
            out.resize(start + ascii_run, 0);
            let written = &mut out[start..];
            let mut len = 0;
            for &byte in &bytes[at..at + ascii_run] {
                let letter = keep.ascii[usize::from(byte & 0x7F)];
                // `len` is at most the bytes read so far, so inside `written`.
                if let Some(slot) = written.get_mut(len) {
                    *slot = letter;
                }
                len += usize::from(letter != 0);
            }
            out.truncate(start + len);
            at += ascii_run;
            continue;
        }
        // Characters other than ASCII, up to the next ASCII byte: on Chinese pages, looking
        // for an ASCII run before each character held the pass's hottest instructions.
        while let Some(&lead) = bytes.get(at)
            && !lead.is_ascii()
        {
            let Some((c, width)) = char_at(text, at) else {
                break 'text;
            };
            let Some(&class) = classes.get(c as usize) else {
                return Pass::General;
            };
            if class & plain == CharClass::PLAIN_HAN && plain_han_kept {
                // What `push` does for a Han letter no step changes, without asking.
                copy_char(&bytes[at..at + width], out);
                at += width;
                continue;
            }
            if class & converts != 0 {
                // The character itself first: the steps before the script step see it.
                if class & keep.stop != 0 {
                    return Pass::General;
                }
                match convert_here(text, at, &keep, out) {
                    Some(consumed) => at += consumed,
                    None => return Pass::General,
                }
                continue;
            }
            if !keep.push(class, c, &bytes[at..at + width], out) {
                return Pass::General;
            }
            at += width;
        }
    }
    Pass::Done
}

/// The character that starts at byte `at` of `text` (a character boundary), and its width in
/// bytes. A three-byte character (the CJK blocks) is decoded here, without the general
/// decoder's branches on the width.
#[inline(always)]
fn char_at(text: &str, at: usize) -> Option<(char, usize)> {
    if let Some(&[lead @ 0xE0..=0xEF, second, third]) = text.as_bytes().get(at..at + 3) {
        let code = (u32::from(lead & 0x0F) << 12)
            | (u32::from(second & 0x3F) << 6)
            | u32::from(third & 0x3F);
        return char::from_u32(code).map(|c| (c, 3));
    }
    let c = text.get(at..)?.chars().next()?;
    Some((c, c.len_utf8()))
}

/// Each ASCII byte as `alphanumerics` keeps it: letters and digits as they are, the rest 0.
static ASCII_LETTERS: [u8; 128] = ascii_letters(false);

/// The same with capitals lower-cased (the case step).
static ASCII_LETTERS_LOWERED: [u8; 128] = ascii_letters(true);

const fn ascii_letters(lower: bool) -> [u8; 128] {
    let mut table = [0u8; 128];
    let mut byte = 0;
    while byte < 128 {
        let b = byte as u8;
        if b.is_ascii_alphanumeric() {
            table[byte] = if lower { b.to_ascii_lowercase() } else { b };
        }
        byte += 1;
    }
    table
}

/// What the cleaning may do to a character of the Basic Multilingual Plane, a bit each; one
/// byte per character in `CHAR_CLASSES`.
struct CharClass;

impl CharClass {
    /// A letter or digit: what the n-gram modes keep.
    const LETTER: u8 = 1;
    /// NFKC spells it by itself in ASCII (`ASCII_FORMS`), or in characters that are neither
    /// letters nor digits and leave their neighbours alone (`is_silent_form`).
    const ASCII_FORM: u8 = 1 << 1;
    /// NFKC may change it or its neighbours: not a stable starter, and not an ASCII form.
    const NFKC: u8 = 1 << 2;
    /// A full-width form or the ideographic space (the width step).
    const WIDE: u8 = 1 << 3;
    /// The character-level script step may change it (`is_traditional`).
    const TRADITIONAL: u8 = 1 << 4;
    /// A Han character: the Taiwan-vocabulary script step converts every text that has one.
    const HAN: u8 = 1 << 5;
    /// Lower-casing changes it.
    const CASED: u8 = 1 << 6;
    /// The character-level script step may change it together with the characters after it:
    /// it starts a phrase of the conversion (`T2sTable`).
    const PHRASE_START: u8 = 1 << 7;
    /// A Han letter and nothing else: what most characters of a Chinese page are.
    const PLAIN_HAN: u8 = Self::LETTER | Self::HAN;

    /// The classes that `letters_in_one_pass` leaves to the general path under `cleaning`.
    fn stops(cleaning: &Cleaning) -> u8 {
        let mut stops = 0;
        if cleaning.nfkc {
            stops |= Self::NFKC;
        } else if cleaning.width {
            stops |= Self::WIDE;
        }
        stops |= match cleaning.t2s {
            T2s::Off => 0,
            T2s::Characters => Self::TRADITIONAL,
            T2s::Taiwan => Self::HAN,
        };
        if cleaning.case {
            stops |= Self::CASED;
        }
        stops
    }
}

static CHAR_CLASSES: LazyLock<Vec<u8>> = LazyLock::new(|| {
    (0..0x10000u32)
        .map(|code| {
            // Surrogates are no characters, and no text holds them.
            let Some(c) = char::from_u32(code) else {
                return CharClass::NFKC;
            };
            let ascii_form = ASCII_FORMS.spelling(c).is_some() || is_silent_form(c);
            let flags = [
                (ascii_form, CharClass::ASCII_FORM),
                (!ascii_form && !is_stable_starter(c), CharClass::NFKC),
                (is_wide(c), CharClass::WIDE),
                (is_traditional(c), CharClass::TRADITIONAL),
                (is_han(c), CharClass::HAN),
                (starts_phrase(c), CharClass::PHRASE_START),
            ];
            flags
                .iter()
                .filter(|(set, _)| *set)
                .fold(letter_and_case(c), |class, (_, bit)| class | bit)
        })
        .collect()
});

/// The CJK Unified Ideographs block, every code point of which is an assigned letter without
/// case (checked by a test against the standard library's tables).
fn is_common_han(c: char) -> bool {
    ('\u{4E00}'..='\u{9FFF}').contains(&c)
}

/// The steps that change which characters a text is written with: markup, NFKC, width and
/// script.
fn normalize<'a>(text: &'a str, cleaning: &Cleaning) -> Cow<'a, str> {
    normalize_characters(strip_markup_if(text, cleaning), cleaning)
}

/// The markup step.
fn strip_markup_if<'a>(text: &'a str, cleaning: &Cleaning) -> Cow<'a, str> {
    let text = Cow::Borrowed(text);
    if cleaning.html {
        replace(text, strip_markup)
    } else {
        text
    }
}

/// NFKC, width and script, after the markup. ASCII text has nothing for them to do.
fn normalize_characters<'a>(mut text: Cow<'a, str>, cleaning: &Cleaning) -> Cow<'a, str> {
    if text.is_ascii() {
        return text;
    }
    if cleaning.nfkc && !is_nfkc(&text) {
        // Replacing a character by its compatibility decomposition leaves the NFKC form as it
        // was (NFKC composes the text's full decomposition, which is the same), and when that
        // decomposition is ASCII the replacement is all the normalisation does for it. Most
        // text that is not NFKC is so for such characters alone (the full-width commas and
        // colons of Chinese text, the ideographic space, no-break spaces, the ellipsis): after
        // the replacement it is NFKC already, with no decomposition and recomposition of every
        // character.
        let replaced = replace(text, spell_ascii_forms);
        text = if is_nfkc(&replaced) {
            replaced
        } else {
            Cow::Owned(replaced.nfkc().collect())
        };
    }
    // Han characters, full-width forms and the ideographic space are all at U+3000 or above,
    // whose UTF-8 starts with a byte of 0xE3 or more: without one (most Latin text with a few
    // curly quotes or accents), width and script have nothing to do. Checked after NFKC,
    // which can make Han characters (⼀, a Kangxi radical, becomes 一).
    if !text.bytes().any(|b| b >= 0xE3) {
        return text;
    }
    // After NFKC there is nothing to narrow: full-width forms and the ideographic space are
    // not NFKC, so the step above has already replaced them.
    if cleaning.width && !cleaning.nfkc {
        text = narrow_all(text);
    }
    match cleaning.t2s {
        T2s::Off => {}
        T2s::Characters => {
            if let Ok(converter) = &*T2S {
                text = replace(text, |t| simplify_han_runs(t, converter));
            }
        }
        T2s::Taiwan => {
            if let (true, Ok(converter)) = (text.chars().any(is_han), &*TW2SP) {
                let converted = converter.convert(&text);
                if converted != text {
                    text = Cow::Owned(converted);
                }
            }
        }
    }
    text
}

/// The steps that follow the script: case, Han only, spacing.
fn finish<'a>(mut text: Cow<'a, str>, cleaning: &Cleaning) -> Cow<'a, str> {
    if cleaning.case && text.chars().any(char::is_uppercase) {
        text = Cow::Owned(text.to_lowercase());
    }
    if cleaning.cjk_only && !text.chars().all(is_han) {
        text = Cow::Owned(text.chars().filter(|&c| is_han(c)).collect());
    }
    if cleaning.space && needs_collapsing(&text) {
        text = Cow::Owned(text.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    text
}

/// NFKC's quick check, skipping ASCII and the CJK Unified Ideographs (starters with no
/// decomposition, the bulk of the text): skipping starters can only turn a Yes into a No
/// (two marks that a letter kept apart become neighbours), never the reverse, and a No only
/// costs the full normalisation, which is always right.
fn is_nfkc(text: &str) -> bool {
    let rest = text.chars().filter(|&c| !is_stable_starter(c));
    is_nfkc_quick(rest) == IsNormalized::Yes
}

/// A bit per Basic Multilingual Plane character that NFKC leaves alone wherever it stands: a
/// starter (combining class 0) whose quick check is Yes. ASCII, the CJK Unified Ideographs and
/// most CJK punctuation among them; `is_nfkc` skips them with one load and a mask.
static STABLE_STARTERS: LazyLock<Vec<u64>> = LazyLock::new(|| {
    let mut bits = vec![0u64; 0x10000 / 64];
    for c in (0..0x10000u32).filter_map(char::from_u32) {
        let stable = unicode_normalization::char::canonical_combining_class(c) == 0
            && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes;
        if stable {
            bits[c as usize / 64] |= 1 << (c as usize % 64);
        }
    }
    bits
});

fn is_stable_starter(c: char) -> bool {
    let c = c as usize;
    c < 0x10000 && (STABLE_STARTERS[c / 64] >> (c % 64)) & 1 == 1
}

/// Whether NFKC writes `c`, wherever it stands, as characters that are neither letters nor
/// digits and that leave their neighbours alone, so that the letters of a text are those of
/// the text without it: a space and combining marks (the spacing accents ´ ¨ ¯, which a
/// Chinese page writes for an apostrophe), or stable starters only (￥ as ¥, ″ as two primes).
/// A space composes with nothing, and a stable starter with nothing before it; a mark that
/// follows `c` would be reordered with its marks, but a mark is not a stable starter, and
/// sends the text to the general path itself. `ASCII_FORMS` spells none of them, and
/// `Keep::push` writes nothing for them.
fn is_silent_form(c: char) -> bool {
    if is_stable_starter(c) {
        return false;
    }
    let spelled: Vec<char> = std::iter::once(c).nfkd().collect();
    if spelled.iter().any(|d| d.is_alphanumeric()) {
        return false;
    }
    match spelled.split_first() {
        Some((' ', marks)) if !marks.is_empty() => marks
            .iter()
            .all(|&mark| unicode_normalization::char::canonical_combining_class(mark) != 0),
        Some(_) => spelled.iter().all(|&d| is_stable_starter(d)),
        None => false,
    }
}

/// The characters of the Basic Multilingual Plane outside ASCII whose compatibility
/// decomposition is ASCII, with it: the ideographic and no-break spaces, the ellipsis (`...`),
/// the trade mark sign (`TM`), superscript digits and the like. A bit per character says which
/// (most characters of a Chinese page are looked up and are not one).
struct AsciiForms {
    bits: Vec<u64>,
    spelled: HashMap<char, String>,
}

static ASCII_FORMS: LazyLock<AsciiForms> = LazyLock::new(|| {
    let spelled: HashMap<char, String> = (0x80..0x10000u32)
        .filter_map(char::from_u32)
        .filter_map(|c| {
            let spelled: String = std::iter::once(c).nfkd().collect();
            spelled.is_ascii().then_some((c, spelled))
        })
        .collect();
    let mut bits = vec![0u64; 0x10000 / 64];
    for &c in spelled.keys() {
        bits[c as usize / 64] |= 1 << (c as usize % 64);
    }
    AsciiForms { bits, spelled }
});

/// Every ASCII character, in order: `&EVERY_ASCII[b..b + 1]` is the one-character string of
/// byte `b`.
const EVERY_ASCII: &str = match str::from_utf8(&every_ascii()) {
    Ok(ascii) => ascii,
    Err(_) => panic!("ASCII is UTF-8"),
};

const fn every_ascii() -> [u8; 128] {
    let mut bytes = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        bytes[b] = b as u8;
        b += 1;
    }
    bytes
}

impl AsciiForms {
    fn spelling(&self, c: char) -> Option<&str> {
        let at = c as usize;
        if at >= 0x10000 || (self.bits[at / 64] >> (at % 64)) & 1 == 0 {
            return None;
        }
        // The full-width forms of ASCII (U+FF01-U+FF5E, the commas and colons of Chinese
        // text) are their ASCII character 0xFEE0 below, without hashing: the lookup was 2.7%
        // of the signature stage on Chinese pages.
        if let Some(ascii @ 0x21..=0x7E) = at.checked_sub(0xFEE0) {
            return EVERY_ASCII.get(ascii..=ascii);
        }
        self.spelled.get(&c).map(String::as_str)
    }
}

/// The text with each character of `ASCII_FORMS` spelled in ASCII. The full-width forms, the
/// most common by far, are narrowed without a lookup.
fn spell_ascii_forms(text: &str) -> Cow<'_, str> {
    let forms = &*ASCII_FORMS;
    let Some((first, _)) = text
        .char_indices()
        .find(|&(_, c)| forms.spelling(c).is_some())
    else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if is_wide(c) {
            out.push(narrow(c));
        } else if let Some(spelled) = forms.spelling(c) {
            out.push_str(spelled);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn narrow_all(text: Cow<'_, str>) -> Cow<'_, str> {
    if text.chars().any(is_wide) {
        Cow::Owned(text.chars().map(narrow).collect())
    } else {
        text
    }
}

/// Traditional-to-Simplified conversion, one run of Han characters at a time, and only the
/// runs with a character that could change. The same text as converting the whole: every key
/// of the T2S dictionaries (TSPhrases, TSCharacters) is Han characters only, so no match starts
/// outside a run or crosses its end; and every phrase that changes holds a character that
/// changes alone or is one of `TRADITIONAL`'s listed exceptions. Spares the dictionary lookup
/// at each Latin letter, digit and punctuation mark of a Chinese page; a run goes through the
/// table (`T2sTable`), or the converter when it holds a character beyond the Basic
/// Multilingual Plane.
fn simplify_han_runs<'a>(text: &'a str, converter: &OpenCC) -> Cow<'a, str> {
    let could_change = |c: char| is_traditional(c) || (c > '\u{FFFF}' && is_han(c));
    let mut out = String::new();
    let mut copied = 0;
    // (start, whether it holds a character that could change) of the current Han run.
    let mut run: Option<(usize, bool)> = None;
    let end = std::iter::once((text.len(), ' '));
    for (at, c) in text.char_indices().chain(end) {
        if is_han(c) {
            let start = run.map_or(at, |(start, _)| start);
            run = Some((start, run.is_some_and(|(_, any)| any) || could_change(c)));
            continue;
        }
        if let Some((start, true)) = run {
            let run = &text[start..at];
            let converted = match &*T2S_TABLE {
                Some(table) => table.convert_run(run),
                None => None,
            }
            .unwrap_or_else(|| converter.convert(run));
            if converted != run {
                out.push_str(&text[copied..start]);
                out.push_str(&converted);
                copied = at;
            }
        }
        run = None;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

fn replace<'a>(text: Cow<'a, str>, step: impl Fn(&str) -> Cow<'_, str>) -> Cow<'a, str> {
    match step(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(changed) => Cow::Owned(changed),
    }
}

/// Full-width ASCII forms and the ideographic space.
fn is_wide(c: char) -> bool {
    matches!(c, '\u{FF01}'..='\u{FF5E}' | '\u{3000}')
}

fn narrow(c: char) -> char {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        '\u{3000}' => ' ',
        other => other,
    }
}

fn needs_collapsing(text: &str) -> bool {
    let mut previous_space = true; // a leading space needs trimming
    for c in text.chars() {
        let space = c.is_whitespace();
        if space && (previous_space || c != ' ') {
            return true;
        }
        previous_space = space;
    }
    previous_space && !text.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(step: &str) -> Cleaning {
        Cleaning {
            html: step == "html",
            nfkc: step == "nfkc",
            width: step == "width",
            t2s: if step == "t2s" {
                T2s::Characters
            } else {
                T2s::Off
            },
            case: step == "case",
            cjk_only: step == "cjk_only",
            space: step == "space",
        }
    }

    #[test]
    fn each_step_alone() {
        let c = |text: &str, step: &str| clean(text, &only(step)).into_owned();
        assert_eq!(
            c("<p>Hello <b>big</b> world</p>", "html"),
            " Hello big world "
        );
        assert_eq!(c("ﬁle ① ＡＢＣ１２３", "nfkc"), "file 1 ABC123");
        assert_eq!(c("ＡＢＣ！　１２３，中文", "width"), "ABC! 123,中文");
        assert_eq!(c("軟體與檔案", "t2s"), "软体与档案");
        // Simplified text is left as it is: converting is idempotent, so a copy that needed it
        // meets an original that did not.
        assert_eq!(c("可执行程序的文件", "t2s"), "可执行程序的文件");
        let taiwan = Cleaning {
            t2s: T2s::Taiwan,
            ..only("")
        };
        assert_eq!(clean("軟體與檔案", &taiwan), "软件与文件");
        assert!(is_traditional('體') && !is_traditional('体') && !is_traditional('a'));
        assert_eq!(c("請回覆", "t2s"), "请回复");
        assert_eq!(
            c("回覆", "t2s"),
            "回复",
            "a phrase of characters unchanged alone"
        );
        let count: u32 = TRADITIONAL.iter().map(|w| w.count_ones()).sum();
        assert!(count > 2000, "{count}");
        assert_eq!(c("ÉCOLE Straße", "case"), "école straße");
        assert_eq!(c("中文 text 混合 123", "cjk_only"), "中文混合");
        assert_eq!(c("  a \t b\n\n c  ", "space"), "a b c");
    }

    #[test]
    fn nothing_to_do_borrows() {
        // The default cleaning: every step on but cjk_only.
        let all = super::super::FeatureOptions::default().cleaning;
        assert!(matches!(clean("plain text 中文", &all), Cow::Borrowed(_)));
        assert!(matches!(clean("", &all), Cow::Borrowed(_)));
    }

    #[test]
    fn common_han_are_caseless_letters() {
        for c in ('\u{4E00}'..='\u{9FFF}').filter(|&c| is_common_han(c)) {
            assert!(c.is_alphanumeric() && !c.is_uppercase(), "{c}");
            assert!(c.to_lowercase().eq([c]), "{c}");
        }
        assert!(!is_common_han('\u{3400}') && !is_common_han('a'));
    }

    #[test]
    fn letters_are_the_cleaned_texts_letters() {
        // Oracle: the full cleaning, then the filter; texts that take each shortcut and each
        // exception (capital sigma, a title-case letter alone, Kangxi radicals that NFKC turns
        // into Traditional characters, full-width forms with a combining mark, entities).
        let default = super::super::FeatureOptions::default().cleaning;
        let options = [
            default.clone(),
            Cleaning {
                case: false,
                ..default.clone()
            },
            Cleaning {
                nfkc: false,
                ..default.clone()
            },
            Cleaning {
                cjk_only: true,
                ..default.clone()
            },
            Cleaning {
                t2s: T2s::Taiwan,
                ..default.clone()
            },
            Cleaning {
                nfkc: false,
                width: false,
                t2s: T2s::Off,
                ..default.clone()
            },
            Cleaning {
                html: false,
                ..default.clone()
            },
        ];
        let texts = [
            "Plain ASCII, with Punctuation!",
            "ΟΔΟΣ Σ σ ΣΊΣΥΦΟΣ",
            "ǅemal ǈ word",
            "İstanbul ẞ Straße",
            "⾞⾺ 車馬 ⼀",
            "ＡＢＣ\u{301} ｘ\u{3000}ｙ，中文：好",
            "&nbsp;x&amp;y<b>Z</b> &#x8ECA;",
            "軟體與檔案 回覆 and Debian 套件 𠀀𪚥",
            "curly ‘quotes’ — and café",
            "",
        ];
        let mut out = String::new();
        for cleaning in &options {
            for text in texts {
                alphanumerics(text, cleaning, &mut out);
                let expected: String = clean(text, cleaning)
                    .chars()
                    .filter(|c| c.is_alphanumeric())
                    .collect();
                assert_eq!(out, expected, "{text:?} with {cleaning:?}");
            }
        }
        assert_eq!(
            clean("⾞", &default),
            "车",
            "NFKC gives 車, then the script step"
        );
        // Random mixes of what the one pass takes (ASCII, Simplified Han, CJK punctuation,
        // ASCII forms of every kind) and what sends a text to the steps one after the other
        // (Traditional characters, capitals beyond ASCII, combining marks, characters beyond
        // the Basic Multilingual Plane, markup and entities), under every cleaning.
        let pieces = [
            "a", "Z", "9", " ", "-", "中文", "软件", "。", "「", "，", "ＡＢ", "ｚ", "\u{3000}",
            "\u{A0}", "…", "™", "²", "①", "ﬁ", "體", "回覆", "É", "é", "Σ", "ǅ", "\u{301}", "𠀀",
            "𝒜", "<b>", "&amp;", "&#x4E2D;", "ß", "İ", "⾞", "乾燥", "頭髮", "這個", "瞭解",
            "沈默", "軟體", "檔", "後", "㐀", "豈", "ж", "Ж", "ñ", "한", "ア", "鴥", "駉", "𡵓",
            "反", "覆", "反覆", "於", "乾", "乾隆", "藉口", "藉", "´", "¨", "¯", "￥", "″", "‑",
            "゛", "·", "\u{316}", "\u{345}", "\u{1100}", "\u{1161}", "ﾞ",
        ];
        let mut random = crate::rng::SplitMix64(13);
        for case in 0..4000 {
            let text: String = (0..random.below(16))
                .map(|_| pieces[random.below(pieces.len())])
                .collect();
            for cleaning in &options {
                alphanumerics(&text, cleaning, &mut out);
                let expected: String = clean(&text, cleaning)
                    .chars()
                    .filter(|c| c.is_alphanumeric())
                    .collect();
                assert_eq!(out, expected, "case {case}: {text:?} with {cleaning:?}");
            }
        }
    }

    #[test]
    fn every_phrase_is_han_and_each_that_changes_holds_a_traditional_character() {
        let table = T2S_TABLE.as_ref().expect("the T2S table builds");
        let mut phrases = 0;
        for (key, value) in table.phrases() {
            phrases += 1;
            // Han characters of the Basic Multilingual Plane only: no phrase crosses the end of
            // a Han run, and each starts with a character of class `PHRASE_START`.
            assert!(key.chars().all(|c| is_han(c) && c <= '\u{FFFF}'), "{key}");
            let first = key.chars().next().expect("no empty key");
            assert!(
                CHAR_CLASSES[first as usize] & CharClass::PHRASE_START != 0,
                "{key}"
            );
            if key != value {
                assert!(key.chars().any(is_traditional), "{key} -> {value}");
            }
        }
        assert!(phrases > 200, "{phrases} phrase keys");
    }

    #[test]
    fn han_runs_convert_as_the_whole_text_does() {
        // Oracle: OpenCC over the whole text. Random mixes of Traditional and Simplified
        // characters, phrases that only change together, Latin letters and punctuation.
        let Ok(converter) = &*T2S else {
            panic!("the T2S dictionaries load");
        };
        let mut pieces: Vec<String> = [
            "軟體", "檔案", "回覆", "瞭解", "沈默", "藉口", "牴觸", "衹是", "這個", "网络", "程序",
            "乾燥", "乾隆", "頭髮", "發展", "𠀀", "a", "Debian ", "，", "。", " ", "1", "的", "裡",
            "著", "後",
        ]
        .map(String::from)
        .to_vec();
        // Every phrase key, its first and last halves (so phrases overlap and break off), and
        // characters that change alone.
        let table = T2S_TABLE.as_ref().expect("the T2S table builds");
        for (key, _) in table.phrases() {
            let middle = key
                .char_indices()
                .nth(key.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            pieces.extend([
                key.to_string(),
                key[..middle].to_string(),
                key[middle..].to_string(),
            ]);
        }
        pieces.extend(table.changed_alone().step_by(97).map(String::from));
        let mut random = crate::rng::SplitMix64(9);
        for case in 0..20_000 {
            let text: String = (0..random.below(40))
                .map(|_| pieces[random.below(pieces.len())].as_str())
                .collect();
            assert_eq!(
                simplify_han_runs(&text, converter),
                converter.convert(&text),
                "case {case}: {text:?}"
            );
        }
    }

    #[test]
    fn the_nfkc_step_is_nfkc() {
        // Oracle: the crate's NFKC of the whole text. Random mixes of what the shortcuts
        // handle (ASCII forms spelled out, starters skipped by the check) and what they must
        // leave to the full normalisation (combining marks after spelled-out letters, Hangul
        // jamo, compatibility ideographs and ligatures).
        let pieces = [
            "a", "Z", " ", "ＡＢ", "ｘ", "\u{3000}", "\u{A0}", "…", "™", "²", "①", "ﬁ", "\u{301}",
            "\u{308}", "\u{323}", "e", "中文", "。", "「", "」", "⾞", "\u{F96B}", "\u{1100}",
            "\u{1161}", "\u{11A8}", "가", "ﾄ", "ｶﾞ", "µ", "´", "½", "\u{2011}",
        ];
        let step = only("nfkc");
        let mut random = crate::rng::SplitMix64(11);
        for case in 0..5000 {
            let text: String = (0..random.below(12))
                .map(|_| pieces[random.below(pieces.len())])
                .collect();
            let expected: String = text.nfkc().collect();
            assert_eq!(clean(&text, &step), expected, "case {case}: {text:?}");
        }
        for (&c, spelled) in &ASCII_FORMS.spelled {
            if is_wide(c) {
                assert_eq!(narrow(c).to_string(), *spelled, "{c:?}");
            }
        }
        assert_eq!(ASCII_FORMS.spelling('…'), Some("..."));
        assert_eq!(ASCII_FORMS.spelling('中'), None);
        // Oracle: each character's own NFKD, where it is ASCII, for every character beyond
        // ASCII of the Basic Multilingual Plane (the full-width forms take a shortcut).
        for c in (0x80..0x10000u32).filter_map(char::from_u32) {
            let nfkd: String = std::iter::once(c).nfkd().collect();
            let expected = nfkd.is_ascii().then_some(nfkd.as_str());
            assert_eq!(ASCII_FORMS.spelling(c), expected, "{c:?}");
        }
        assert!(is_stable_starter('中') && is_stable_starter('a') && is_stable_starter('。'));
        assert!(!is_stable_starter('\u{301}') && !is_stable_starter('\u{A0}'));
    }

    #[test]
    fn whitespace_detection() {
        assert!(!needs_collapsing("a b c"));
        assert!(needs_collapsing(" a"));
        assert!(needs_collapsing("a "));
        assert!(needs_collapsing("a  b"));
        assert!(needs_collapsing("a\nb"));
        assert!(!needs_collapsing(""));
    }

    #[test]
    fn full_width_punctuation_and_letters_narrow() {
        let all_width = only("width");
        assert_eq!(clean("（Ｈｅｌｌｏ）", &all_width), "(Hello)");
        // CJK punctuation that has no ASCII form stays.
        assert_eq!(clean("你好。", &all_width), "你好。");
    }
}
