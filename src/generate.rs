//! `neardup generate`: a near-duplicate test corpus with its truth, from any Parquet corpus.
//!
//! Each source document is kept and followed by 0..=`max_copies` copies, each with one to three
//! crawl-like edits: boilerplate header or footer, markup, a sentence deleted, inserted (from
//! another source) or swapped, typos, truncation, punctuation width, Traditional script.
//! Deterministic from the seed (SplitMix64, no global randomness): the same input and seed give
//! the same corpus, so an evaluation can be repeated. `--collage-sources` adds sources made of the
//! input's sentences (`Collages`), so a 36 MB input gives a corpus of ten million documents;
//! rows are streamed to the file, so memory does not grow with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayBuilder, AsArray, RecordBatch, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{ParquetReadOptions, SessionContext};

use crate::error::{Error, QueryContext, Result};
use crate::input::quote_ident;
use crate::text::is_han;

#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub input: PathBuf,
    pub output: PathBuf,
    pub truth: PathBuf,
    pub id_column: String,
    pub text_column: String,
    pub sources: usize,
    /// Made-up sources after the input's (`Collages`).
    pub collage_sources: usize,
    pub max_copies: u64,
    pub seed: u64,
    pub overwrite: bool,
    /// The edits to draw from (all of `EDITS` when empty).
    pub edits: Vec<String>,
}

/// SplitMix64: small, fast, and the same on every platform.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// The edits a copy can receive, by name (the names go into the `edits` column).
pub const EDITS: [&str; 9] = [
    "boilerplate",
    "markup",
    "delete_sentence",
    "insert_sentence",
    "swap_sentences",
    "typos",
    "truncate",
    "punctuation_width",
    "traditional",
];

/// Sentences with their closing punctuation, so joining them gives the text back.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if matches!(c, '。' | '！' | '？' | '.' | '!' | '?' | '\n') {
            let end = i + c.len_utf8();
            if !text[start..end].trim().is_empty() {
                out.push(&text[start..end]);
            }
            start = end;
        }
    }
    if !text[start..].trim().is_empty() {
        out.push(&text[start..]);
    }
    out
}

/// A few frequent Simplified characters and their Traditional forms: enough to change the
/// script of a page the way a zh-TW mirror does, not a full conversion table.
const TRADITIONAL: [(char, char); 40] = [
    ('这', '這'),
    ('个', '個'),
    ('们', '們'),
    ('来', '來'),
    ('时', '時'),
    ('会', '會'),
    ('为', '為'),
    ('国', '國'),
    ('说', '說'),
    ('对', '對'),
    ('发', '發'),
    ('后', '後'),
    ('过', '過'),
    ('还', '還'),
    ('没', '沒'),
    ('问', '問'),
    ('题', '題'),
    ('学', '學'),
    ('开', '開'),
    ('关', '關'),
    ('实', '實'),
    ('现', '現'),
    ('经', '經'),
    ('动', '動'),
    ('电', '電'),
    ('话', '話'),
    ('长', '長'),
    ('门', '門'),
    ('书', '書'),
    ('车', '車'),
    ('见', '見'),
    ('间', '間'),
    ('软', '軟'),
    ('件', '件'),
    ('统', '統'),
    ('数', '數'),
    ('据', '據'),
    ('设', '設'),
    ('置', '置'),
    ('线', '線'),
];

/// Applies one named edit; `other` is another source's text (for insertions).
pub fn apply_edit(edit: &str, text: &str, other: &str, rng: &mut SplitMix64) -> String {
    let chinese = text.chars().any(is_han);
    match edit {
        "boilerplate" => {
            let (header, footer) = if chinese {
                (
                    "首页 | 新闻 | 产品 | 关于我们\n",
                    "\n版权所有 © 2026 示例网站 保留所有权利 | 联系我们",
                )
            } else {
                (
                    "Home | News | Products | About us\n",
                    "\nCopyright © 2026 Example Site. All rights reserved. | Contact",
                )
            };
            match rng.below(3) {
                0 => format!("{header}{text}"),
                1 => format!("{text}{footer}"),
                _ => format!("{header}{text}{footer}"),
            }
        }
        "markup" => {
            let body: String = sentences(text)
                .iter()
                .map(|s| format!("<p>{}</p>", s.trim()))
                .collect();
            format!("<html><body><div class=\"content\">{body}</div></body></html>")
        }
        "delete_sentence" | "insert_sentence" | "swap_sentences" => {
            let mut parts: Vec<String> = sentences(text).iter().map(|s| s.to_string()).collect();
            if parts.len() < 2 {
                return format!("{text}{}", sentences(other).first().copied().unwrap_or(""));
            }
            let i = rng.below(parts.len());
            match edit {
                "delete_sentence" => {
                    parts.remove(i);
                }
                "insert_sentence" => {
                    let donor = sentences(other);
                    if let Some(s) = donor.get(rng.below(donor.len())) {
                        parts.insert(i, s.to_string());
                    }
                }
                _ => {
                    let j = (i + 1 + rng.below(parts.len() - 1)) % parts.len();
                    parts.swap(i, j);
                }
            }
            parts.concat()
        }
        "typos" => {
            let mut chars: Vec<char> = text.chars().collect();
            if chars.is_empty() {
                // A truncated one-character text: nothing to misspell.
                return String::new();
            }
            for _ in 0..(chars.len() / 200).clamp(1, 20) {
                let i = rng.below(chars.len());
                let c = chars[i];
                chars[i] = if is_han(c) {
                    char::from_u32(0x4E00 + rng.below(0x51A5) as u32).unwrap_or(c)
                } else if c.is_ascii_alphabetic() {
                    (b'a' + rng.below(26) as u8) as char
                } else {
                    c
                };
            }
            chars.into_iter().collect()
        }
        "truncate" => {
            let chars: Vec<char> = text.chars().collect();
            let keep = chars.len() * (70 + rng.below(21)) / 100;
            chars[..keep].iter().collect()
        }
        "punctuation_width" => text
            .chars()
            .map(|c| match c {
                '，' => ',',
                '。' => '.',
                '：' => ':',
                '；' => ';',
                '！' => '!',
                '？' => '?',
                '（' => '(',
                '）' => ')',
                ',' => '，',
                ':' => '：',
                ';' => '；',
                other => other,
            })
            .collect(),
        "traditional" => text
            .chars()
            .map(|c| TRADITIONAL.iter().find(|p| p.0 == c).map_or(c, |p| p.1))
            .collect(),
        _ => text.to_string(),
    }
}

/// Writes the generated corpus (id, text, edits) and its truth (id, cluster).
pub async fn generate(options: &GenerateOptions) -> Result<(usize, usize)> {
    for path in [&options.output, &options.truth] {
        if path.exists() && !options.overwrite {
            return Err(Error::Usage(format!(
                "{} already exists; pass --overwrite to replace it",
                path.display()
            )));
        }
    }
    let ctx = SessionContext::new();
    let location = options.input.display().to_string();
    ctx.register_parquet(
        "source",
        &location,
        ParquetReadOptions::default().file_extension(""),
    )
    .await
    .context(|| format!("reading {location}"))?;
    let sql = format!(
        "SELECT arrow_cast({id}, 'Utf8'), arrow_cast({text}, 'Utf8') FROM source \
         WHERE {text} IS NOT NULL AND trim({text}) <> '' ORDER BY 1 LIMIT {}",
        options.sources,
        id = quote_ident(&options.id_column),
        text = quote_ident(&options.text_column),
    );
    let batches = ctx
        .sql(&sql)
        .await
        .context(|| "selecting source documents".into())?
        .collect()
        .await
        .context(|| "selecting source documents".into())?;
    let mut sources: Vec<(String, String)> = Vec::new();
    for batch in &batches {
        let (ids, texts) = (
            batch.column(0).as_string::<i32>(),
            batch.column(1).as_string::<i32>(),
        );
        for i in 0..batch.num_rows() {
            sources.push((ids.value(i).to_string(), texts.value(i).to_string()));
        }
    }
    if sources.is_empty() {
        return Err(Error::Input(format!(
            "{location}: no document with text to copy"
        )));
    }
    let allowed: Vec<&str> = if options.edits.is_empty() {
        EDITS.to_vec()
    } else {
        options.edits.iter().map(String::as_str).collect()
    };
    if let Some(unknown) = allowed.iter().find(|e| !EDITS.contains(e)) {
        return Err(Error::Usage(format!(
            "--edits: unknown edit {unknown:?}; valid edits: {}",
            EDITS.join(", ")
        )));
    }
    let mut rng = SplitMix64(options.seed);
    let mut corpus = TableWriter::create(&options.output, &["id", "text", "edits"])?;
    let mut truth = TableWriter::create(&options.truth, &["id", "cluster"])?;
    let collages = Collages::new(&sources);
    let mut documents = 0;
    let all_sources = sources.len() + options.collage_sources;
    for number in 0..all_sources {
        // The input's documents first, then made-up ones (`Collages`).
        let (source_id, text) = match sources.get(number) {
            Some((id, text)) => (id.clone(), text.clone()),
            None => (format!("collage-{number}"), collages.make(&mut rng)),
        };
        let id = format!("{source_id}#0");
        corpus.push(&[&id, &text, ""])?;
        truth.push(&[&id, &source_id])?;
        documents += 1;
        for copy in 1..=rng.below(options.max_copies as usize + 1) {
            let other = &sources[(number + 1 + rng.below(sources.len())) % sources.len()].1;
            let mut edited = text.clone();
            let mut applied = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let edit = allowed[rng.below(allowed.len())];
                edited = apply_edit(edit, &edited, other, &mut rng);
                applied.push(edit);
            }
            let id = format!("{source_id}#{copy}");
            corpus.push(&[&id, &edited, &applied.join(",")])?;
            truth.push(&[&id, &source_id])?;
            documents += 1;
        }
    }
    corpus.finish()?;
    truth.finish()?;
    Ok((all_sources, documents))
}

const MIN_COLLAGE_SENTENCES: usize = 4;
const COLLAGE_DONORS: usize = 3;

/// Made-up source documents for corpora larger than the input. Each takes its length from a
/// random input document (a model) and its sentences, drawn at random, from three random input
/// documents of the model's script (Chinese or not): lengths, vocabulary and sentence shapes
/// stay real, and each collage has a topic of its own. (Sentences drawn from all documents at
/// once made every long collage the same average text: a thousand random sentences vote the
/// same way on every bit, and long collages became near-duplicates the truth did not know.)
struct Collages<'a> {
    sources: &'a [(String, String)],
    /// Each input document's sentences.
    sentences: Vec<Vec<&'a str>>,
    chinese: Vec<usize>,
    other: Vec<usize>,
}

impl<'a> Collages<'a> {
    fn new(sources: &'a [(String, String)]) -> Self {
        let sentences: Vec<Vec<&str>> = sources.iter().map(|(_, text)| sentences(text)).collect();
        // Donors need a sentence: SQL's trim lets a text of tabs and newlines through.
        let (chinese, other) = (0..sources.len())
            .filter(|&i| !sentences[i].is_empty())
            .partition(|&i| sources[i].1.chars().any(is_han));
        Self {
            sources,
            sentences,
            chinese,
            other,
        }
    }

    fn make(&self, rng: &mut SplitMix64) -> String {
        let model = &self.sources[rng.below(self.sources.len())].1;
        let (same, different) = if model.chars().any(is_han) {
            (&self.chinese, &self.other)
        } else {
            (&self.other, &self.chinese)
        };
        let documents = if same.is_empty() { different } else { same };
        if documents.is_empty() {
            // No input document has a sentence: nothing to make a collage of.
            return model.clone();
        }
        let pool: Vec<&str> = (0..COLLAGE_DONORS)
            .flat_map(|_| &self.sentences[documents[rng.below(documents.len())]])
            .copied()
            .collect();
        let mut text = String::with_capacity(model.len());
        // At least `MIN_COLLAGE_SENTENCES`: a collage of one sentence, for a short model, would
        // be the same text as any other collage that drew it. Every donor has a sentence.
        let mut count = 0;
        while text.len() < model.len() || count < MIN_COLLAGE_SENTENCES {
            text.push_str(pool[rng.below(pool.len())]);
            count += 1;
        }
        text
    }
}

/// Rows of string columns streamed into a Parquet file in row groups of 16,384, written to
/// `<path>.partial` and renamed when whole, so a corpus of any size takes one row group of
/// memory and an interrupted run leaves no file that looks finished.
struct TableWriter {
    path: PathBuf,
    partial: PathBuf,
    schema: Arc<Schema>,
    columns: Vec<StringBuilder>,
    writer: ArrowWriter<std::fs::File>,
    finished: bool,
}

const ROW_GROUP_ROWS: usize = 16_384;

impl TableWriter {
    fn create(path: &Path, names: &[&str]) -> Result<Self> {
        let schema = Arc::new(Schema::new(
            names
                .iter()
                .map(|name| Field::new(*name, DataType::Utf8, false))
                .collect::<Vec<_>>(),
        ));
        let mut partial = path.as_os_str().to_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let file = std::fs::File::create(&partial).map_err(|e| Error::io(&partial, e))?;
        let properties = datafusion::parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let writer = ArrowWriter::try_new(file, Arc::clone(&schema), Some(properties))
            .map_err(|e| Error::Internal(format!("{}: {e}", partial.display())))?;
        Ok(Self {
            path: path.to_path_buf(),
            partial,
            schema,
            columns: names.iter().map(|_| StringBuilder::new()).collect(),
            writer,
            finished: false,
        })
    }

    fn push(&mut self, row: &[&str]) -> Result<()> {
        for (column, value) in self.columns.iter_mut().zip(row) {
            column.append_value(value);
        }
        if self.columns[0].len() == ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.columns[0].is_empty() {
            return Ok(());
        }
        let arrays = self
            .columns
            .iter_mut()
            .map(|column| Arc::new(column.finish()) as _)
            .collect();
        let failed = |e: String| Error::Internal(format!("{}: {e}", self.partial.display()));
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), arrays)
            .map_err(|e| failed(e.to_string()))?;
        let written = self.writer.write(&batch);
        written.map_err(|e| failed(e.to_string()))
    }

    fn finish(mut self) -> Result<()> {
        self.flush()?;
        self.writer
            .finish()
            .map_err(|e| Error::Internal(format!("{}: {e}", self.partial.display())))?;
        std::fs::rename(&self.partial, &self.path).map_err(|e| Error::io(&self.path, e))?;
        self.finished = true;
        Ok(())
    }
}

impl Drop for TableWriter {
    /// A failed or interrupted generation leaves no partial file behind.
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_join_back_to_the_text() {
        let text = "第一句。第二句！Third one. And a tail";
        assert_eq!(sentences(text).concat(), text);
        assert_eq!(sentences(text).len(), 4);
    }

    #[test]
    fn collages_are_sentences_of_one_script() {
        let sources: Vec<(String, String)> = [
            "第一句。第二句！第三句？",
            "另一篇。还有一句。",
            "One sentence. Two sentences! Three?",
            "Another page. With more text here.",
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| (i.to_string(), t.to_string()))
        .collect();
        let collages = Collages::new(&sources);
        let mut rng = SplitMix64(3);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let text = collages.make(&mut rng);
            let chinese = text.chars().any(is_han);
            let pool: Vec<&str> = sources
                .iter()
                .filter(|(_, t)| t.chars().any(is_han) == chinese)
                .flat_map(|(_, t)| sentences(t))
                .collect();
            for sentence in sentences(&text) {
                assert!(pool.contains(&sentence), "{sentence:?} of {text:?}");
            }
            assert!(
                !pool.contains(&text.as_str()),
                "more than one sentence: {text:?}"
            );
            seen.insert(text);
        }
        assert!(seen.len() > 100, "collages vary: {}", seen.len());
    }

    #[test]
    fn edits_change_the_text_deterministically() {
        let text = "这个软件的设置在这里。我们来说明它的问题，还有后来的发现。最后一句话没有问题。";
        let other = "另一篇文章的第一句。第二句。";
        for edit in EDITS {
            let a = apply_edit(edit, text, other, &mut SplitMix64(7));
            let b = apply_edit(edit, text, other, &mut SplitMix64(7));
            assert_eq!(a, b, "{edit}");
            assert_ne!(a, text, "{edit} changed nothing");
        }
        for edit in EDITS {
            // Edits of edits reach empty texts (a truncated one-character text).
            apply_edit(edit, "", "", &mut SplitMix64(7));
            apply_edit(edit, "x", "", &mut SplitMix64(7));
        }
        assert_eq!(
            apply_edit("traditional", "这个软件", "", &mut SplitMix64(1)),
            "這個軟件"
        );
        assert_eq!(
            apply_edit("punctuation_width", "好，的。", "", &mut SplitMix64(1)),
            "好,的."
        );
    }
}
