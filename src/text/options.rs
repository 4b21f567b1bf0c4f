//! Feature options: how a document's text becomes weighted features.
//!
//! Written as one string of `key=value` pairs separated by commas, so SQL carries them as a
//! literal (`simhash(text, 'mode=chars,n=3')`) and the UDFs stay stateless: the same plan runs on
//! any machine that has the functions registered. Keys not given keep their defaults (a key
//! given twice keeps its last value); the canonical form (`Display`) lists every key that has a
//! value (`idf` and `stop_words` only when set), and is what `summary.json` records.

use std::fmt;
use std::path::PathBuf;

use crate::error::echo_quoted;
use crate::fingerprint::Width;

/// How a cleaned text is cut into features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Character n-grams by script: bigrams within runs of Han characters, trigrams within
    /// runs of other letters and digits (`n` is not used). The best or near-best pair F1 on
    /// every evaluation set (docs/EVALUATION.md).
    Auto,
    /// jieba segmentation, the `top_k` words by TF-IDF (the original system).
    JiebaTfidf,
    /// jieba segmentation, every word weighted by term frequency x IDF.
    JiebaTf,
    /// Unicode words (UAX #29) weighted by term frequency, stop words left out.
    Words,
    /// Overlapping runs of `n` words (w-shingling), stop words kept: word order counts.
    Shingles,
    /// Overlapping runs of `n` letters, digits or Han characters (punctuation and spaces dropped).
    Chars,
}

impl Mode {
    const ALL: [(Mode, &'static str); 6] = [
        (Mode::Auto, "auto"),
        (Mode::JiebaTfidf, "jieba_tfidf"),
        (Mode::JiebaTf, "jieba_tf"),
        (Mode::Words, "words"),
        (Mode::Shingles, "shingles"),
        (Mode::Chars, "chars"),
    ];

    pub fn name(self) -> &'static str {
        Mode::ALL
            .iter()
            .find(|(mode, _)| *mode == self)
            .map_or("auto", |(_, name)| name)
    }

    fn parse(value: &str) -> Result<Self, OptionError> {
        Mode::ALL
            .iter()
            .find(|(_, name)| *name == value)
            .map(|(mode, _)| *mode)
            .ok_or_else(|| {
                let names: Vec<&str> = Mode::ALL.iter().map(|(_, name)| *name).collect();
                OptionError(format!(
                    "feature option mode={} is not a mode; valid modes: {}",
                    echo_quoted(value),
                    names.join(", ")
                ))
            })
    }
}

/// What happens to a document with no features at all (empty, whitespace, punctuation only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmptyPolicy {
    /// No fingerprint: counted in `summary.json`, left out of matching, kept in `dedup`.
    Skip,
    /// Fingerprinted like a short text, by the exact hash of an empty feature sequence: all
    /// such documents are exact duplicates of each other.
    Exact,
}

/// Traditional-to-Simplified conversion (OpenCC's dictionaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum T2s {
    Off,
    /// `on`: characters (OpenCC `t2s`); Simplified text is left alone, so it costs nothing there.
    Characters,
    /// `tw`: characters and Taiwan vocabulary (OpenCC `tw2sp`: 軟體 -> 软件, 檔案 -> 文件), for
    /// pairing zh-TW and zh-CN translations; converts every Chinese text, about 1 ms a page.
    Taiwan,
}

impl T2s {
    pub fn name(self) -> &'static str {
        match self {
            T2s::Off => "off",
            T2s::Characters => "on",
            T2s::Taiwan => "tw",
        }
    }
}

/// Text cleaning applied before features are taken, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cleaning {
    /// Remove markup: tags, comments, `<script>` and `<style>` bodies; decode entities.
    pub html: bool,
    /// Unicode NFKC: compatibility forms (ligatures, circled digits, full-width letters) folded.
    pub nfkc: bool,
    /// Full-width ASCII (U+FF01..U+FF5E) and the ideographic space to their ASCII forms.
    pub width: bool,
    /// Traditional Chinese to Simplified.
    pub t2s: T2s,
    /// Lower case (full Unicode mapping).
    pub case: bool,
    /// Keep only Han characters (the original system's filter).
    pub cjk_only: bool,
    /// Collapse runs of whitespace to one space and trim the ends.
    pub space: bool,
}

/// Everything that decides a document's features. Parsed from the option string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FeatureOptions {
    pub mode: Mode,
    /// Keywords kept per document in `jieba_tfidf` (and `auto` on Chinese text).
    pub top_k: usize,
    /// Length of a shingle (words) or of a character n-gram.
    pub n: usize,
    /// A jieba-format IDF file (`word idf` per line) replacing jieba's table.
    pub idf: Option<PathBuf>,
    /// A stop-word file (one word per line) replacing jieba's list.
    pub stop_words: Option<PathBuf>,
    /// Documents with fewer distinct features than this are matched only as exact copies.
    pub min_features: usize,
    pub empty: EmptyPolicy,
    /// Fingerprint width: 64 (UInt64) or 128 (FixedSizeBinary(16), big-endian).
    pub width: Width,
    pub cleaning: Cleaning,
}

impl Default for FeatureOptions {
    /// The defaults, chosen by measurement (docs/EVALUATION.md).
    fn default() -> Self {
        Self {
            mode: Mode::Auto,
            top_k: 50,
            n: 3,
            idf: None,
            stop_words: None,
            min_features: 5,
            empty: EmptyPolicy::Skip,
            width: Width::Bits64,
            cleaning: Cleaning {
                html: true,
                nfkc: true,
                width: true,
                t2s: T2s::Characters,
                case: true,
                cjk_only: false,
                space: true,
            },
        }
    }
}

/// A bad option string; the message names the option and lists what is valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError(pub String);

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OptionError {}

/// Every key, in canonical order.
const KEYS: [&str; 16] = [
    "mode",
    "bits",
    "top_k",
    "n",
    "idf",
    "stop_words",
    "min_features",
    "empty",
    "html",
    "nfkc",
    "width",
    "t2s",
    "case",
    "cjk_only",
    "space",
    "default",
];

/// The largest `top_k` and `n` accepted: beyond them nothing changes but the cost.
const MAX_COUNT: usize = 100_000;

impl FeatureOptions {
    /// Combinations that parse but cannot mean what they say.
    pub fn check(&self) -> Result<(), OptionError> {
        if self.n == 0 || self.top_k == 0 {
            return Err(OptionError(format!(
                "feature options n={}, top_k={}, bits={} are out of range",
                self.n, self.top_k, self.width
            )));
        }
        if self.mode == Mode::JiebaTfidf && self.top_k < self.min_features {
            return Err(OptionError(format!(
                "top_k={} is below min_features={}: every document would have too few features \
                 for a SimHash; raise top_k or lower min_features",
                self.top_k, self.min_features
            )));
        }
        Ok(())
    }

    /// Parses `key=value,key=value`; an empty string gives the defaults. `default` alone (or
    /// `default=on`) is accepted so a pipeline can spell out that it wants the defaults.
    pub fn parse(options: &str) -> Result<Self, OptionError> {
        let mut parsed = Self::default();
        // key -> its first value: an option given twice is refused rather than the last one
        // silently winning (`mode=chars,mode=words` is a typo, not a choice).
        let mut given: Vec<(&str, &str)> = Vec::new();
        for item in options.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = split_item(item)? else {
                continue;
            };
            if let Some((_, first)) = given.iter().find(|(k, _)| *k == key) {
                return Err(OptionError(format!(
                    "feature option {} is given twice ({key}={}, then {key}={}); give each \
                     option once",
                    echo_quoted(key),
                    crate::error::echo(first),
                    crate::error::echo(value)
                )));
            }
            given.push((key, value));
            let c = &mut parsed.cleaning;
            match key {
                "mode" => parsed.mode = Mode::parse(value)?,
                "bits" => parsed.width = choice(key, value, BITS_VALUES)?,
                "top_k" => parsed.top_k = count(key, value, 1)?,
                "n" => parsed.n = count(key, value, 1)?,
                "min_features" => parsed.min_features = count(key, value, 0)?,
                "idf" => parsed.idf = path(key, value)?,
                "stop_words" => parsed.stop_words = path(key, value)?,
                "empty" => parsed.empty = choice(key, value, EMPTY_VALUES)?,
                "html" => c.html = switch(key, value)?,
                "nfkc" => c.nfkc = switch(key, value)?,
                "width" => c.width = switch(key, value)?,
                "t2s" => c.t2s = choice(key, on_or_off(value), T2S_VALUES)?,
                "case" => c.case = switch(key, value)?,
                "cjk_only" => c.cjk_only = switch(key, value)?,
                "space" => c.space = switch(key, value)?,
                "default" if switch(key, value)? => {}
                "default" => {
                    return Err(OptionError(
                        "feature option default=off means nothing; leave it out".into(),
                    ));
                }
                _ => {
                    return Err(OptionError(format!(
                        "unknown feature option {}; valid options: {}",
                        echo_quoted(key),
                        KEYS.join(", ")
                    )));
                }
            }
        }
        Ok(parsed)
    }
}

/// `bits`'s values, as its error lists them.
const BITS_VALUES: &[(&str, Width)] = &[("64", Width::Bits64), ("128", Width::Bits128)];

/// `empty`'s values, as its error lists them.
const EMPTY_VALUES: &[(&str, EmptyPolicy)] =
    &[("skip", EmptyPolicy::Skip), ("exact", EmptyPolicy::Exact)];

/// `t2s`'s values, in the order its error lists them (`on_or_off` folds the other spellings).
const T2S_VALUES: &[(&str, T2s)] = &[
    ("on", T2s::Characters),
    ("off", T2s::Off),
    ("tw", T2s::Taiwan),
];

/// An item's trimmed key and value; `None` for a bare `default`, an error for other bare words.
fn split_item(item: &str) -> Result<Option<(&str, &str)>, OptionError> {
    match item.split_once('=') {
        Some((key, value)) => Ok(Some((key.trim(), value.trim()))),
        None if item == "default" => Ok(None),
        None => Err(OptionError(format!(
            "feature option {} has no value; write key=value, e.g. mode=chars \
             (valid options: {})",
            echo_quoted(item),
            KEYS.join(", ")
        ))),
    }
}

/// What `table` pairs with `value`, or an error naming `key=value` and listing the valid names.
fn choice<T: Copy>(key: &str, value: &str, table: &[(&str, T)]) -> Result<T, OptionError> {
    table
        .iter()
        .find(|(name, _)| *name == value)
        .map(|&(_, chosen)| chosen)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|(name, _)| *name).collect();
            OptionError(format!(
                "feature option {key}={} is not valid; valid values: {}",
                echo_quoted(value),
                names.join(", ")
            ))
        })
}

/// Any spelling of on or off as `on` or `off`, other values unchanged, so a table can list two.
fn on_or_off(value: &str) -> &str {
    match parse_switch(value) {
        Some(true) => "on",
        Some(false) => "off",
        None => value,
    }
}

fn count(key: &str, value: &str, min: usize) -> Result<usize, OptionError> {
    value
        .parse::<usize>()
        .ok()
        .filter(|v| (min..=MAX_COUNT).contains(v))
        .ok_or_else(|| {
            OptionError(format!(
                "feature option {key}={} must be a whole number from {min} to {MAX_COUNT}",
                echo_quoted(value)
            ))
        })
}

/// An on/off option's value, or the error naming it.
fn switch(key: &str, value: &str) -> Result<bool, OptionError> {
    parse_switch(value).ok_or_else(|| {
        OptionError(format!(
            "feature option {key}={} must be on or off",
            echo_quoted(value)
        ))
    })
}

/// The spellings of on and off that every switch accepts.
fn parse_switch(value: &str) -> Option<bool> {
    match value {
        "on" | "true" | "yes" | "1" => Some(true),
        "off" | "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

fn path(key: &str, value: &str) -> Result<Option<PathBuf>, OptionError> {
    if value.is_empty() {
        return Err(OptionError(format!(
            "feature option {key}= needs a file path"
        )));
    }
    Ok(Some(PathBuf::from(value)))
}

impl fmt::Display for FeatureOptions {
    /// The canonical form: every key in a fixed order, so equal options print equally.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |b: bool| if b { "on" } else { "off" };
        let c = &self.cleaning;
        write!(
            f,
            "mode={},bits={},top_k={},n={},",
            self.mode.name(),
            self.width,
            self.top_k,
            self.n
        )?;
        if let Some(idf) = &self.idf {
            write!(f, "idf={},", idf.display())?;
        }
        if let Some(stop_words) = &self.stop_words {
            write!(f, "stop_words={},", stop_words.display())?;
        }
        let empty = match self.empty {
            EmptyPolicy::Skip => "skip",
            EmptyPolicy::Exact => "exact",
        };
        write!(
            f,
            "min_features={},empty={empty},html={},nfkc={},width={},t2s={},case={},cjk_only={},space={}",
            self.min_features,
            on(c.html),
            on(c.nfkc),
            on(c.width),
            c.t2s.name(),
            on(c.case),
            on(c.cjk_only),
            on(c.space)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_string_is_the_defaults() {
        assert_eq!(
            FeatureOptions::parse("").unwrap(),
            FeatureOptions::default()
        );
        assert_eq!(
            FeatureOptions::parse(" default ").unwrap(),
            FeatureOptions::default()
        );
    }

    #[test]
    fn keys_set_their_fields() {
        let o = FeatureOptions::parse(
            "mode=shingles, n=4,top_k=20,min_features=0,empty=exact,html=off,t2s=on,idf=/x/idf.txt",
        )
        .unwrap();
        assert_eq!(o.mode, Mode::Shingles);
        assert_eq!((o.n, o.top_k, o.min_features), (4, 20, 0));
        assert_eq!(o.empty, EmptyPolicy::Exact);
        assert!(!o.cleaning.html && o.cleaning.t2s == T2s::Characters);
        let tw = FeatureOptions::parse("t2s=tw").unwrap();
        assert_eq!(tw.cleaning.t2s, T2s::Taiwan);
        assert!(tw.to_string().contains(",t2s=tw,"));
        assert!(
            FeatureOptions::parse("t2s=hk")
                .unwrap_err()
                .0
                .contains("on, off, tw")
        );
        assert_eq!(o.idf, Some(PathBuf::from("/x/idf.txt")));
    }

    #[test]
    fn canonical_form_round_trips() {
        for text in [
            "",
            "mode=chars,n=2,case=off",
            "stop_words=/s.txt,empty=exact",
        ] {
            let parsed = FeatureOptions::parse(text).unwrap();
            let again = FeatureOptions::parse(&parsed.to_string()).unwrap();
            assert_eq!(parsed, again, "{text}");
        }
        assert!(
            FeatureOptions::default()
                .to_string()
                .starts_with("mode=auto,")
        );
    }

    #[test]
    fn errors_name_the_option_and_list_the_valid_ones() {
        let err = |s: &str| FeatureOptions::parse(s).unwrap_err().0;
        let e = err("mode=chars,n=3,mode=words");
        assert!(
            e.contains("given twice") && e.contains("mode=chars, then mode=words"),
            "{e}"
        );
        assert!(err("html=off, html=off").contains("given twice"));
        let e = err("mode=bigrams");
        assert!(
            e.contains("\"bigrams\"")
                && e.contains("jieba_tfidf, jieba_tf, words, shingles, chars"),
            "{e}"
        );
        let e = err("colour=red");
        assert!(
            e.contains("\"colour\"") && e.contains("mode, bits, top_k, n"),
            "{e}"
        );
        let e = err("n=0");
        assert!(e.contains("n=\"0\"") && e.contains("from 1"), "{e}");
        let e = err("top_k=lots");
        assert!(e.contains("top_k"), "{e}");
        let e = err("html=maybe");
        assert!(e.contains("html") && e.contains("on or off"), "{e}");
        let e = err("chars");
        assert!(e.contains("\"chars\"") && e.contains("key=value"), "{e}");
        let e = err("empty=drop");
        assert!(e.contains("skip, exact"), "{e}");
        let e = err("idf=");
        assert!(e.contains("idf"), "{e}");
    }

    #[test]
    fn long_values_are_cut_in_errors() {
        let err = |s: &str| FeatureOptions::parse(s).unwrap_err().0;
        let long = "x".repeat(120_000);
        for text in [
            format!("mode={long}"),
            format!("html={long}"),
            format!("top_k={long}"),
            format!("{long}=1"),
            long.clone(),
        ] {
            let e = err(&text);
            let start: String = e.chars().take(600).collect();
            assert!(e.len() < 600, "{} bytes: {start}", e.len());
            assert!(e.contains("more characters)"), "{e}");
        }
    }
}
