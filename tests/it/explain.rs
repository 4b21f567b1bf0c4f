//! `neardup explain` on the shipped sample: what it says of a pair and of a group agrees with
//! the run's own tables, read independently through `neardup query`.

use crate::common::{neardup, neardup_ok, path_str, run_sample, stderr};

/// One value from `neardup query` (the first column of the first row, as CSV text).
fn value(output: &std::path::Path, sql: &str) -> String {
    let csv = neardup_ok(&["query", "--data", path_str(output), "--format", "csv", sql]);
    csv.lines().nth(1).unwrap_or_default().to_string()
}

fn explain_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["explain", "--format", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&neardup_ok(&all)).expect("explain --format json writes JSON")
}

#[test]
fn a_pair_is_explained_as_the_run_paired_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    run_sample(&output, &[]);
    let out = path_str(&output);

    // 3 and 11 differ by one word and are paired.
    let pair = explain_json(&["--output", out, "3", "11"]);
    let listed = |column: &str| {
        value(
            &output,
            &format!("SELECT {column} FROM pairs WHERE id_a = 3 AND id_b = 11"),
        )
    };
    assert_eq!(pair["paired"], true, "{pair}");
    assert_eq!(pair["distance"].to_string(), listed("distance"), "{pair}");
    let similarity: f64 = listed("similarity").parse().unwrap();
    assert!((pair["estimated_jaccard"].as_f64().unwrap() - similarity).abs() < 1e-9);
    let group = value(&output, "SELECT group_id FROM groups WHERE id = 3");
    assert_eq!(pair["a"]["group"]["group_id"], group.as_str(), "{pair}");
    assert_eq!(pair["b"]["group"]["group_id"], group.as_str(), "{pair}");
    // One word changed: most features are shared, and the diff shows the change.
    let exact = pair["features"]["exact_jaccard"].as_f64().unwrap();
    assert!(exact > 0.5 && exact < 1.0, "{pair}");
    assert!(pair["features"]["only_a"].as_u64().unwrap() > 0, "{pair}");
    let changes = pair["diff"]["changes"].as_array().unwrap();
    assert!(!changes.is_empty(), "{pair}");
    assert!(
        pair["verdict"].as_str().unwrap().starts_with("paired"),
        "{pair}"
    );

    // 3 and 4 are different pages: not paired, and the verdict gives the distance the run saw.
    let apart = explain_json(&["--output", out, "3", "4"]);
    let distance = value(
        &output,
        "SELECT hamming(a.simhash, b.simhash) FROM signatures a, signatures b \
         WHERE a.id = 3 AND b.id = 4",
    );
    assert_eq!(apart["distance"].to_string(), distance);
    assert_eq!(apart["paired"], false);
    let verdict = apart["verdict"].as_str().unwrap();
    assert!(verdict.starts_with("not paired"), "{verdict}");
    assert!(
        verdict.contains(&format!("distance {distance}")),
        "{verdict}"
    );

    // 13's text is NULL: no fingerprint, which is the reason.
    let null = explain_json(&["--output", out, "3", "13"]);
    assert!(
        null["verdict"]
            .as_str()
            .unwrap()
            .contains("13 has no fingerprint"),
        "{null}"
    );

    // The text form says the same for a person.
    let text = neardup_ok(&["explain", "--output", out, "3", "11"]);
    assert!(text.starts_with("3 and 11 in "), "{text}");
    assert!(text.contains("paired: distance"), "{text}");
    assert!(text.contains("exact Jaccard"), "{text}");
    assert!(text.contains("[-") || text.contains("{+"), "{text}");
}

#[test]
fn a_group_lists_its_members_and_a_loner_its_nearest_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    run_sample(&output, &[]);
    let out = path_str(&output);

    let group = explain_json(&["--output", out, "--id", "11"]);
    let members: Vec<&str> = group["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let expected = value(
        &output,
        "SELECT string_agg(CAST(g.id AS VARCHAR), ' ' ORDER BY s.input_order) FROM groups g \
         JOIN signatures s ON s.id = g.id \
         WHERE g.group_id = (SELECT group_id FROM groups WHERE id = 11)",
    );
    assert_eq!(members.join(" "), expected, "{group}");
    let representative = value(
        &output,
        "SELECT representative_id FROM groups WHERE id = 11",
    );
    assert_eq!(group["group"]["representative_id"], representative.as_str());
    let text = neardup_ok(&["explain", "--output", out, "--id", "11"]);
    assert!(text.contains(&format!("{representative} (kept)")), "{text}");

    // 17 is a short unrelated text: in no group; its nearest fingerprint is the brute-force one.
    let loner = explain_json(&["--output", out, "--id", "17"]);
    assert!(loner["group"].is_null(), "{loner}");
    let nearest = value(
        &output,
        "SELECT min(hamming(s.simhash, d.simhash)) FROM signatures s, signatures d \
         WHERE d.id = 17 AND s.id <> 17 AND s.simhash IS NOT NULL",
    );
    assert_eq!(
        loner["nearest"][0]["distance"].to_string(),
        nearest,
        "{loner}"
    );
    let text = neardup_ok(&["explain", "--output", out, "--id", "17"]);
    assert!(text.contains("is in no group"), "{text}");
}

#[test]
fn explain_refuses_what_it_cannot_answer() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    run_sample(&output, &[]);
    let out = path_str(&output);

    let unknown = neardup(&["explain", "--output", out, "3", "999"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("no document with id 999"),
        "{}",
        stderr(&unknown)
    );
    let same = neardup(&["explain", "--output", out, "3", "3"]);
    assert_eq!(same.status.code(), Some(2));
    assert!(stderr(&same).contains("--id 3"), "{}", stderr(&same));
    let one = neardup(&["explain", "--output", out, "3"]);
    assert_eq!(one.status.code(), Some(2));
    let not_an_output = neardup(&["explain", "--output", path_str(dir.path()), "3", "11"]);
    assert_eq!(not_an_output.status.code(), Some(1));
    assert!(
        stderr(&not_an_output).contains("not a complete neardup output"),
        "{}",
        stderr(&not_an_output)
    );
    // A mistyped folder was "not a complete neardup output" too.
    let typo = dir.path().join("out-typo");
    let missing = neardup(&["explain", "--output", path_str(&typo), "3", "11"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains(&format!("{}: no such folder", typo.display())),
        "{}",
        stderr(&missing)
    );
    for failed in [&unknown, &same, &one, &not_an_output, &missing] {
        assert!(!stderr(failed).contains("panicked"), "{}", stderr(failed));
    }
}
