//! `--keep`: which member of a group represents it, and so which one `dedup` keeps. The rule
//! becomes the ORDER BY that sql/05_groups.sql and sql/05_groups_index.sql choose the
//! representative with; ties, and documents with no value, fall back to input order, so every
//! rule gives the same groups for the same input.

use std::fmt;
use std::str::FromStr;

use datafusion::arrow::datatypes::DataType;

use crate::engine::sql::{Bindings, quote_ident};
use crate::error::{Error, Result};
use crate::input::Corpus;

/// The representative rule of `--keep`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Keep {
    /// The member that comes first in input order (the default, and the original system's).
    #[default]
    First,
    /// The member with the longest text (in UTF-8 bytes).
    Longest,
    /// The member with the shortest text (in UTF-8 bytes).
    Shortest,
    /// The member with the largest or smallest value of an input column.
    Column { rule: ColumnRule, column: String },
}

/// How `--keep RULE:COLUMN` compares the column's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnRule {
    /// The latest time (or largest value).
    Newest,
    /// The earliest time (or smallest value).
    Oldest,
    /// The largest value, e.g. a quality score.
    Max,
    /// The smallest value.
    Min,
}

impl ColumnRule {
    fn name(self) -> &'static str {
        match self {
            ColumnRule::Newest => "newest",
            ColumnRule::Oldest => "oldest",
            ColumnRule::Max => "max",
            ColumnRule::Min => "min",
        }
    }
}

pub const CHOICES: &str = "first, longest, shortest, newest:COLUMN, oldest:COLUMN, \
                           max:COLUMN or min:COLUMN";

impl FromStr for Keep {
    type Err = String;

    fn from_str(given: &str) -> std::result::Result<Self, String> {
        let (rule, column) = match given.split_once(':') {
            Some((rule, column)) => (rule, Some(column)),
            None => (given, None),
        };
        let column_rule = match rule {
            "newest" => Some(ColumnRule::Newest),
            "oldest" => Some(ColumnRule::Oldest),
            "max" => Some(ColumnRule::Max),
            "min" => Some(ColumnRule::Min),
            _ => None,
        };
        match (rule, column_rule, column) {
            ("first", _, None) => Ok(Keep::First),
            ("longest", _, None) => Ok(Keep::Longest),
            ("shortest", _, None) => Ok(Keep::Shortest),
            ("first" | "longest" | "shortest", _, Some(_)) => Err(format!(
                "'{given}': {rule} takes no column (it is the input order or the text's \
                 length); the rules are {CHOICES}"
            )),
            (_, Some(rule), Some(column)) if !column.is_empty() => Ok(Keep::Column {
                rule,
                column: column.to_string(),
            }),
            (_, Some(rule), _) => Err(format!(
                "'{given}': {} compares a column of the input; name it, e.g. {}:fetched_at",
                rule.name(),
                rule.name()
            )),
            _ => Err(format!("'{given}' is not a rule; the rules are {CHOICES}")),
        }
    }
}

impl fmt::Display for Keep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keep::First => f.write_str("first"),
            Keep::Longest => f.write_str("longest"),
            Keep::Shortest => f.write_str("shortest"),
            Keep::Column { rule, column } => write!(f, "{}:{column}", rule.name()),
        }
    }
}

impl Keep {
    pub fn is_first(&self) -> bool {
        *self == Keep::First
    }

    /// Whether the rule prefers the larger key.
    fn descending(&self) -> bool {
        match self {
            Keep::First | Keep::Shortest => false,
            Keep::Longest => true,
            Keep::Column { rule, .. } => matches!(rule, ColumnRule::Newest | ColumnRule::Max),
        }
    }

    /// Checks the rule against the input: a column rule's column exists and holds values that
    /// order (numbers, times, strings, booleans); `match`'s fingerprints have no texts to
    /// measure.
    pub fn check(&self, corpus: &Corpus, has_texts: bool) -> Result<()> {
        match self {
            Keep::First => Ok(()),
            Keep::Longest | Keep::Shortest if !has_texts => Err(Error::Usage(format!(
                "--keep {self} compares the documents' texts, and `neardup match` reads only \
                 fingerprints; choose first or a column rule such as max:COLUMN"
            ))),
            Keep::Longest | Keep::Shortest => Ok(()),
            Keep::Column { column, .. } => {
                let Ok(field) = corpus.schema.field_with_name(column) else {
                    return Err(Error::Input(format!(
                        "--keep {self}: {} has no column '{}'; the columns are: {}",
                        corpus.files[0],
                        crate::error::echo(column),
                        corpus.column_names()
                    )));
                };
                let data_type = field.data_type();
                let text = match data_type {
                    DataType::Dictionary(_, values) => values.as_ref(),
                    other => other,
                };
                if crate::input::is_string(text) {
                    // Strings order as text: "9" after "10", "12/30/2025" after "01/02/2026".
                    let csv = (corpus.formats.iter())
                        .any(|f| f.format == crate::input::format::Format::Csv);
                    let all_text = if csv {
                        " (CSV columns are all text)"
                    } else {
                        ""
                    };
                    crate::to_stderr!(
                        "neardup: --keep {self}: column '{column}' holds text{all_text}, which is \
                         compared as text, character by character (\"9\" above \"10\"; times \
                         only where all are written alike, 2026-01-31T10:00:00Z); to compare \
                         numbers, give them as numbers (Parquet or JSON Lines), times as dates \
                         or timestamps (Parquet)"
                    );
                }
                if orders(data_type) {
                    Ok(())
                } else {
                    Err(Error::Input(format!(
                        "--keep {self}: column '{column}' of {} has type {data_type}, which has \
                         no order to choose by; use a number, a date or time, a string or a \
                         boolean column",
                        corpus.files[0]
                    )))
                }
            }
        }
    }

    /// The `${...}` bindings of the stages that carry and compare the rule's key.
    pub fn bind(&self, b: &mut Bindings) {
        let (source, carried, key) = match self {
            Keep::First => (
                String::new(),
                String::new(),
                "CAST(NULL AS BIGINT)".to_string(),
            ),
            Keep::Longest | Keep::Shortest => {
                (String::new(), String::new(), "text_bytes".to_string())
            }
            Keep::Column { column, .. } => (
                format!(", {} AS keep_value", quote_ident(column)),
                ", keep_value".to_string(),
                "keep_value".to_string(),
            ),
        };
        let order = match (self.is_first(), self.descending()) {
            (true, _) => String::new(),
            (false, true) => "keep_key DESC NULLS LAST, ".to_string(),
            (false, false) => "keep_key ASC NULLS LAST, ".to_string(),
        };
        // The default keeps the plain aggregate: no ordering to carry per group.
        let representative = if self.is_first() {
            "min(input_order)".to_string()
        } else {
            format!("first_value(input_order ORDER BY {order}input_order)")
        };
        b.set("keep_value_source", source)
            .set("keep_value", carried)
            .set("keep_key", key)
            .set("keep_order", order)
            .set("representative_order", representative);
    }
}

/// Whether values of this type can be compared to choose a representative.
fn orders(data_type: &DataType) -> bool {
    use DataType::*;
    match data_type {
        Dictionary(_, values) => orders(values),
        Boolean | Utf8 | LargeUtf8 | Utf8View | Date32 | Date64 | Timestamp(..) | Time32(_)
        | Time64(_) | Duration(_) | Decimal32(..) | Decimal64(..) | Decimal128(..)
        | Decimal256(..) => true,
        other => other.is_numeric(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_print_back() {
        for given in [
            "first",
            "longest",
            "shortest",
            "newest:fetched_at",
            "oldest:fetched_at",
            "max:quality",
            "min:rank",
            "max:a:b",
        ] {
            let keep: Keep = given.parse().unwrap();
            assert_eq!(keep.to_string(), given);
        }
        assert_eq!(
            "max:a:b".parse::<Keep>().unwrap(),
            Keep::Column {
                rule: ColumnRule::Max,
                column: "a:b".into()
            }
        );
    }

    #[test]
    fn bad_rules_say_what_is_allowed() {
        let err = |s: &str| s.parse::<Keep>().unwrap_err();
        assert!(err("last").contains("first, longest"), "{}", err("last"));
        assert!(
            err("newest").contains("newest:fetched_at"),
            "{}",
            err("newest")
        );
        assert!(err("max:").contains("name it"), "{}", err("max:"));
        assert!(
            err("longest:x").contains("takes no column"),
            "{}",
            err("longest:x")
        );
    }

    #[test]
    fn larger_is_preferred_for_longest_newest_and_max() {
        let rendered = |keep: &str| {
            let mut b = Bindings::default();
            keep.parse::<Keep>().unwrap().bind(&mut b);
            b
        };
        for (keep, order) in [
            ("longest", "keep_key DESC NULLS LAST, "),
            ("newest:t", "keep_key DESC NULLS LAST, "),
            ("max:q", "keep_key DESC NULLS LAST, "),
            ("shortest", "keep_key ASC NULLS LAST, "),
            ("oldest:t", "keep_key ASC NULLS LAST, "),
            ("min:q", "keep_key ASC NULLS LAST, "),
            ("first", ""),
        ] {
            assert_eq!(rendered(keep).get("keep_order"), Some(order), "{keep}");
        }
        assert_eq!(
            rendered("first").get("representative_order"),
            Some("min(input_order)")
        );
        assert_eq!(
            rendered("max:q").get("keep_value_source"),
            Some(", \"q\" AS keep_value")
        );
    }

    #[test]
    fn only_ordered_types_are_accepted() {
        assert!(orders(&DataType::Float64));
        assert!(orders(&DataType::Timestamp(
            datafusion::arrow::datatypes::TimeUnit::Microsecond,
            None
        )));
        assert!(orders(&DataType::Utf8View));
        assert!(!orders(&DataType::Binary));
        assert!(!orders(&DataType::new_list(DataType::Int32, true)));
    }
}
