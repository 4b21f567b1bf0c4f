//! Cleaning: what the fingerprint should not see (markup, compatibility forms, width, script
//! variant, case, spacing), removed before features are taken. Each step is switchable
//! (`FeatureOptions::cleaning`) and runs in the order of the fields there; a step that would
//! change nothing does not copy the text.

use std::borrow::Cow;
use std::sync::LazyLock;

use ferrous_opencc::OpenCC;
use ferrous_opencc::config::BuiltinConfig;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

use super::is_han;
use super::markup::strip_markup;
use super::options::{Cleaning, OptionError, T2s};

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

/// The characters of the Basic Multilingual Plane's Han blocks that the conversion changes on
/// their own: a text with none of them is not Traditional and skips the conversion, which is
/// most of its cost (Simplified and non-Chinese text go through at no charge). Found by
/// converting every character once, one per line so no two form a phrase.
static TRADITIONAL: LazyLock<Vec<u64>> = LazyLock::new(|| {
    let mut bits = vec![0u64; 0x10000 / 64];
    let Ok(converter) = &*T2S else {
        return bits;
    };
    let han: Vec<char> = ('\u{3400}'..='\u{9FFF}')
        .chain('\u{F900}'..='\u{FAFF}')
        .filter(|&c| is_han(c))
        .collect();
    let lines: String = han.iter().flat_map(|&c| [c, '\n']).collect();
    let converted = converter.convert(&lines);
    let changed: Vec<char> = han
        .iter()
        .zip(converted.split('\n'))
        .filter(|(c, out)| out.chars().ne(std::iter::once(**c)))
        .map(|(c, _)| *c)
        .collect();
    // Characters the conversion keeps alone but changes inside phrases (回覆 -> 回复, 瞭解 ->
    // 了解, 沈默 -> 沉默, 藉口 -> 借口, 牴觸 -> 抵触, 衹 in 衹是), from OpenCC's TSPhrases.
    for c in changed
        .into_iter()
        .chain(['覆', '瞭', '沈', '藉', '牴', '衹'])
    {
        bits[c as usize / 64] |= 1 << (c as usize % 64);
    }
    bits
});

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

/// The cleaned text.
pub fn clean<'a>(text: &'a str, cleaning: &Cleaning) -> Cow<'a, str> {
    let mut text = Cow::Borrowed(text);
    if cleaning.html {
        text = replace(text, strip_markup);
    }
    if cleaning.nfkc && is_nfkc_quick(text.chars()) != IsNormalized::Yes {
        text = Cow::Owned(text.nfkc().collect());
    }
    if cleaning.width && text.chars().any(is_wide) {
        text = Cow::Owned(text.chars().map(narrow).collect());
    }
    let converter = match cleaning.t2s {
        T2s::Off => None,
        T2s::Characters => text
            .chars()
            .any(|c| c >= '\u{3400}' && (is_traditional(c) || (c > '\u{FFFF}' && is_han(c))))
            .then_some(&*T2S),
        T2s::Taiwan => text.chars().any(is_han).then_some(&*TW2SP),
    };
    if let Some(Ok(converter)) = converter {
        let converted = converter.convert(&text);
        if converted != text {
            text = Cow::Owned(converted);
        }
    }
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
