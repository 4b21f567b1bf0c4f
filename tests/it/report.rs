//! `neardup report` on the shipped sample: what the page says agrees with the run's own tables
//! read through `neardup query`, and its scores with `neardup eval`; a real browser
//! (`tests/browser/check_report.py`, Selenium with headless Chromium) loads it without a
//! request or an error.
//!
//! The page's tables carry their keys in a fixed format (`src/commands/report/page.rs`):
//! `<tr data-distance="D"><td>D</td><td>N</td></tr>`, `<tr data-group="ID"><td>ID</td>
//! <td>SIZE</td>...` and `<tr data-k="K"...><td>K</td><td>P</td><td>R</td><td>F1</td></tr>`.
//!
//! Where no Python with Selenium, Chromium or chromedriver is found the browser test says so
//! and passes without running, unless `NEARDUP_REQUIRE_BROWSER=1` is set, when it fails.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{fixture, neardup, neardup_ok, path_str, run_sample, stderr, summary};

const SECTIONS: [&str; 4] = ["glance", "distances", "groups", "samples"];

/// The sample's truth, as `evaluation.rs` has it: the written groups, with 14 (an edited copy of
/// 4 beyond k = 3) in 4's.
const TRUTH: &str = "CASE WHEN id IN (1, 5, 9) THEN 'a' WHEN id IN (2, 12) THEN 'b' \
                     WHEN id IN (3, 7, 11) THEN 'c' WHEN id IN (4, 14, 20) THEN 'd' \
                     ELSE CAST(id AS VARCHAR) END";

/// Runs the sample into `dir/out` and writes its report; returns the output and the page.
fn report(dir: &Path, extra: &[&str]) -> (PathBuf, String) {
    let output = dir.join("out");
    run_sample(&output, &[]);
    let page = write_report(&output, extra);
    (output, page)
}

/// `neardup report --output OUTPUT EXTRA...`, insisting it succeeds and says where it wrote.
fn write_report(output: &Path, extra: &[&str]) -> String {
    let mut args = vec!["report", "--output", path_str(output)];
    args.extend_from_slice(extra);
    let said = neardup_ok(&args);
    let file = output.join("report.html");
    assert!(
        said.contains(path_str(&file)),
        "report should print the path it wrote ({}): {said}",
        file.display()
    );
    std::fs::read_to_string(&file).expect("report.html is written")
}

/// The data rows of a `neardup query --format csv` answer, split at commas (numbers only).
fn query_rows(output: &Path, sql: &str) -> Vec<Vec<String>> {
    let csv = neardup_ok(&["query", "--data", path_str(output), "--format", "csv", sql]);
    csv.lines()
        .skip(1)
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.split(',').map(|v| v.trim().to_string()).collect())
        .collect()
}

/// The rows `<tr ATTR="KEY" ...>` of the page, in order: the key and the text of each cell.
fn page_rows(html: &str, attr: &str) -> Vec<(String, Vec<String>)> {
    let marker = format!("<tr {attr}=\"");
    let mut rows = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&marker) {
        rest = &rest[at + marker.len()..];
        let key_end = rest.find('"').expect("the row's key ends");
        let key = rest[..key_end].to_string();
        let row_end = rest.find("</tr>").expect("the row ends");
        let cells = rest[..row_end]
            .split("<td")
            .skip(1)
            .map(|cell| {
                let start = cell.find('>').expect("the cell's tag ends") + 1;
                let end = cell.find("</td>").expect("the cell ends");
                cell[start..end].to_string()
            })
            .collect();
        rows.push((key, cells));
        rest = &rest[row_end..];
    }
    rows
}

fn has_section(html: &str, id: &str) -> bool {
    html.contains(&format!("<section id=\"{id}\">"))
}

#[test]
fn the_report_counts_what_the_run_tables_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (output, html) = report(dir.path(), &[]);
    let k = summary(&output)["parameters"]["k"].as_u64().unwrap();

    for id in SECTIONS {
        assert!(has_section(&html, id), "no section {id}");
    }
    assert!(
        !has_section(&html, "quality"),
        "quality without --truth or --labels"
    );
    assert!(html.starts_with("<!DOCTYPE html>"));
    let lower = html.to_lowercase();
    assert!(!lower.contains("<script"), "the page has a script");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page names an address"
    );

    // Pairs per distance: one row for every distance 0..=k, each the count of `pairs`.
    let counted: HashMap<u64, u64> = query_rows(
        &output,
        "SELECT distance, count(*) FROM pairs GROUP BY distance ORDER BY distance",
    )
    .into_iter()
    .map(|row| (row[0].parse().unwrap(), row[1].parse().unwrap()))
    .collect();
    assert!(!counted.is_empty(), "the sample has pairs");
    let shown = page_rows(&html, "data-distance");
    let distances: Vec<u64> = shown.iter().map(|(d, _)| d.parse().unwrap()).collect();
    assert_eq!(distances, (0..=k).collect::<Vec<_>>(), "{shown:?}");
    for (distance, cells) in &shown {
        let d: u64 = distance.parse().unwrap();
        assert_eq!(cells.len(), 2, "{cells:?}");
        assert_eq!(cells[0], *distance);
        let pairs: u64 = cells[1].parse().unwrap();
        assert_eq!(pairs, counted.get(&d).copied().unwrap_or(0), "distance {d}");
    }
    assert!(
        counted.keys().all(|d| *d <= k),
        "pairs beyond k: {counted:?}"
    );
    let total: u64 = shown
        .iter()
        .map(|(_, c)| c[1].parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, counted.values().sum::<u64>());

    // The largest groups: the sizes `groups` gives them, largest first, with their kept document.
    let sizes: HashMap<String, u64> = query_rows(
        &output,
        "SELECT group_id, max(group_size) FROM groups GROUP BY group_id",
    )
    .into_iter()
    .map(|row| (row[0].clone(), row[1].parse().unwrap()))
    .collect();
    let representatives: HashMap<String, String> = query_rows(
        &output,
        "SELECT DISTINCT group_id, representative_id FROM groups",
    )
    .into_iter()
    .map(|row| (row[0].clone(), row[1].clone()))
    .collect();
    let listed = page_rows(&html, "data-group");
    assert!(!listed.is_empty(), "the sample has groups");
    let mut previous = u64::MAX;
    for (group, cells) in &listed {
        assert_eq!(cells[0], *group);
        let size: u64 = cells[1].parse().unwrap();
        assert_eq!(Some(&size), sizes.get(group), "group {group}");
        assert!(size <= previous, "largest first: {listed:?}");
        previous = size;
        let kept = cells[2]
            .trim_start_matches("<code>")
            .trim_end_matches("</code>");
        assert_eq!(
            Some(&kept.to_string()),
            representatives.get(group),
            "group {group}"
        );
    }
    let largest = sizes.values().copied().max().unwrap();
    assert_eq!(listed[0].1[1], largest.to_string());
}

/// The page's row for k: (precision, recall, F1) as shown.
fn scores_at(html: &str, k: u64) -> Option<[String; 3]> {
    page_rows(html, "data-k")
        .into_iter()
        .find(|(key, _)| *key == k.to_string())
        .map(|(_, cells)| {
            assert_eq!(cells.len(), 4, "{cells:?}");
            [cells[1].clone(), cells[2].clone(), cells[3].clone()]
        })
}

/// A score of `neardup eval --format json` as the page shows it: 3 decimals, `–` when null.
fn as_shown(value: &serde_json::Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "–".to_string(), |v| format!("{v:.3}"))
}

/// Every row of the page's quality table equals `neardup eval`'s row at that k, and the run's
/// k is among them.
fn assert_scores_match_eval(html: &str, output: &Path, k: u64, against: &[&str]) {
    let sweep = format!("0..={k}");
    let mut args = vec!["eval", "--output", path_str(output)];
    args.extend_from_slice(against);
    args.extend_from_slice(&["--sweep", sweep.as_str(), "--format", "json"]);
    let eval: serde_json::Value = serde_json::from_str(&neardup_ok(&args)).unwrap();
    let eval_rows = eval["rows"].as_array().unwrap();
    let rows = page_rows(html, "data-k");
    assert!(!rows.is_empty(), "no quality rows");
    for (key, _) in &rows {
        let at: u64 = key.parse().unwrap();
        let row = eval_rows
            .iter()
            .find(|r| r["k"].as_u64() == Some(at))
            .unwrap_or_else(|| panic!("eval has no row for k = {at}: {eval}"));
        let expected = [
            as_shown(&row["precision"]),
            as_shown(&row["recall"]),
            as_shown(&row["f1"]),
        ];
        assert_eq!(scores_at(html, at), Some(expected), "k = {at}: {eval}");
    }
    assert!(scores_at(html, k).is_some(), "no row for the run's k = {k}");
    // And the plain `eval` at the run's k (no sweep) gives the same F1.
    let mut args = vec!["eval", "--output", path_str(output)];
    args.extend_from_slice(against);
    args.extend_from_slice(&["--format", "json"]);
    let at_k: serde_json::Value = serde_json::from_str(&neardup_ok(&args)).unwrap();
    let row = at_k["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["k"].as_u64() == Some(k))
        .unwrap_or_else(|| panic!("eval has no row for k = {k}: {at_k}"));
    assert_eq!(
        scores_at(html, k).unwrap()[2],
        as_shown(&row["f1"]),
        "{at_k}"
    );
}

#[test]
fn with_a_truth_or_labels_the_report_scores_as_eval_does() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let truth = dir.path().join("truth.parquet");
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT id, {TRUTH} AS cluster FROM '{}') TO '{}'",
            path_str(&sample),
            path_str(&truth)
        ),
    ]);
    let (output, html) = report(dir.path(), &["--truth", path_str(&truth)]);
    let k = summary(&output)["parameters"]["k"].as_u64().unwrap();
    for id in SECTIONS.iter().chain(&["quality"]) {
        assert!(has_section(&html, id), "no section {id}");
    }
    assert!(html.contains("truth.parquet"), "the truth is not named");
    assert_scores_match_eval(&html, &output, k, &["--truth", path_str(&truth)]);
    // The best k is marked, and it is a row of the table.
    let best = html
        .split("<tr data-k=\"")
        .skip(1)
        .filter(|row| {
            row.split('>')
                .next()
                .unwrap_or("")
                .contains("class=\"best\"")
        })
        .count();
    assert_eq!(best, 1, "one best k");

    // Labelled pairs: the same agreement.
    let labels = dir.path().join("labels.tsv");
    std::fs::write(
        &labels,
        "id_a\tid_b\tlabel\n1\t5\t1\n1\t6\t0\n4\t14\t1\n3\t8\t0\n",
    )
    .unwrap();
    let html = write_report(&output, &["--labels", path_str(&labels)]);
    assert!(
        has_section(&html, "quality"),
        "no quality section with --labels"
    );
    assert!(html.contains("labels.tsv"), "the labels are not named");
    assert_scores_match_eval(&html, &output, k, &["--labels", path_str(&labels)]);
}

/// Python with Selenium, Chromium and chromedriver, or `None` (and a note) where one is missing;
/// with `NEARDUP_REQUIRE_BROWSER=1` a missing one fails the test.
fn browser(test: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let python = std::env::var_os("NEARDUP_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = PathBuf::from(std::env::var_os("HOME")?);
            Some(home.join(".cache/neardup/venv/bin/python"))
        })
        .filter(|python| {
            Command::new(python)
                .args(["-c", "import selenium"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let driver = std::env::var_os("CHROMEDRIVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromedriver"));
    let mut missing = Vec::new();
    if python.is_none() {
        missing
            .push("a Python with selenium (NEARDUP_PYTHON or ~/.cache/neardup/venv)".to_string());
    }
    for (what, path) in [("Chromium", &chromium), ("chromedriver", &driver)] {
        if !path.is_file() {
            missing.push(format!("{what} at {}", path.display()));
        }
    }
    if missing.is_empty() {
        return Some((python.unwrap(), chromium, driver));
    }
    let missing = missing.join(", ");
    if std::env::var("NEARDUP_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
        panic!("{test}: NEARDUP_REQUIRE_BROWSER=1 but there is no {missing}");
    }
    eprintln!("{test}: skipped: no {missing}");
    None
}

#[test]
fn a_browser_loads_the_report_without_a_request_or_an_error() {
    let Some((python, chromium, driver)) = browser("a_browser_loads_the_report") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (output, _) = report(dir.path(), &[]);
    let page = output.join("report.html");
    let screenshot = dir.path().join("report.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/check_report.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&page)
        .arg(&screenshot)
        .env("CHROMIUM", &chromium)
        .env("CHROMEDRIVER", &driver)
        .output()
        .expect("check_report.py runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check_report.py failed with {:?}:\n{said}\n{}",
        out.status.code(),
        stderr(&out)
    );
    let seen: serde_json::Value = serde_json::from_str(said.trim())
        .unwrap_or_else(|e| panic!("check_report.py printed no JSON ({e}): {said}"));

    let logs = seen["severe_logs"].as_array().unwrap();
    assert!(logs.is_empty(), "the browser logged errors: {logs:?}");
    let resources = seen["resources"].as_array().unwrap();
    assert!(
        resources.is_empty(),
        "the page fetched something: {resources:?}"
    );
    let sections: Vec<&str> = seen["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    for id in SECTIONS {
        assert!(sections.contains(&id), "no section {id}: {sections:?}");
    }
    assert!(!sections.contains(&"quality"), "{sections:?}");
    let svgs = seen["svgs"].as_array().unwrap();
    assert!(svgs.len() >= 2, "{svgs:?}");
    for svg in svgs {
        let (width, height) = (svg[0].as_f64().unwrap(), svg[1].as_f64().unwrap());
        assert!(
            width > 100.0 && height > 50.0,
            "a plot drawn {width} x {height}: {seen}"
        );
    }
    assert!(
        seen["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{seen}"
    );
    assert!(seen["page_height"].as_u64().unwrap_or(0) > 900, "{seen}");
    let bytes = std::fs::metadata(&screenshot).map(|m| m.len()).unwrap_or(0);
    assert!(bytes > 10_000, "the screenshot has {bytes} bytes");
}

#[test]
fn a_folder_that_is_not_an_output_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("not-an-output");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("notes.txt"), "nothing to report").unwrap();
    let out = neardup(&["report", "--output", path_str(&folder)]);
    let message = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(message.contains(path_str(&folder)), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(
        !folder.join("report.html").exists(),
        "a report of nothing was written"
    );
}
