//! README's command synopsis against the command line itself: every flag it shows exists, and
//! every flag of every command is shown, so the first page a newcomer reads tells the truth.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::neardup_ok;

/// `--flag` words in `text`.
fn flags(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        if let Some(name) = word.strip_prefix("--")
            && name.starts_with(|c: char| c.is_ascii_lowercase())
        {
            found.insert(format!("--{name}"));
        }
    }
    found
}

/// The flags each command lists in `--help` (the lines that start with a flag).
fn help_flags(command: &str) -> BTreeSet<String> {
    let help = neardup_ok(&[command, "--help"]);
    help.lines()
        .filter_map(|line| {
            // `  --name <VALUE>` or `  -c, --name <VALUE>`; other lines (descriptions, the
            // `- value:` lists of possible values) do not start with a flag.
            let mut words = line.split_whitespace();
            let first = words.next()?;
            let long = if first.len() == 3 && first.starts_with('-') && first.ends_with(',') {
                words.next()?
            } else {
                first
            };
            long.starts_with("--").then(|| long.to_string())
        })
        .filter(|flag| flag != "--help" && flag != "--version")
        .collect()
}

#[test]
fn readme_synopsis_matches_every_commands_flags() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let mut synopsis: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in readme.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some("neardup")
            && let Some(command) = words.next()
            && command.starts_with(|c: char| c.is_ascii_lowercase())
        {
            synopsis
                .entry(command.to_string())
                .or_default()
                .extend(flags(line));
        }
    }
    // Every command `neardup --help` lists has a synopsis line.
    let top = neardup_ok(&["--help"]);
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|command| *command != "help")
        .collect();
    assert!(commands.len() >= 9, "{top}");
    for command in commands {
        let shown = synopsis
            .get(command)
            .unwrap_or_else(|| panic!("README has no synopsis line for `neardup {command}`"));
        let real = help_flags(command);
        let unknown: Vec<_> = shown.difference(&real).collect();
        let missing: Vec<_> = real.difference(shown).collect();
        assert!(
            unknown.is_empty() && missing.is_empty(),
            "neardup {command}: README shows flags it does not have: {unknown:?}; README \
             leaves out: {missing:?}"
        );
    }
}
