//! Text to weighted features to fingerprint: what a document "says", independent of how it is
//! matched.
//!
//! A document is cleaned (`clean`: markup, NFKC, width, Traditional script, case, spacing), cut
//! into features by the chosen `Mode` (jieba TF-IDF keywords, jieba words, Unicode words, word
//! shingles or character n-grams) and the weighted features vote on the 64 bits (`SimHasher`).
//! Short-text policy: a document with fewer than `min_features` distinct features is too small
//! for its SimHash to mean anything (one changed word moves it by a quarter of the bits, and a
//! handful of shared words puts unrelated short texts together), so its fingerprint is an exact
//! hash of its feature sequence instead: it matches the texts with the same features in the same
//! order and nothing else. A document with no features has no fingerprint, unless `empty=exact`
//! makes all such documents (empty, whitespace, punctuation only) exact duplicates of each other.

mod chars;
mod chinese;
mod clean;
mod distinct_features;
mod markup;
pub mod options;
pub mod sketch;
mod t2s_table;
mod words;

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, LazyLock, Mutex};

use jieba_rs::DEFAULT_STOP_WORDS;
use xxhash_rust::xxh3::Xxh3;

use crate::fingerprint::{CountingSimHasher, SimHasher, feature_hash, feature_hash128};
use distinct_features::DistinctFeatures;
pub use options::{EmptyPolicy, FeatureOptions, Mode, OptionError, T2s};

/// True for Han characters: the CJK Unified Ideographs blocks and their extensions A to I, and
/// the two CJK Compatibility Ideographs blocks.
pub fn is_han(c: char) -> bool {
    matches!(c,
        '\u{4E00}'..='\u{9FFF}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2A6DF}'
        | '\u{2A700}'..='\u{2EE5F}'
        | '\u{2F800}'..='\u{2FA1F}'
        | '\u{30000}'..='\u{323AF}')
}

/// `mode=auto`'s n-gram lengths, chosen by measurement (docs/EVALUATION.md): a Chinese
/// character carries about as much as a short English word, so pairs of them are as specific as
/// triples of letters.
const AUTO_N_HAN: usize = 2;
const AUTO_N_OTHER: usize = 3;

/// Seed of the exact hash given to short texts (XXH3 over the feature hashes in order, as
/// little-endian bytes). Features are hashed with seed 0; a different seed keeps the two apart.
const EXACT_SEED: u64 = 0x6E65_6172_6475_7021;

/// The fingerprint of one document and the number of distinct features it was made of.
/// `simhash` is set for 64-bit options, `simhash128` for `bits=128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    pub simhash: Option<u64>,
    pub simhash128: Option<u128>,
    pub features: u32,
}

impl Fingerprint {
    pub fn is_some(&self) -> bool {
        self.simhash.is_some() || self.simhash128.is_some()
    }
}

/// Options resolved into what fingerprinting needs: files loaded, dictionaries checked.
#[derive(Debug)]
pub struct Featurizer {
    options: FeatureOptions,
    keywords: chinese::Keywords,
    stop_words: BTreeSet<String>,
}

/// Bytes a buffer of `Scratch` keeps between batches at most (`Scratch::trim`): those of a
/// text of about two million characters.
const KEPT_BUFFER_BYTES: usize = 2 << 20;

/// Per-thread working memory, reused across the rows of a batch and, trimmed, from one batch
/// to the next.
#[derive(Default)]
pub struct Scratch {
    hasher: SimHasher,
    counting: CountingSimHasher,
    /// The distinct feature hashes of a document whose features were counted (64 bits, weight
    /// one per occurrence): `counted` says the last document was one.
    distinct: DistinctFeatures,
    counted: bool,
    /// The hashes of a counted document's features in order, repeats included.
    hashes: Vec<u64>,
    /// Otherwise: position of each distinct feature (by its hash, the low 64 bits of a 128-bit
    /// one) in `features`, which keeps first-occurrence order and the summed weight.
    index: FeatureIndex,
    features: Vec<(u128, f64)>,
    buffer: String,
    /// The letters and digits of the cleaned text, for the n-gram modes.
    letters: String,
}

impl Scratch {
    /// Gives back the buffers a long text grew past `KEPT_BUFFER_BYTES`, so that a thread
    /// holds between batches only what ordinary texts need.
    pub fn trim(&mut self) {
        fn trim_vec<T>(vec: &mut Vec<T>) {
            if vec.capacity() * std::mem::size_of::<T>() > KEPT_BUFFER_BYTES {
                *vec = Vec::new();
            }
        }
        fn trim_string(string: &mut String) {
            if string.capacity() > KEPT_BUFFER_BYTES {
                *string = String::new();
            }
        }
        trim_vec(&mut self.hashes);
        trim_vec(&mut self.features);
        trim_string(&mut self.buffer);
        trim_string(&mut self.letters);
        if self.index.capacity() * std::mem::size_of::<(u64, usize)>() > KEPT_BUFFER_BYTES {
            self.index = FeatureIndex::default();
        }
        self.distinct.trim();
    }
}

/// Finds a feature's entry in `Scratch::features` by its (low 64-bit) hash.
type FeatureIndex = HashMap<u64, usize, BuildHasherDefault<IdentityHasher>>;

/// Feature hashes are already uniform 64-bit values: hashing them again to find repeats would
/// only cost time.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

impl Featurizer {
    pub fn new(options: FeatureOptions) -> Result<Self, OptionError> {
        options.check()?;
        clean::prepare(&options.cleaning)?;
        let user_stop_words = match &options.stop_words {
            Some(path) => Some(chinese::load_stop_words(path)?),
            None => None,
        };
        let keywords = chinese::Keywords::load(options.idf.as_deref(), user_stop_words.as_ref())?;
        let stop_words = user_stop_words.unwrap_or_else(|| DEFAULT_STOP_WORDS.clone());
        Ok(Self {
            options,
            keywords,
            stop_words,
        })
    }

    /// The featurizer for an option string, built once per distinct string and shared by every
    /// thread and every batch (the SQL functions receive the string with each batch).
    pub fn cached(options: &str) -> Result<Arc<Self>, OptionError> {
        static CACHE: LazyLock<Mutex<HashMap<String, Arc<Featurizer>>>> =
            LazyLock::new(Default::default);
        let mut cache = CACHE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(found) = cache.get(options) {
            return Ok(Arc::clone(found));
        }
        let built = Arc::new(Self::new(FeatureOptions::parse(options)?)?);
        cache.insert(options.to_string(), Arc::clone(&built));
        Ok(built)
    }

    pub fn options(&self) -> &FeatureOptions {
        &self.options
    }

    /// The text as the features see it, after cleaning.
    pub fn clean<'a>(&self, text: &'a str) -> Cow<'a, str> {
        clean::clean(text, &self.options.cleaning)
    }

    /// The sketch of the distinct features of the document `fingerprint` was last called with
    /// on `scratch` (no second pass over the text): what verifies a candidate pair.
    pub fn sketch(&self, scratch: &Scratch) -> [u8; sketch::SKETCH_BYTES] {
        let mut builder = sketch::SketchBuilder::default();
        if scratch.counted {
            for hash in scratch.distinct.iter() {
                builder.add(hash);
            }
        } else {
            for &(hash, _) in &scratch.features {
                // The low 64 bits: a 64-bit feature hash whole, or half of a 128-bit one.
                builder.add(hash as u64);
            }
        }
        builder.finish()
    }

    /// Fingerprints one document. In the n-gram and word modes at 64 bits the feature hashes
    /// are collected as the text is cut, each occurrence votes once in integer lanes, and the
    /// distinct ones are gathered for their number and the sketch. Otherwise (TF-IDF weights,
    /// 128 bits) repeats are summed in first-seen order and the sum votes once in floating
    /// point; for whole-number weights both give the same bits.
    pub fn fingerprint(&self, text: &str, scratch: &mut Scratch) -> Fingerprint {
        let Scratch {
            hasher,
            counting,
            distinct,
            counted,
            hashes,
            index,
            features,
            buffer,
            letters,
        } = scratch;
        let cleaned = self.cleaned_for_features(text, letters);
        let wide = self.options.width == crate::fingerprint::Width::Bits128;
        *counted = self.counts_occurrences(wide);
        let count = if *counted {
            self.count_features(&cleaned, buffer, counting, distinct, hashes)
        } else {
            self.collect_distinct_features(&cleaned, wide, buffer, index, features);
            features.len()
        };
        let (simhash, simhash128) = if self.matches_exact_copies_only(count) {
            self.exact_sequence_hash(&cleaned, wide, buffer)
        } else if *counted {
            (counting.finish(), None)
        } else {
            float_vote(hasher, features, wide)
        };
        Fingerprint {
            simhash,
            simhash128,
            features: u32::try_from(count).unwrap_or(u32::MAX),
        }
    }

    /// The distinct features of a text with their summed weights, in first-seen order: what
    /// `fingerprint` votes with, as text (for `neardup explain`; the job never needs the strings).
    pub fn distinct_features(&self, text: &str) -> Vec<(String, f64)> {
        let mut letters = String::new();
        let mut buffer = String::new();
        let cleaned = self.cleaned_for_features(text, &mut letters);
        let mut position: HashMap<String, usize> = HashMap::new();
        let mut features: Vec<(String, f64)> = Vec::new();
        self.for_each_feature(&cleaned, &mut buffer, |feature, weight| {
            match position.get(feature) {
                Some(&at) => features[at].1 += weight,
                None => {
                    position.insert(feature.to_string(), features.len());
                    features.push((feature.to_string(), weight));
                }
            }
        });
        features
    }

    /// The text the mode cuts: for n-gram modes only letters and digits, in the cleaning's pass.
    fn cleaned_for_features<'a>(&self, text: &'a str, letters: &'a mut String) -> Cow<'a, str> {
        if matches!(self.options.mode, Mode::Auto | Mode::Chars) {
            clean::alphanumerics(text, &self.options.cleaning, letters);
            Cow::Borrowed(letters.as_str())
        } else {
            self.clean(text)
        }
    }

    /// Whether every feature weighs one per occurrence and votes in integers: the n-gram and
    /// word modes at 64 bits.
    fn counts_occurrences(&self, wide: bool) -> bool {
        !wide && !matches!(self.options.mode, Mode::JiebaTfidf | Mode::JiebaTf)
    }

    /// Votes each feature's occurrences into `counting` and gathers the distinct ones in
    /// `distinct`; returns their number.
    fn count_features(
        &self,
        cleaned: &str,
        buffer: &mut String,
        counting: &mut CountingSimHasher,
        distinct: &mut DistinctFeatures,
        hashes: &mut Vec<u64>,
    ) -> usize {
        hashes.clear();
        if !self.ngram_hashes(cleaned, hashes) {
            self.for_each_feature(cleaned, buffer, |feature, _| {
                hashes.push(feature_hash(feature));
            });
        }
        distinct.reset(hashes.len());
        distinct.add_all(hashes);
        counting.reset();
        counting.add_each(hashes);
        distinct.len()
    }

    /// In the n-gram modes, the hashes of the n-grams by loops that know their length where it
    /// is fixed (`chars::ascii_ngram_hashes`, `chars::script_ngram_hashes`): the same hashes in
    /// the same order as `for_each_feature`. False, with nothing added, where they do not apply
    /// (`mode=chars` over other than ASCII, or n above 5).
    fn ngram_hashes(&self, cleaned: &str, hashes: &mut Vec<u64>) -> bool {
        let auto = match self.options.mode {
            Mode::Auto => true,
            Mode::Chars => false,
            _ => return false,
        };
        let n = match (auto, cleaned.is_ascii()) {
            // An ASCII text has no Han run: all of it is cut as other scripts are.
            (true, true) => AUTO_N_OTHER,
            (true, false) => {
                const { assert!(AUTO_N_HAN == 2 && AUTO_N_OTHER == 3) };
                chars::script_ngram_hashes(cleaned, hashes);
                return true;
            }
            (false, true) => self.options.n,
            (false, false) => return false,
        };
        let bytes = cleaned.as_bytes();
        match n {
            1 => chars::ascii_ngram_hashes::<1>(bytes, hashes),
            2 => chars::ascii_ngram_hashes::<2>(bytes, hashes),
            3 => chars::ascii_ngram_hashes::<3>(bytes, hashes),
            4 => chars::ascii_ngram_hashes::<4>(bytes, hashes),
            5 => chars::ascii_ngram_hashes::<5>(bytes, hashes),
            _ => return false,
        }
        true
    }

    /// Fills `features` with each distinct feature once, in first-seen order, weights summed.
    fn collect_distinct_features(
        &self,
        cleaned: &str,
        wide: bool,
        buffer: &mut String,
        index: &mut FeatureIndex,
        features: &mut Vec<(u128, f64)>,
    ) {
        index.clear();
        features.clear();
        self.for_each_feature(cleaned, buffer, |feature, weight| {
            add_distinct(index, features, hash_at_width(feature, wide), weight);
        });
    }

    /// Whether `count` distinct features are too few for a SimHash (`min_features`, `empty=exact`).
    fn matches_exact_copies_only(&self, count: usize) -> bool {
        let options = &self.options;
        if count == 0 {
            options.empty == EmptyPolicy::Exact
        } else {
            count < options.min_features
        }
    }

    /// A short text's exact hash: a second pass hashes its features in order, repeats included.
    fn exact_sequence_hash(&self, cleaned: &str, wide: bool, buffer: &mut String) -> Simhashes {
        let mut sequence = Xxh3::with_seed(EXACT_SEED);
        self.for_each_feature(cleaned, buffer, |feature, _| {
            if wide {
                sequence.update(&feature_hash128(feature).to_le_bytes());
            } else {
                sequence.update(&feature_hash(feature).to_le_bytes());
            }
        });
        if wide {
            (None, Some(sequence.digest128()))
        } else {
            (Some(sequence.digest()), None)
        }
    }

    /// Calls `add` with each feature of a cleaned text and its weight, in order.
    fn for_each_feature(&self, cleaned: &str, buffer: &mut String, mut add: impl FnMut(&str, f64)) {
        let options = &self.options;
        let n = options.n;
        match options.mode {
            Mode::JiebaTfidf | Mode::JiebaTf => {
                let top_k = if options.mode == Mode::JiebaTf {
                    usize::MAX
                } else {
                    options.top_k
                };
                for (keyword, weight) in self.keywords.extract(cleaned, top_k) {
                    add(&keyword, weight);
                }
            }
            Mode::Words => words::for_each_word(cleaned, &self.stop_words, |w| add(w, 1.0)),
            Mode::Shingles => words::for_each_shingle(cleaned, n, buffer, |s| add(s, 1.0)),
            // `cleaned` is the letters and digits alone for these two (`clean::alphanumerics`).
            Mode::Chars => chars::for_each_ngram(cleaned, n, |g| add(g, 1.0)),
            Mode::Auto => {
                chars::for_each_script_ngram::<AUTO_N_HAN, AUTO_N_OTHER>(cleaned, |g| add(g, 1.0))
            }
        }
    }
}

/// A fingerprint as `(64-bit, 128-bit)`: at most the one of the options' width is set.
type Simhashes = (Option<u64>, Option<u128>);

/// A feature's hash at the fingerprint's width; a 64-bit one is widened so one buffer holds both.
#[inline]
fn hash_at_width(feature: &str, wide: bool) -> u128 {
    if wide {
        feature_hash128(feature)
    } else {
        u128::from(feature_hash(feature))
    }
}

/// Adds a repeat's weight to its first occurrence, or appends a feature not seen before.
#[inline]
fn add_distinct(
    index: &mut FeatureIndex,
    features: &mut Vec<(u128, f64)>,
    hash: u128,
    weight: f64,
) {
    match index.entry(hash as u64) {
        Entry::Occupied(at) => features[*at.get()].1 += weight,
        Entry::Vacant(at) => {
            at.insert(features.len());
            features.push((hash, weight));
        }
    }
}

/// The floating-point vote, for TF-IDF weights and for every 128-bit fingerprint.
fn float_vote(hasher: &mut SimHasher, features: &[(u128, f64)], wide: bool) -> Simhashes {
    hasher.reset();
    for &(hash, weight) in features {
        if wide {
            hasher.add128(hash, weight);
        } else {
            hasher.add(hash as u64, weight);
        }
    }
    if wide {
        (None, hasher.finish128())
    } else {
        (hasher.finish(), None)
    }
}

/// The SimHash of one document with the default options; `None` when it has no features
/// (empty, whitespace, punctuation only).
pub fn simhash(text: &str) -> Option<u64> {
    DEFAULT.fingerprint(text, &mut Scratch::default()).simhash
}

/// Builds the tables the cleaning looks every character up in (the T2S dictionaries among them),
/// whatever the options, on the calling thread: see `clean::build_tables`.
pub fn build_cleaning_tables() {
    clean::build_tables();
}

static DEFAULT: LazyLock<Featurizer> = LazyLock::new(|| Featurizer {
    options: FeatureOptions::default(),
    keywords: chinese::Keywords::default_table(),
    stop_words: DEFAULT_STOP_WORDS.clone(),
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::hamming;

    fn with(options: &str) -> Featurizer {
        Featurizer::new(FeatureOptions::parse(options).unwrap()).unwrap()
    }

    fn print(featurizer: &Featurizer, text: &str) -> Fingerprint {
        featurizer.fingerprint(text, &mut Scratch::default())
    }

    fn by_hand(features: &[(&str, f64)]) -> Option<u64> {
        let mut hasher = SimHasher::default();
        for (feature, weight) in features {
            hasher.add(feature_hash(feature), *weight);
        }
        hasher.finish()
    }

    #[test]
    fn distinct_features_are_the_ones_the_fingerprint_votes_with() {
        let text = "Der Paketmanager apt installiert Pakete. 软件包管理器安装软件包，安装。";
        for options in [
            "mode=auto",
            "mode=chars,n=4",
            "mode=words",
            "mode=shingles,n=2",
        ] {
            let featurizer = with(options);
            let features = featurizer.distinct_features(text);
            assert_eq!(
                features.len() as u32,
                print(&featurizer, text).features,
                "{options}"
            );
            let votes: Vec<(&str, f64)> = features.iter().map(|(f, w)| (f.as_str(), *w)).collect();
            assert_eq!(
                by_hand(&votes),
                print(&featurizer, text).simhash,
                "{options}"
            );
        }
        // Repeats are summed: the bigrams "安装" and "软件" come twice each, across two runs of
        // Han characters for "安装".
        let auto = with("mode=auto").distinct_features(text);
        let weight = |f: &str| auto.iter().find(|(g, _)| g == f).map(|(_, w)| *w);
        assert_eq!(weight("安装"), Some(2.0));
        assert_eq!(weight("软件"), Some(2.0));
        assert_eq!(weight("包管"), Some(1.0));
    }

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
        assert_eq!(simhash("<p> </p>&nbsp;"), None);
        assert_eq!(simhash("😀🎉 ✨"), None, "emoji are not features");
        assert_eq!(simhash("数据库😀"), simhash("数据库"));
    }

    #[test]
    fn empty_exact_makes_featureless_texts_one_duplicate() {
        let without_policy = with("empty=exact,min_features=0");
        assert!(
            print(&without_policy, "").simhash.is_some(),
            "empty=exact holds alone"
        );
        let exact = with("empty=exact");
        let blank = print(&exact, "");
        assert!(blank.simhash.is_some() && blank.features == 0);
        assert_eq!(print(&exact, "  \n\t").simhash, blank.simhash);
        assert_eq!(print(&exact, "!!!").simhash, blank.simhash);
        assert_ne!(
            print(&exact, "real words here and more and more").simhash,
            blank.simhash
        );
    }

    #[test]
    fn english_features_are_the_words_by_hand() {
        // "is", "for" are stop words and "a" is one letter: six words remain, weight 1 each.
        let words = ["debian", "free", "operating", "system", "your", "computer"];
        let expected = by_hand(&words.map(|w| (w, 1.0)));
        let text = "Debian is a free operating system for your computer";
        assert_eq!(print(&with("mode=words"), text).simhash, expected);
    }

    #[test]
    fn chinese_features_are_the_tfidf_keywords_by_hand() {
        let text = "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。";
        let keywords: Vec<(String, f64)> = chinese::Keywords::default_table()
            .extract(text, 50)
            .collect();
        assert!(keywords.iter().any(|(k, _)| k == "北京烤鸭"));
        let keywords: Vec<(&str, f64)> = keywords.iter().map(|(k, w)| (k.as_str(), *w)).collect();
        assert_eq!(
            print(&with("mode=jieba_tfidf"), text).simhash,
            by_hand(&keywords)
        );
    }

    #[test]
    fn each_mode_by_hand() {
        let none = "min_features=0,";
        let p = |options: &str, text: &str| print(&with(&format!("{none}{options}")), text);
        // chars: bigrams of letters, digits and Han, punctuation dropped, one vote per occurrence.
        let got = p("mode=chars,n=2", "今天，天天");
        assert_eq!(
            got.simhash,
            by_hand(&[("今天", 1.0), ("天天", 1.0), ("天天", 1.0)])
        );
        assert_eq!(got.features, 2);
        // shingles: word trigrams, stop words kept, lower-cased by the cleaning.
        let got = p("mode=shingles,n=3", "A rose is a Rose");
        let expected = by_hand(&[("a rose is", 1.0), ("rose is a", 1.0), ("is a rose", 1.0)]);
        assert_eq!(got.simhash, expected);
        // words: also on Han text, one character at a time.
        let got = p("mode=words", "用 Rust 写");
        assert_eq!(
            got.simhash,
            by_hand(&[("用", 1.0), ("rust", 1.0), ("写", 1.0)])
        );
        // jieba_tf keeps every keyword, jieba_tfidf the top k.
        let text = "数据库系统的查询优化器选择连接顺序和索引";
        let all: Vec<(String, f64)> = chinese::Keywords::default_table()
            .extract(text, usize::MAX)
            .collect();
        let all: Vec<(&str, f64)> = all.iter().map(|(k, w)| (k.as_str(), *w)).collect();
        assert_eq!(p("mode=jieba_tf", text).simhash, by_hand(&all));
        assert_eq!(
            p("mode=jieba_tfidf,top_k=2", text).simhash,
            by_hand(&all[..2])
        );
        assert_eq!(p("mode=jieba_tfidf,top_k=2", text).features, 2);
        // jieba modes take English words inside Chinese text as words.
        let mixed = p("mode=jieba_tf", "使用 DataFusion 查询 Parquet 文件");
        assert!(mixed.features >= 4, "{mixed:?}");
    }

    #[test]
    fn auto_is_han_bigrams_and_other_trigrams() {
        let chars = |n: usize, text: &str| print(&with(&format!("mode=chars,n={n}")), text);
        let chinese = "数据库系统的查询优化器选择连接顺序和索引";
        assert_eq!(simhash(chinese), chars(2, chinese).simhash);
        let english = "An English page about query optimizers and join orders";
        assert_eq!(simhash(english), chars(3, english).simhash);
        // Mixed: the n-grams of each script run, as if alone.
        let mixed = print(&with("min_features=0"), "查询优化器 SQL");
        let expected = [
            ("查询", 1.0),
            ("询优", 1.0),
            ("优化", 1.0),
            ("化器", 1.0),
            ("sql", 1.0),
        ];
        assert_eq!(mixed.simhash, by_hand(&expected));
    }

    #[test]
    fn short_texts_match_exact_copies_only() {
        // Three words under min_features (5): exact hash of the feature sequence.
        let words = with("mode=words");
        let simhash = |text: &str| print(&words, text).simhash;
        let a = simhash("Open the settings page");
        assert!(a.is_some());
        assert_eq!(print(&words, "Open the settings page").features, 3);
        assert_eq!(
            simhash("open the SETTINGS page!"),
            a,
            "cleaning and punctuation do not count"
        );
        let b = simhash("Open the settings window").unwrap();
        assert!(
            hamming(a.unwrap(), b) > 10,
            "one word apart, yet far: {}",
            hamming(a.unwrap(), b)
        );
        // The exact hash is not the SimHash of those features.
        let mut hasher = SimHasher::default();
        for w in ["open", "settings", "page"] {
            hasher.add(feature_hash(w), 1.0);
        }
        assert_ne!(a, hasher.finish());
        // With the policy off, the same short text has a real SimHash.
        let simhash_of_it = print(&with("mode=words,min_features=0"), "Open the settings page");
        assert_ne!(simhash_of_it.simhash, a);
        assert_eq!(simhash_of_it.features, 3); // "the" is a stop word
    }

    #[test]
    fn cleaning_reaches_the_fingerprint() {
        let plain = "Debian provides more than a pure operating system with many packages";
        let html = format!(
            "<html><head><style>p{{x:1}}</style></head><body><p>{plain}</p><script>track()</script></body></html>"
        );
        assert_eq!(simhash(&html), simhash(plain));
        let wide = "Ｄｅｂｉａｎ　provides more than a pure operating system with many packages";
        assert_eq!(simhash(wide), simhash(plain));
        assert_ne!(print(&with("html=off"), &html).simhash, simhash(plain));
        let traditional = "這個軟體套件提供了作業系統的檔案管理功能和網路設定";
        let simplified = "这个软件套件提供了操作系统的文件管理功能和网络设置";
        let t2s = with("t2s=on");
        // Characters become Simplified; Taiwan vocabulary (軟體, 檔案) stays what it is.
        assert_eq!(
            t2s.clean(traditional),
            "这个软体套件提供了作业系统的档案管理功能和网路设定"
        );
        let d = |f: &Featurizer| {
            hamming(
                print(f, traditional).simhash.unwrap(),
                print(f, simplified).simhash.unwrap(),
            )
        };
        let off = with("t2s=off");
        assert!(d(&t2s) < d(&off), "t2s {} vs without {}", d(&t2s), d(&off));
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

    #[test]
    fn options_that_cannot_work_are_refused() {
        let e = Featurizer::cached("mode=jieba_tfidf,top_k=3")
            .unwrap_err()
            .0;
        assert!(e.contains("top_k=3") && e.contains("min_features=5"), "{e}");
        let bad = FeatureOptions {
            n: 0,
            ..Default::default()
        };
        assert!(
            Featurizer::new(bad).is_err(),
            "n = 0 is refused, not a panic"
        );
    }

    #[test]
    fn option_errors_surface_from_the_cache() {
        let e = Featurizer::cached("mode=nope").unwrap_err().0;
        assert!(e.contains("nope") && e.contains("valid modes"), "{e}");
        let first = Featurizer::cached("mode=chars").unwrap();
        let again = Featurizer::cached("mode=chars").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
    }

    /// Property: any text, of any script or none, markup or not, fingerprints without panicking
    /// in every mode, the same way every time, and (with `empty=skip`) has a fingerprint exactly
    /// when it has a feature. Random texts from a fixed seed, so a failure reproduces; no
    /// property-testing crate, whose dependencies would make release and test builds of
    /// DataFusion differ.
    #[test]
    fn random_texts_fingerprint_deterministically_in_every_mode() {
        const RANGES: [(u32, u32); 11] = [
            (0x4E00, 0x9FFF),   // Han
            (0x61, 0x7A),       // a-z
            (0x41, 0x5A),       // A-Z
            (0x0400, 0x04FF),   // Cyrillic
            (0x21, 0x2F),       // ASCII punctuation, & and / among them
            (0x3B, 0x3E),       // ; < = >
            (0x3000, 0x303F),   // CJK punctuation
            (0xFF01, 0xFF5E),   // full-width forms
            (0x1F600, 0x1F64F), // emoji
            (0x00, 0x20),       // controls and space
            (0x80, 0x10FFFF),   // anything else
        ];
        let featurizers: Vec<Featurizer> = [
            "mode=auto",
            "mode=jieba_tfidf",
            "mode=jieba_tf",
            "mode=words",
            "mode=shingles,n=2",
            "mode=chars,n=3,t2s=tw",
            "mode=words,bits=128",
            "mode=auto,cjk_only=on,min_features=0",
        ]
        .iter()
        .map(|o| with(o))
        .collect();
        let mut random = crate::rng::SplitMix64(0x5EED);
        let mut scratch = Scratch::default();
        for case in 0..600 {
            let length = random.below(300);
            let text: String = (0..length)
                .filter_map(|_| {
                    let (lo, hi) = RANGES[random.below(RANGES.len())];
                    char::from_u32(lo + random.below((hi - lo + 1) as usize) as u32)
                })
                .collect();
            for featurizer in &featurizers {
                let first = featurizer.fingerprint(&text, &mut scratch);
                let again = featurizer.fingerprint(&text, &mut Scratch::default());
                assert_eq!(
                    first,
                    again,
                    "case {case} {:?}: {text:?}",
                    featurizer.options()
                );
                assert_eq!(first.is_some(), first.features > 0, "case {case}");
            }
        }
    }
}
