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
use datafusion::prelude::SessionContext;

use crate::engine::partial_file::{Existing, PartialFile, check_target};
use crate::engine::sql::quote_ident;
use crate::engine::staging::{has_glob_characters, is_inside};
use crate::error::{Error, QueryContext, Result};
pub use crate::rng::SplitMix64;
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
    match edit {
        "boilerplate" => add_boilerplate(text, rng),
        "markup" => wrap_in_markup(text),
        "delete_sentence" | "insert_sentence" | "swap_sentences" => {
            edit_sentences(edit, text, other, rng)
        }
        "typos" => add_typos(text, rng),
        "truncate" => truncate(text, rng),
        "punctuation_width" => swap_punctuation_width(text),
        "traditional" => to_traditional(text),
        _ => text.to_string(),
    }
}

/// A site's header, footer or both around the text, in the text's script.
fn add_boilerplate(text: &str, rng: &mut SplitMix64) -> String {
    let (header, footer) = if text.chars().any(is_han) {
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

/// The text as an HTML page, one paragraph per sentence.
fn wrap_in_markup(text: &str) -> String {
    let body: String = sentences(text)
        .iter()
        .map(|s| format!("<p>{}</p>", s.trim()))
        .collect();
    format!("<html><body><div class=\"content\">{body}</div></body></html>")
}

/// `delete_sentence`, `insert_sentence` (one of `other`'s) or `swap_sentences`; a text of one
/// sentence gets `other`'s first sentence appended instead.
fn edit_sentences(edit: &str, text: &str, other: &str, rng: &mut SplitMix64) -> String {
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

/// One random character in 200 (1 to 20 of them) replaced by a random one of its kind.
fn add_typos(text: &str, rng: &mut SplitMix64) -> String {
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

/// The first 70% to 90% of the text's characters.
fn truncate(text: &str, rng: &mut SplitMix64) -> String {
    let chars: Vec<char> = text.chars().collect();
    let keep = chars.len() * (70 + rng.below(21)) / 100;
    chars[..keep].iter().collect()
}

/// Full-width punctuation made half-width, and half-width commas, colons and semicolons
/// full-width.
fn swap_punctuation_width(text: &str) -> String {
    text.chars()
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
        .collect()
}

/// The characters of `TRADITIONAL` in their Traditional forms.
fn to_traditional(text: &str) -> String {
    text.chars()
        .map(|c| TRADITIONAL.iter().find(|p| p.0 == c).map_or(c, |p| p.1))
        .collect()
}

/// Whether `path` is the input, lies inside an input folder, or is a file an input pattern
/// (`corpus/*.parquet`) reads.
fn is_read_as_input(path: &Path, input: &Path) -> bool {
    if is_inside(path, input) {
        return true;
    }
    if !has_glob_characters(input) {
        return false;
    }
    let (Ok(path), Ok(pattern)) = (std::path::absolute(path), std::path::absolute(input)) else {
        return false;
    };
    glob::Pattern::new(&pattern.to_string_lossy()).is_ok_and(|p| p.matches_path(&path))
}

/// Writes the generated corpus (id, text, edits) and its truth (id, cluster).
pub async fn generate_corpus(options: &GenerateOptions) -> Result<(usize, usize)> {
    let existing = Existing::from_overwrite(options.overwrite);
    // Checked before any work; checked again when the files are created.
    for (path, role) in [(&options.output, OUTPUT_ROLE), (&options.truth, TRUTH_ROLE)] {
        check_target(path, role, existing)?;
        if is_read_as_input(path, &options.input) {
            return Err(Error::Usage(format!(
                "{role} {} is the --input {} it is generated from: writing it would replace \
                 the corpus; choose another path",
                path.display(),
                options.input.display()
            )));
        }
    }
    if is_inside(&options.output, &options.truth) {
        return Err(Error::Usage(format!(
            "{OUTPUT_ROLE} and {TRUTH_ROLE} are the same file, {}: the corpus and its truth are \
             two tables; choose two paths",
            options.output.display()
        )));
    }
    let sources = read_sources(options).await?;
    let allowed = allowed_edits(&options.edits)?;
    let copies = Copies {
        sources: &sources,
        allowed: &allowed,
        max_copies: options.max_copies,
    };
    let mut rng = SplitMix64(options.seed);
    let mut out = Outputs {
        corpus: TableWriter::create(
            &options.output,
            OUTPUT_ROLE,
            &["id", "text", "edits"],
            existing,
        )?,
        truth: TableWriter::create(&options.truth, TRUTH_ROLE, &["id", "cluster"], existing)?,
        documents: 0,
    };
    let collages = Collages::new(&sources);
    let all_sources = sources.len() + options.collage_sources;
    for number in 0..all_sources {
        // The input's documents first, then made-up ones (`Collages`).
        let (source_id, text) = match sources.get(number) {
            Some((id, text)) => (id.clone(), text.clone()),
            None => (format!("collage-{number}"), collages.make(&mut rng)),
        };
        write_copies(&copies, number, &source_id, &text, &mut rng, &mut out)?;
    }
    let documents = out.documents;
    out.corpus.finish()?;
    out.truth.finish()?;
    Ok((all_sources, documents))
}

/// How messages name the corpus file.
const OUTPUT_ROLE: &str = "--output";
/// How messages name the truth file.
const TRUTH_ROLE: &str = "--truth";

/// The input's first `--sources` documents with text, in id order, as (id, text).
async fn read_sources(options: &GenerateOptions) -> Result<Vec<(String, String)>> {
    let ctx = SessionContext::new();
    let location = options.input.display().to_string();
    // Read as `run` reads a file: JSON Lines and CSV by their names, else Parquet.
    let source = crate::input::format::FileFormat::of_file(&location, None)
        .read(&ctx, &location)
        .await
        .context(|| format!("reading {location}"))?;
    ctx.register_table("source", source.into_view())
        .context(|| format!("reading {location}"))?;
    let sql = format!(
        "SELECT arrow_cast({id}, 'Utf8'), arrow_cast({text}, 'Utf8') FROM source \
         WHERE {text} IS NOT NULL AND trim({text}) <> '' ORDER BY {id}, 2 LIMIT {}",
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
    Ok(sources)
}

/// The edits to draw from: `edits` (`--edits`), or all of `EDITS` when empty.
fn allowed_edits(edits: &[String]) -> Result<Vec<&str>> {
    let allowed: Vec<&str> = if edits.is_empty() {
        EDITS.to_vec()
    } else {
        edits.iter().map(String::as_str).collect()
    };
    if let Some(unknown) = allowed.iter().find(|e| !EDITS.contains(e)) {
        return Err(Error::Usage(format!(
            "--edits: unknown edit {unknown:?}; valid edits: {}",
            EDITS.join(", ")
        )));
    }
    Ok(allowed)
}

/// What the copies of a source are made with.
struct Copies<'a> {
    /// The input's documents: a copy's insertions come from one of them.
    sources: &'a [(String, String)],
    /// The edits to draw from.
    allowed: &'a [&'a str],
    /// Copies per source at most (`--max-copies`).
    max_copies: u64,
}

/// The corpus and the truth being written, and how many documents they have.
struct Outputs {
    corpus: TableWriter,
    truth: TableWriter,
    documents: usize,
}

impl Outputs {
    /// One document in the corpus, and in the truth in its source's cluster.
    fn push(&mut self, id: &str, text: &str, edits: &str, source_id: &str) -> Result<()> {
        self.corpus.push(&[id, text, edits])?;
        self.truth.push(&[id, source_id])?;
        self.documents += 1;
        Ok(())
    }
}

/// Writes source `number` (as `<source_id>#0`) and 0..=`max_copies` edited copies of it.
fn write_copies(
    copies: &Copies<'_>,
    number: usize,
    source_id: &str,
    text: &str,
    rng: &mut SplitMix64,
    out: &mut Outputs,
) -> Result<()> {
    out.push(&format!("{source_id}#0"), text, "", source_id)?;
    let sources = copies.sources;
    for copy in 1..=rng.below(copies.max_copies as usize + 1) {
        let other = &sources[(number + 1 + rng.below(sources.len())) % sources.len()].1;
        let mut edited = text.to_string();
        let mut applied = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let edit = copies.allowed[rng.below(copies.allowed.len())];
            edited = apply_edit(edit, &edited, other, rng);
            applied.push(edit);
        }
        let id = format!("{source_id}#{copy}");
        out.push(&id, &edited, &applied.join(","), source_id)?;
    }
    Ok(())
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

/// Rows of string columns streamed into a Parquet file in row groups of 16,384, written under
/// a partial name (`PartialFile`) and renamed when whole, so a corpus of any size takes one row
/// group of memory and an interrupted run leaves no file that looks finished (and no partial
/// file either).
struct TableWriter {
    schema: Arc<Schema>,
    columns: Vec<StringBuilder>,
    writer: ArrowWriter<std::fs::File>,
    /// Last, so a dropped writer closes the file before the partial file is removed.
    partial: PartialFile,
}

const ROW_GROUP_ROWS: usize = 16_384;

impl TableWriter {
    /// Creates the partial file for `path` (`role` names it in messages), with one Utf8 column
    /// per name.
    fn create(path: &Path, role: &str, names: &[&str], existing: Existing) -> Result<Self> {
        let schema = Arc::new(Schema::new(
            names
                .iter()
                .map(|name| Field::new(*name, DataType::Utf8, false))
                .collect::<Vec<_>>(),
        ));
        let (partial, file) = PartialFile::create(path, role, existing)?;
        let properties = datafusion::parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let writer = ArrowWriter::try_new(file, Arc::clone(&schema), Some(properties))
            .map_err(|e| Error::parquet(partial.path(), e))?;
        Ok(Self {
            schema,
            columns: names.iter().map(|_| StringBuilder::new()).collect(),
            writer,
            partial,
        })
    }

    /// Adds one row; a full row group is written out.
    fn push(&mut self, row: &[&str]) -> Result<()> {
        for (column, value) in self.columns.iter_mut().zip(row) {
            column.append_value(value);
        }
        if self.columns[0].len() == ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the rows held as a row group.
    fn flush(&mut self) -> Result<()> {
        if self.columns[0].is_empty() {
            return Ok(());
        }
        let arrays = self
            .columns
            .iter_mut()
            .map(|column| Arc::new(column.finish()) as _)
            .collect();
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), arrays)
            .context(|| format!("building a row group of {}", self.partial.path().display()))?;
        let written = self.writer.write(&batch);
        written.map_err(|e| Error::parquet(self.partial.path(), e))
    }

    /// Writes the last rows and the footer, and renames the file into place.
    fn finish(mut self) -> Result<()> {
        self.flush()?;
        let Self {
            partial, writer, ..
        } = self;
        writer
            .close()
            .map_err(|e| Error::parquet(partial.path(), e))?;
        partial.commit()
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
