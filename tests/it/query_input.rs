//! `neardup query`: where its SQL comes from (argument, -c, -f, standard input), how many rows
//! the table format shows, and the delimited formats.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::{neardup, neardup_ok, path_str, stderr, summary};

const HUNDRED: &str = "SELECT value AS n FROM generate_series(1, 100) ORDER BY n";

#[test]
fn the_table_format_shows_maxrows_and_counts_the_rest() {
    let table = neardup_ok(&["query", HUNDRED]);
    let lines: Vec<&str> = table.lines().collect();
    // Border, header, border, 40 rows, border, the count.
    assert_eq!(lines.len(), 45, "{table}");
    // Widths come from the rows shown.
    assert_eq!(lines[3], "| 1  |");
    assert_eq!(lines[42], "| 40 |");
    assert_eq!(
        lines[44],
        "100 rows, 40 shown (--maxrows N or inf shows more)"
    );

    let all = neardup_ok(&["query", "--maxrows", "inf", HUNDRED]);
    assert_eq!(all.lines().count(), 104, "{all}");
    assert!(all.contains("| 100 |") && !all.contains("shown"), "{all}");
    let three = neardup_ok(&["query", "--maxrows", "3", HUNDRED]);
    assert_eq!(three.lines().count(), 8, "{three}");
    // A result that fits prints no count; the other formats write every row.
    let fits = neardup_ok(&["query", "--maxrows", "100", HUNDRED]);
    assert!(!fits.contains("shown"), "{fits}");
    let csv = neardup_ok(&["query", "--format", "csv", HUNDRED]);
    assert_eq!(csv.lines().count(), 101);

    let refused = neardup(&["query", "--maxrows", "many", HUNDRED]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("inf"), "{}", stderr(&refused));
}

#[test]
fn sql_comes_from_commands_files_and_standard_input_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("statements.sql");
    std::fs::write(
        &file,
        "CREATE VIEW w AS SELECT y * 10 AS z FROM v;\n-- the last one is written\nSELECT z FROM w\n",
    )
    .unwrap();
    // The argument, then each -c, then each -f: the views build on each other.
    let csv = neardup_ok(&[
        "query",
        "--format",
        "csv",
        "-c",
        "CREATE VIEW v AS SELECT x + 1 AS y FROM u",
        "-f",
        path_str(&file),
        "CREATE VIEW u AS SELECT 1 AS x",
    ]);
    assert_eq!(csv, "z\n20\n");

    // Standard input, when no SQL is given otherwise.
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["query", "--format", "tsv"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"SELECT 1 AS a, 'x y' AS b;\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "a\tb\n1\tx y\n");

    // Nothing on standard input: a usage error, not a hang.
    let empty = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["query"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(2), "{}", stderr(&empty));
    assert!(stderr(&empty).contains("no SQL"), "{}", stderr(&empty));

    // A file that is not there is named.
    let missing = dir.path().join("missing.sql");
    let refused = neardup(&["query", "-f", path_str(&missing)]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("missing.sql"),
        "{}",
        stderr(&refused)
    );
}

/// As datafusion-cli: `json` is one array, `ndjson` an object per line; both read back by
/// serde_json as the rows.
#[test]
fn json_is_an_array_and_ndjson_its_lines() {
    let sql = "SELECT value AS n, 'a' || value AS s FROM generate_series(1, 3) ORDER BY n";
    let rows = serde_json::json!([{"n": 1, "s": "a1"}, {"n": 2, "s": "a2"}, {"n": 3, "s": "a3"}]);
    let json = neardup_ok(&["query", "--format", "json", sql]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&json).unwrap(),
        rows
    );
    let ndjson = neardup_ok(&["query", "--format", "ndjson", sql]);
    let lines: Vec<serde_json::Value> = ndjson
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(serde_json::Value::Array(lines), rows);
    // No rows: an empty array, and no lines.
    let none = "SELECT 1 AS n WHERE false";
    let empty = neardup_ok(&["query", "--format", "json", none]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&empty).unwrap(),
        serde_json::json!([])
    );
    assert_eq!(neardup_ok(&["query", "--format", "ndjson", none]), "");
    // A date the writers cannot show was written as the string "ERROR: ..." with exit 0; it
    // is refused with the row and the column, and a --out file is not left behind. Dates they
    // can show are written as dates.
    let dir = tempfile::tempdir().unwrap();
    let dates = "SELECT value AS n, CASE WHEN value = 2 \
                 THEN arrow_cast(9223372036854775807, 'Date64') \
                 ELSE arrow_cast(86400000 * value, 'Date64') END AS day \
                 FROM generate_series(1, 3) ORDER BY n";
    // Inside a struct too.
    let nested = format!("SELECT n, named_struct('d', day) AS s FROM ({dates})");
    for format in ["json", "ndjson"] {
        for (sql, column) in [(dates, "day"), (nested.as_str(), "s")] {
            let out = dir.path().join(format!("dates.{format}"));
            let failed = neardup(&["query", "--format", format, "--out", path_str(&out), sql]);
            let message = stderr(&failed);
            assert_eq!(failed.status.code(), Some(1), "{message}");
            assert!(
                message.contains(&format!(
                    "row 2 of the result, column '{column}': Cast error"
                )),
                "{message}"
            );
            assert!(!out.exists(), "{format}");
        }
    }
    let shown = neardup_ok(&["query", "--format", "ndjson", &dates.replace("= 2", "= 0")]);
    assert!(
        shown.starts_with("{\"n\":1,\"day\":\"1970-01-02T00:00:00\"}"),
        "{shown}"
    );
}

/// `--out` without `--format` writes the format its extension names: a `.parquet` file is
/// Parquet (read back by SQL), a `.csv` CSV; another extension gets the table.
#[test]
fn out_takes_its_format_from_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let sql = "SELECT value AS n FROM generate_series(1, 3) ORDER BY n";
    let parquet = dir.path().join("rows.parquet");
    neardup_ok(&["query", "--out", path_str(&parquet), sql]);
    let back = format!("SELECT sum(n) AS total FROM '{}'", path_str(&parquet));
    assert_eq!(
        neardup_ok(&["query", "--format", "csv", &back]),
        "total\n6\n"
    );
    let csv = dir.path().join("rows.csv");
    neardup_ok(&["query", "--out", path_str(&csv), sql]);
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "n\n1\n2\n3\n");
    let text = dir.path().join("rows.txt");
    neardup_ok(&["query", "--out", path_str(&text), sql]);
    assert!(std::fs::read_to_string(&text).unwrap().contains("| n |"));
    // A compressed name was written as the table, uncompressed.
    let gz = dir.path().join("rows.csv.gz");
    let refused = neardup(&["query", "--out", path_str(&gz), sql]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("written uncompressed"),
        "{}",
        stderr(&refused)
    );
    assert!(!gz.exists());
    neardup_ok(&["query", "--format", "csv", "--out", path_str(&gz), sql]);
    assert_eq!(std::fs::read_to_string(&gz).unwrap(), "n\n1\n2\n3\n");
}

/// `COPY ... TO` a JSON Lines name writes an object per line (DataFusion knows the format only
/// as `.json`: "no registered file format with ext jsonl"), which `run` reads back.
#[test]
fn copy_to_a_json_lines_name_writes_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let sql = "SELECT value AS id, 'page ' || CAST(value AS VARCHAR) AS text \
               FROM generate_series(1, 3) ORDER BY id";
    for name in ["rows.jsonl", "rows.ndjson"] {
        let file = dir.path().join(name);
        let copy = format!("COPY ({sql}) TO '{}'", path_str(&file));
        neardup_ok(&["query", &copy]);
        let written = std::fs::read_to_string(&file).unwrap();
        let rows: Vec<serde_json::Value> = written
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        assert_eq!(ids, [1, 2, 3], "{written}");
        assert_eq!(rows[2]["text"], "page 3", "{written}");
        let out = dir.path().join(format!("{name}.out"));
        neardup_ok(&[
            "run",
            "--input",
            path_str(&file),
            "--output",
            path_str(&out),
            "-q",
        ]);
        assert_eq!(summary(&out)["counts"]["documents"], 3);
    }
}

/// Files named in a query: JSON Lines by `.jsonl` or `.ndjson`, compressed too, read as `run`
/// reads them (DataFusion's url tables answered "table not found"); a CSV file whose columns
/// DataFusion cannot infer (line breaks inside quoted values) read as `run` reads it, its
/// columns text, where any other CSV file keeps DataFusion's types; a file that is there but
/// cannot be read is named with the reader's error.
#[test]
fn corpus_files_in_json_lines_and_csv_are_tables_by_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("pages.jsonl");
    let lines = "{\"id\": 1, \"text\": \"one\"}\n{\"id\": 2, \"text\": \"two\"}\n\
                 {\"id\": 3, \"text\": \"three\"}\n";
    std::fs::write(&jsonl, lines).unwrap();
    let ndjson = dir.path().join("pages.ndjson");
    std::fs::write(&ndjson, lines).unwrap();
    let gz = dir.path().join("pages.jsonl.gz");
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT * FROM '{}') TO '{}' STORED AS JSON \
             OPTIONS ('format.compression' 'gzip')",
            jsonl.display(),
            gz.display()
        ),
    ]);
    for file in [&jsonl, &ndjson, &gz] {
        let sum = format!(
            "SELECT count(*) AS n, sum(id) AS s FROM '{}'",
            file.display()
        );
        assert_eq!(
            neardup_ok(&["query", "--format", "csv", &sum]),
            "n,s\n3,6\n",
            "{}",
            file.display()
        );
    }

    // Past DataFusion's first chunk it failed ("unequal lengths between records").
    let csv = dir.path().join("pages.csv");
    let records: String = (0..2000)
        .map(|i| format!("{i},\"line one of {i}\nline, two \"\"q\"\"\nthree\"\n"))
        .collect();
    std::fs::write(&csv, format!("id,text\n{records}")).unwrap();
    let count = format!("SELECT count(*) AS n FROM '{}'", csv.display());
    assert_eq!(
        neardup_ok(&["query", "--format", "csv", &count]),
        "n\n2000\n"
    );
    let last = neardup_ok(&[
        "query",
        "--format",
        "ndjson",
        &format!("SELECT id, text FROM '{}' WHERE id = '1999'", csv.display()),
    ]);
    assert_eq!(
        last,
        "{\"id\":\"1999\",\"text\":\"line one of 1999\\nline, two \\\"q\\\"\\nthree\"}\n"
    );

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\": 1}\n{not json\n").unwrap();
    // A Parquet file cut short, and a file of no format DataFusion knows, were "table not
    // found" or an error without the file's name.
    let cut = dir.path().join("cut.parquet");
    let sample = std::fs::read(crate::common::fixture("sample.parquet")).unwrap();
    std::fs::write(&cut, &sample[..1000]).unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "id,text\n").unwrap();
    for (file, format, reason) in [
        (bad, " as JSON Lines", "Json error"),
        (cut, "", "Corrupt footer"),
        (notes, "", "No file_format found with extension txt"),
    ] {
        let failed = neardup(&["query", &format!("SELECT * FROM '{}'", file.display())]);
        let message = stderr(&failed);
        assert_eq!(failed.status.code(), Some(1), "{message}");
        assert!(
            message.contains(&format!("reading '{}'{format}", file.display()))
                && message.contains(reason),
            "{message}"
        );
    }
    // A missing file is no table, as for any name; so a table may be created by such a name.
    let missing = dir.path().join("missing.jsonl");
    let failed = neardup(&["query", &format!("SELECT * FROM '{}'", missing.display())]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(stderr(&failed).contains("not found"), "{}", stderr(&failed));
    let created = neardup_ok(&[
        "query",
        "--format",
        "csv",
        "-c",
        "CREATE TABLE \"t.jsonl\" AS SELECT 1 AS x",
        "-c",
        "SELECT x FROM \"t.jsonl\"",
    ]);
    assert_eq!(created, "x\n1\n");
    // A CSV file DataFusion reads keeps its types, alone or in a folder's pattern.
    let numbers = dir.path().join("numbers");
    std::fs::create_dir_all(&numbers).unwrap();
    std::fs::write(numbers.join("n.csv"), "id,n\n1,9\n2,10\n").unwrap();
    for place in [numbers.join("n.csv"), numbers.join("*.csv")] {
        let sql = format!("SELECT max(n) AS m, sum(n) AS s FROM '{}'", place.display());
        assert_eq!(
            neardup_ok(&["query", "--format", "csv", &sql]),
            "m,s\n10,19\n"
        );
    }
}

/// A run's table named without `--data` was only "table not found": the message says where
/// those tables come from, and only for them.
#[test]
fn a_run_table_without_data_says_to_give_data() {
    let failed = neardup(&["query", "SELECT group_id FROM groups"]);
    assert_eq!(failed.status.code(), Some(1));
    let message = stderr(&failed);
    assert!(
        message.contains("not found") && message.contains("--data <its --output>"),
        "{message}"
    );
    let other = neardup(&["query", "SELECT * FROM nosuch"]);
    assert_eq!(other.status.code(), Some(1));
    assert!(!stderr(&other).contains("--data"), "{}", stderr(&other));
}

/// `SELECT id, cluster FROM ...` does not parse (`cluster` is a SQL keyword, and the truth
/// files' column): the message says to quote it, and quoted it runs.
#[test]
fn a_keyword_where_a_column_was_meant_is_named() {
    let inner = "(SELECT 1 AS id, 'a' AS \"cluster\") t";
    let failed = neardup(&["query", &format!("SELECT id, cluster FROM {inner}")]);
    assert_eq!(failed.status.code(), Some(1));
    let message = stderr(&failed);
    assert!(
        message.contains("cluster is a SQL keyword") && message.contains("(\"cluster\")"),
        "{message}"
    );
    let quoted = format!("SELECT id, \"cluster\" FROM {inner}");
    assert_eq!(
        neardup_ok(&["query", "--format", "csv", &quoted]),
        "id,cluster\n1,a\n"
    );
}
