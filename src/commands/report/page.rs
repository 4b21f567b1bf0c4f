//! The report as one self-contained HTML page: inline CSS and inline SVG, no JavaScript, and a
//! Content-Security-Policy that lets the page load nothing at all (images only as `data:`).
//!
//! Every piece of text that comes from the run (ids, texts, parameters, the output's name) goes
//! through [`escape`].
//!
//! The tables' rows carry their key so tests (and tools) can read the page back; their format
//! is fixed:
//! - distances: `<tr data-distance="D"><td>D</td><td>N</td></tr>` (N pairs at distance D);
//! - largest groups: `<tr data-group="ID"><td>ID</td><td>SIZE</td><td>REPRESENTATIVE</td><td>TEXT</td></tr>`;
//! - quality: `<tr data-k="K"><td>K</td><td>P</td><td>R</td><td>F1</td></tr>`, the scores with
//!   3 decimals (`–` when undefined), and `<tr data-k="K" class="best">` for the best k.

use std::fmt::Write as _;
use std::time::Duration;

use similar::{ChangeTag, TextDiff};

use super::data::{Quality, ReportData, SamplePair};
use super::plots;

/// A diff of two long texts that takes longer than this is coarser, not slower.
const DIFF_TIMEOUT: Duration = Duration::from_secs(1);
/// Characters of a group representative's text shown in the groups table.
const GROUP_TEXT_CHARS: usize = 160;
/// What a sample shows for a text the input no longer has.
const MISSING_TEXT: &str = "(not in the input any more)";

const STYLE: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
body {
  margin: 0; padding: 0 1rem 3rem;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 15px; line-height: 1.5; color: #1f2328; background: #fff;
}
main { max-width: 1100px; margin: 0 auto; }
header { border-bottom: 1px solid #d0d7de; padding: 1.25rem 0 0.75rem; margin-bottom: 0.5rem; }
header h1 { margin: 0; font-size: 1.6rem; }
header p { margin: 0.25rem 0 0; color: #57606a; }
nav { margin: 0.5rem 0 1rem; }
nav a { margin-right: 1rem; color: #0969da; text-decoration: none; }
nav a:hover { text-decoration: underline; }
section { margin: 2rem 0; }
h2 { font-size: 1.3rem; border-bottom: 1px solid #d0d7de; padding-bottom: 0.25rem; }
h3 { font-size: 1.05rem; margin: 1.5rem 0 0.5rem; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.92em;
  background: #f6f8fa; padding: 0.05em 0.3em; border-radius: 4px; }
table { border-collapse: collapse; margin: 0.75rem 0 1.25rem; }
th, td { border: 1px solid #d8dee4; padding: 0.3rem 0.65rem; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: #f6f8fa; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.snippet { max-width: 520px; white-space: pre-wrap; word-break: break-word; color: #424a53; }
tr.best td { background: #fff8c5; font-weight: 600; }
.tables { display: flex; flex-wrap: wrap; gap: 0 2rem; align-items: flex-start; }
figure.plot { margin: 0.75rem 0; }
figure.plot svg { display: block; width: 100%; max-width: 640px; height: auto;
  border: 1px solid #eaeef2; }
.note { color: #57606a; }
p.error { color: #a40e26; background: #ffebe9; border: 1px solid #ffcecb; padding: 0.5rem 0.75rem; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.pair .side { min-width: 0; }
.pair .side h4 { margin: 0 0 0.25rem; font-size: 0.9rem; color: #57606a; font-weight: 600; }
.pair .text { white-space: pre-wrap; word-break: break-word; overflow-wrap: anywhere;
  border: 1px solid #d8dee4; border-radius: 6px; padding: 0.6rem 0.75rem; background: #fbfcfd;
  font-size: 0.92rem; max-height: 32rem; overflow: auto; }
.missing { color: #8c959f; font-style: italic; }
del { background: #ffd7d5; color: #82071e; text-decoration: line-through; }
ins { background: #ccffd8; color: #055d20; text-decoration: none; }
"#;

/// Escapes text for HTML content and attribute values: `& < > " '`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// The whole report page.
pub fn render(data: &ReportData) -> String {
    let mut html = String::with_capacity(64 * 1024);
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    html.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; img-src data:\">\n",
    );
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(
        html,
        "<title>neardup report: {}</title>",
        escape(&data.output)
    );
    let _ = writeln!(html, "<style>{STYLE}</style>\n</head>\n<body>\n<main>");
    let _ = writeln!(
        html,
        "<header>\n<h1>neardup report</h1>\n<p>Output <code>{}</code>, written {}</p>\n</header>",
        escape(&data.output),
        escape(&data.written_at)
    );
    html.push_str(&nav(data));
    html.push_str(&glance(data));
    html.push_str(&distances(data));
    html.push_str(&groups(data));
    html.push_str(&samples(data));
    if let Some(quality) = &data.quality {
        html.push_str(&quality_section(quality));
    }
    html.push_str("</main>\n</body>\n</html>\n");
    html
}

fn nav(data: &ReportData) -> String {
    let mut out = String::from("<nav>");
    let mut links = vec![
        ("glance", "At a glance"),
        ("distances", "Distances"),
        ("groups", "Groups"),
        ("samples", "Sample pairs"),
    ];
    if data.quality.is_some() {
        links.push(("quality", "Quality"));
    }
    for (id, label) in links {
        let _ = write!(out, "<a href=\"#{id}\">{label}</a>");
    }
    out.push_str("</nav>\n");
    out
}

/// A plot, or the reason it could not be drawn.
fn plot(result: Result<String, String>) -> String {
    match result {
        Ok(svg) => format!("<figure class=\"plot\">\n{svg}</figure>\n"),
        Err(message) => format!(
            "<p class=\"error\">The plot could not be drawn: {}</p>\n",
            escape(&message)
        ),
    }
}

/// Seconds with two or three significant decimals.
fn seconds(s: f64) -> String {
    if !s.is_finite() {
        return "–".to_string();
    }
    if s < 1.0 {
        format!("{s:.3}")
    } else if s < 100.0 {
        format!("{s:.2}")
    } else {
        format!("{s:.1}")
    }
}

/// A score with 3 decimals, or a dash when it is undefined.
fn score(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.3}"),
        _ => "–".to_string(),
    }
}

/// A two-column table of (name, value) rows.
fn key_value_table(
    out: &mut String,
    caption: &str,
    heads: (&str, &str),
    rows: &[(String, String)],
) {
    let _ = writeln!(out, "<div>\n<h3>{caption}</h3>");
    if rows.is_empty() {
        out.push_str("<p class=\"note\">(none recorded)</p>\n</div>\n");
        return;
    }
    out.push_str("<table>\n");
    if !heads.0.is_empty() || !heads.1.is_empty() {
        let _ = writeln!(
            out,
            "<thead><tr><th>{}</th><th>{}</th></tr></thead>",
            heads.0, heads.1
        );
    }
    out.push_str("<tbody>\n");
    for (name, value) in rows {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(name),
            escape(value)
        );
    }
    out.push_str("</tbody>\n</table>\n</div>\n");
}

fn glance(data: &ReportData) -> String {
    let mut out = String::from("<section id=\"glance\">\n<h2>The run at a glance</h2>\n");
    let _ = writeln!(
        out,
        "<p>Output <code>{}</code>, report written {}.</p>",
        escape(&data.output),
        escape(&data.written_at)
    );
    out.push_str("<div class=\"tables\">\n");
    key_value_table(&mut out, "Results", ("", ""), &data.glance);
    key_value_table(
        &mut out,
        "Parameters",
        ("parameter", "value"),
        &data.parameters,
    );
    out.push_str("<div>\n<h3>Stage times</h3>\n");
    if data.stages.is_empty() {
        out.push_str("<p class=\"note\">(none recorded)</p>\n");
    } else {
        out.push_str(
            "<table>\n<thead><tr><th>stage</th><th class=\"num\">seconds</th>\
             <th class=\"num\">cores busy</th></tr></thead>\n<tbody>\n",
        );
        for row in &data.stages {
            let cores = row.cores.map_or("–".to_string(), |c| format!("{c:.2}"));
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{cores}</td></tr>",
                escape(&row.stage),
                seconds(row.seconds)
            );
        }
        let total: f64 = data.stages.iter().map(|row| row.seconds).sum();
        let _ = writeln!(
            out,
            "</tbody>\n<tfoot><tr><th>total</th><th class=\"num\">{}</th><th></th></tr></tfoot>\n\
             </table>",
            seconds(total)
        );
    }
    out.push_str("</div>\n</div>\n</section>\n");
    out
}

fn distances(data: &ReportData) -> String {
    let mut out = String::from("<section id=\"distances\">\n<h2>Pairs per Hamming distance</h2>\n");
    let _ = writeln!(
        out,
        "<p>Pairs of documents whose {}-bit fingerprints differ in D bits, for every D up to \
         the run's k = {}. This is what to look at to choose k: near-duplicates crowd the \
         small distances, and where the counts stop falling, the duplicates stop and chance \
         pairs of unrelated documents begin.</p>",
        data.fingerprint_bits, data.k
    );
    if let Some(threshold) = data.min_similarity {
        let _ = writeln!(
            out,
            "<p>Candidates were verified at estimated Jaccard ≥ {}; {} fingerprint pairs \
             within k were dropped.</p>",
            escape(&threshold.to_string()),
            data.dropped_by_verify
        );
    }
    out.push_str(&plot(plots::distance_histogram(&data.distances, data.k)));
    out.push_str(
        "<table>\n<thead><tr><th class=\"num\">distance</th><th class=\"num\">pairs</th></tr>\
         </thead>\n<tbody>\n",
    );
    for d in &data.distances {
        // The exact format is read back by the tests (see the module's documentation).
        let _ = writeln!(
            out,
            "<tr data-distance=\"{0}\"><td>{0}</td><td>{1}</td></tr>",
            d.distance, d.pairs
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
    out
}

/// The beginning of a text, cut at a character boundary.
fn beginning(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn groups(data: &ReportData) -> String {
    let mut out = String::from("<section id=\"groups\">\n<h2>Groups</h2>\n");
    out.push_str(
        "<p>How many groups of near-duplicates have each size: most are pairs or small \
         families; the few very large ones are worth a look (boilerplate, templates, \
         empty pages).</p>\n",
    );
    out.push_str(&plot(plots::group_sizes(&data.group_sizes)));
    if data.largest_groups.is_empty() {
        out.push_str("<p class=\"note\">No groups.</p>\n</section>\n");
        return out;
    }
    out.push_str(
        "<h3>The largest groups</h3>\n<table>\n<thead><tr><th class=\"num\">group</th>\
         <th class=\"num\">size</th><th>representative (kept)</th><th>its text begins</th>\
         </tr></thead>\n<tbody>\n",
    );
    for group in &data.largest_groups {
        let text = match &group.representative_text {
            Some(text) => escape(&beginning(text, GROUP_TEXT_CHARS)),
            None => format!("<span class=\"missing\">{MISSING_TEXT}</span>"),
        };
        // The exact format is read back by the tests (see the module's documentation).
        let _ = writeln!(
            out,
            "<tr data-group=\"{0}\"><td>{0}</td><td>{1}</td><td><code>{2}</code></td>\
             <td class=\"snippet\">{3}</td></tr>",
            group.group_id,
            group.size,
            escape(&group.representative_id),
            text
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
    out
}

/// Marked-up text of one side of a diff: runs of changed words inside one `<del>` or `<ins>`.
struct Marked {
    tag: &'static str,
    out: String,
    open: bool,
}

impl Marked {
    fn new(tag: &'static str) -> Self {
        Self {
            tag,
            out: String::new(),
            open: false,
        }
    }

    fn push(&mut self, text: &str, changed: bool) {
        if changed != self.open {
            let _ = if changed {
                write!(self.out, "<{}>", self.tag)
            } else {
                write!(self.out, "</{}>", self.tag)
            };
            self.open = changed;
        }
        self.out.push_str(&escape(text));
    }

    fn finish(mut self) -> String {
        if self.open {
            let _ = write!(self.out, "</{}>", self.tag);
        }
        self.out
    }
}

/// The two texts marked word by word: the left keeps what is the same and marks what `b`
/// lacks (`<del>`); the right marks what `b` adds (`<ins>`).
fn side_by_side(a: &str, b: &str) -> (String, String) {
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_unicode_words(a, b);
    let mut left = Marked::new("del");
    let mut right = Marked::new("ins");
    for change in diff.iter_all_changes() {
        let value: &str = change.value();
        match change.tag() {
            ChangeTag::Equal => {
                left.push(value, false);
                right.push(value, false);
            }
            ChangeTag::Delete => left.push(value, true),
            ChangeTag::Insert => right.push(value, true),
        }
    }
    (left.finish(), right.finish())
}

fn sample(out: &mut String, pair: &SamplePair) {
    let similarity = match pair.similarity {
        Some(s) if s.is_finite() => format!(" (similarity {s:.3})"),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "<h3>distance {}: {} and {}{}</h3>",
        pair.distance,
        escape(&pair.id_a),
        escape(&pair.id_b),
        similarity
    );
    let missing = || format!("<span class=\"missing\">{MISSING_TEXT}</span>");
    let (left, right) = match (&pair.text_a, &pair.text_b) {
        (Some(a), Some(b)) => side_by_side(a, b),
        (Some(a), None) => (escape(a), missing()),
        (None, Some(b)) => (missing(), escape(b)),
        (None, None) => (missing(), missing()),
    };
    let _ = writeln!(
        out,
        "<div class=\"pair\">\n<div class=\"side\"><h4>{}</h4><div class=\"text\">{}</div></div>\n\
         <div class=\"side\"><h4>{}</h4><div class=\"text\">{}</div></div>\n</div>",
        escape(&pair.id_a),
        left,
        escape(&pair.id_b),
        right
    );
}

fn samples(data: &ReportData) -> String {
    let mut out = String::from("<section id=\"samples\">\n<h2>Sample pairs</h2>\n");
    if data.samples.is_empty() {
        out.push_str("<p class=\"note\">The run found no pairs.</p>\n</section>\n");
        return out;
    }
    out.push_str(
        "<p>A few pairs at each distance, their cleaned texts side by side: words only the \
         first has are <del>struck out</del>, words only the second has are \
         <ins>marked</ins>.</p>\n",
    );
    for pair in &data.samples {
        sample(&mut out, pair);
    }
    out.push_str("</section>\n");
    out
}

fn quality_section(quality: &Quality) -> String {
    let mut out = String::from("<section id=\"quality\">\n<h2>Quality</h2>\n");
    let _ = writeln!(
        out,
        "<p>Pair precision, recall and F1 against <code>{}</code>, had the run used each k.</p>",
        escape(&quality.against)
    );
    out.push_str(&plot(plots::quality(&quality.rows)));
    if let Some(best) = quality.best_k {
        let _ = writeln!(out, "<p>The best F1 is at k = {best}.</p>");
    }
    out.push_str(
        "<table>\n<thead><tr><th class=\"num\">k</th><th class=\"num\">precision</th>\
         <th class=\"num\">recall</th><th class=\"num\">F1</th></tr></thead>\n<tbody>\n",
    );
    for row in &quality.rows {
        let best = if quality.best_k == Some(row.k) {
            " class=\"best\""
        } else {
            ""
        };
        // The exact format is read back by the tests (see the module's documentation).
        let _ = writeln!(
            out,
            "<tr data-k=\"{0}\"{1}><td>{0}</td><td>{2}</td><td>{3}</td><td>{4}</td></tr>",
            row.k,
            best,
            score(row.precision),
            score(row.recall),
            score(row.f1)
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::data::{DistanceCount, GroupSummary, QualityRow, StageRow};
    use super::*;

    const HOSTILE: &str = "<script>alert(1)</script>";

    fn data(quality: bool) -> ReportData {
        ReportData {
            output: format!("/tmp/out {HOSTILE}"),
            written_at: "2025-01-02T03:04:05Z".to_string(),
            glance: vec![
                ("documents".to_string(), "20".to_string()),
                ("removed".to_string(), "9 & \"more\"".to_string()),
            ],
            parameters: vec![
                ("k".to_string(), "3".to_string()),
                ("features".to_string(), "mode=words'x'".to_string()),
            ],
            stages: vec![
                StageRow {
                    stage: "fingerprint".to_string(),
                    seconds: 0.01234,
                    cores: None,
                },
                StageRow {
                    stage: "match".to_string(),
                    seconds: 12.5,
                    cores: Some(1.876),
                },
            ],
            k: 3,
            fingerprint_bits: 64,
            distances: vec![
                DistanceCount {
                    distance: 0,
                    pairs: 7,
                },
                DistanceCount {
                    distance: 1,
                    pairs: 12,
                },
                DistanceCount {
                    distance: 2,
                    pairs: 0,
                },
                DistanceCount {
                    distance: 3,
                    pairs: 2,
                },
            ],
            min_similarity: Some(0.5),
            dropped_by_verify: 4,
            group_sizes: vec![(2, 3), (3, 1)],
            largest_groups: vec![
                GroupSummary {
                    group_id: 17,
                    size: 3,
                    representative_id: HOSTILE.to_string(),
                    representative_text: Some("\"><img src=x onerror=alert(1)>".to_string()),
                },
                GroupSummary {
                    group_id: 4,
                    size: 2,
                    representative_id: "4".to_string(),
                    representative_text: None,
                },
            ],
            samples: vec![
                SamplePair {
                    distance: 1,
                    id_a: HOSTILE.to_string(),
                    id_b: "b&b".to_string(),
                    similarity: Some(0.8125),
                    text_a: Some("the quick brown fox <b>jumps</b>".to_string()),
                    text_b: Some("the quick red fox <b>jumps</b>".to_string()),
                },
                SamplePair {
                    distance: 3,
                    id_a: "x".to_string(),
                    id_b: "y".to_string(),
                    similarity: None,
                    text_a: Some("only this one".to_string()),
                    text_b: None,
                },
            ],
            quality: quality.then(|| Quality {
                against: format!("truth {HOSTILE}.parquet"),
                rows: vec![
                    QualityRow {
                        k: 2,
                        precision: Some(1.0),
                        recall: Some(0.5),
                        f1: Some(2.0 / 3.0),
                    },
                    QualityRow {
                        k: 3,
                        precision: Some(0.9),
                        recall: Some(0.9),
                        f1: Some(0.9),
                    },
                ],
                best_k: Some(3),
            }),
        }
    }

    #[test]
    fn escape_covers_the_five_characters() {
        assert_eq!(
            escape("a & b < c > d \" e ' f"),
            "a &amp; b &lt; c &gt; d &quot; e &#39; f"
        );
        assert_eq!(escape(HOSTILE), "&lt;script&gt;alert(1)&lt;/script&gt;");
        assert_eq!(escape("数据库 ok"), "数据库 ok");
    }

    #[test]
    fn hostile_text_is_escaped_and_the_page_loads_nothing() {
        let html = render(&data(true));
        let lower = html.to_lowercase();
        assert!(!lower.contains("<script"), "{html}");
        assert!(!lower.contains("<img"), "{html}");
        assert!(!lower.contains("javascript:"), "{html}");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "{html}"
        );
        // The hostile id arrives as text, in the header, the groups table, a sample and quality.
        let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
        assert!(html.matches(escaped).count() >= 5, "{html}");
        assert!(html.contains("9 &amp; &quot;more&quot;"), "{html}");
        assert!(html.contains("mode=words&#39;x&#39;"), "{html}");
        assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
        assert!(html.contains("<meta charset=\"utf-8\">"));
        assert!(html.contains("Content-Security-Policy"));
        assert!(html.contains("default-src 'none'"));
    }

    #[test]
    fn every_section_is_there_and_quality_only_with_scores() {
        let with = render(&data(true));
        for id in ["glance", "distances", "groups", "samples", "quality"] {
            assert_eq!(
                with.matches(&format!("<section id=\"{id}\">")).count(),
                1,
                "{id}"
            );
        }
        assert!(with.contains("<tr data-k=\"3\" class=\"best\"><td>3</td><td>0.900</td><td>0.900</td><td>0.900</td></tr>"), "{with}");
        assert!(
            with.contains(
                "<tr data-k=\"2\"><td>2</td><td>1.000</td><td>0.500</td><td>0.667</td></tr>"
            ),
            "{with}"
        );
        assert!(with.contains("truth &lt;script&gt;"), "{with}");

        let without = render(&data(false));
        for id in ["glance", "distances", "groups", "samples"] {
            assert!(without.contains(&format!("<section id=\"{id}\">")), "{id}");
        }
        assert!(!without.contains("id=\"quality\""), "{without}");
        assert!(!without.contains("data-k="), "{without}");
        assert!(!without.contains("href=\"#quality\""), "{without}");
    }

    #[test]
    fn tables_rows_have_their_documented_format() {
        let html = render(&data(false));
        for (d, n) in [(0, 7), (1, 12), (2, 0), (3, 2)] {
            let row = format!("<tr data-distance=\"{d}\"><td>{d}</td><td>{n}</td></tr>");
            assert!(html.contains(&row), "{row}\n{html}");
        }
        assert_eq!(html.matches("<tr data-distance=").count(), 4);
        assert!(
            html.contains("<tr data-group=\"17\"><td>17</td><td>3</td>"),
            "{html}"
        );
        assert!(
            html.contains("<tr data-group=\"4\"><td>4</td><td>2</td>"),
            "{html}"
        );
        assert!(
            html.contains("estimated Jaccard ≥ 0.5; 4 fingerprint pairs"),
            "{html}"
        );
        assert!(html.contains("<td class=\"num\">0.012</td>"), "{html}");
        assert!(
            html.contains("<td class=\"num\">12.50</td><td class=\"num\">1.88</td>"),
            "{html}"
        );
        assert!(
            html.contains("<td class=\"num\">0.012</td><td class=\"num\">–</td>"),
            "{html}"
        );
        // Both plots are inline SVG.
        assert!(html.matches("<svg").count() >= 2, "{html}");
    }

    #[test]
    fn samples_mark_the_changed_words_on_each_side() {
        let html = render(&data(false));
        assert!(
            html.contains(
                "distance 1: &lt;script&gt;alert(1)&lt;/script&gt; and b&amp;b (similarity 0.812)"
            ) || html.contains(
                "distance 1: &lt;script&gt;alert(1)&lt;/script&gt; and b&amp;b (similarity 0.813)"
            ),
            "{html}"
        );
        assert!(html.contains("<del>brown</del>"), "{html}");
        assert!(html.contains("<ins>red</ins>"), "{html}");
        assert!(!html.contains("<del>red"), "{html}");
        assert!(!html.contains("<ins>brown"), "{html}");
        // The texts' own markup is text.
        assert!(html.contains("&lt;b&gt;jumps&lt;/b&gt;"), "{html}");
        assert!(html.contains("distance 3: x and y</h3>"), "{html}");
        assert!(html.contains(MISSING_TEXT), "{html}");

        let (left, right) = side_by_side("a b c", "a b c");
        assert_eq!((left.as_str(), right.as_str()), ("a b c", "a b c"));
        let (left, right) = side_by_side("one two", "one three four");
        assert_eq!(left, "one <del>two</del>");
        assert!(right.starts_with("one"), "{right}");
        assert!(
            right.contains("<ins>") && right.contains("three") && right.ends_with("four</ins>"),
            "{right}"
        );
        assert!(!right.contains("two"), "{right}");
    }

    #[test]
    fn a_plot_that_fails_is_a_message() {
        let shown = plot(Err("bad <range>".to_string()));
        assert_eq!(
            shown,
            "<p class=\"error\">The plot could not be drawn: bad &lt;range&gt;</p>\n"
        );
        let drawn = plot(Ok("<svg></svg>\n".to_string()));
        assert!(drawn.starts_with("<figure class=\"plot\">"));
    }

    #[test]
    fn empty_runs_render_without_panicking() {
        let mut empty = data(false);
        empty.distances.clear();
        empty.group_sizes.clear();
        empty.largest_groups.clear();
        empty.samples.clear();
        empty.stages.clear();
        empty.k = 0;
        let html = render(&empty);
        assert!(html.contains("No groups."), "{html}");
        assert!(html.contains("The run found no pairs."), "{html}");
        assert!(!html.contains("class=\"error\""), "{html}");
        assert!(html.ends_with("</html>\n"));
    }
}
