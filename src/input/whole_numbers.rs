//! JSON Lines files read without a silent change. The JSON reader infers a file's columns from
//! its first lines. Where those hold whole numbers the column is Int64, and a later number that
//! is not one (`5000.5`, `-9223372036854775809`) is cut to fit without an error (arrow-json's
//! fallback through a 64-bit float; a string such as `"2.5"` is the reader's own error); and a
//! key first written after those lines is no column, and its values are dropped. A run would
//! then give ids and dedup rows values the input does not hold, or lose them, so every line is
//! checked against what the reader makes of it.
//!
//! The check reads the file with the JSON reader's own decoder in strict mode, the whole-number
//! columns as text (a number as written), in 4 MiB chunks. Decoding those columns alone made
//! the id check of 229 MB of pages 0.29-0.33 s against 0.25 s without it, where parsing each
//! line with serde in the store's 8 KiB chunks made it 1.75-2.42 s; decoding every column, to
//! find keys that are no column, made that of 417 MB 0.44-0.50 s against 0.32-0.37 s. Only
//! when it finds something is the file read again, line by line, to name the line
//! (`super::bad_line`).

use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::{Array, AsArray, OffsetSizeTrait};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::json::ReaderBuilder;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::value::RawValue;

/// A top-level column that holds whole numbers (Int64), or lists of them.
#[derive(Debug, Clone, PartialEq)]
pub struct WholeColumn {
    pub name: String,
    /// Its type: Int64, or lists (of lists) of it.
    pub data_type: DataType,
}

impl WholeColumn {
    fn in_lists(&self) -> bool {
        self.data_type != DataType::Int64
    }
}

/// Rows decoded at a time.
const BATCH_ROWS: usize = 8192;

/// What the JSON reader would change without an error, found first in a file by
/// `first_change`.
#[derive(Debug, PartialEq)]
pub enum Change {
    /// A whole-number column's value in this row (from 0) may be read as another number.
    Number(u64),
    /// A field that is not one of the file's columns (a key first written after the lines the
    /// columns were inferred from), which the reader drops, in the rows from `from_row` on;
    /// `what` is the decoder's message, which names the field.
    Field { from_row: u64, what: String },
}

/// The first change in the JSON Lines text `text` whose columns are `schema` (as inferred,
/// without partition columns), `columns` its whole-number ones; `None` when there is none, or
/// the decoder stops on text the reader refuses itself, with its own error. The decoder gives
/// the whole-number columns' numbers and strings alike as text: a string found here (which the
/// reader refuses itself) is told apart by the line's check (`changed_in_line`). Its strict
/// mode refuses any field the schema does not have, inside objects too.
pub async fn first_change(
    mut text: BoxStream<'static, datafusion::error::Result<Bytes>>,
    schema: &Schema,
    columns: &[WholeColumn],
) -> Option<Change> {
    let mut whole = Vec::new();
    let fields: Vec<Field> = (schema.fields().iter().enumerate())
        .map(
            |(at, field)| match columns.iter().find(|c| &c.name == field.name()) {
                Some(column) => {
                    whole.push(at);
                    Field::new(&column.name, as_text(&column.data_type), true)
                }
                None => field.as_ref().clone().with_nullable(true),
            },
        )
        .collect();
    // Whole numbers as written; no field beyond the schema.
    let mut decoder = ReaderBuilder::new(Arc::new(Schema::new(fields)))
        .with_coerce_primitive(true)
        .with_strict_mode(true)
        .with_batch_size(BATCH_ROWS)
        .build_decoder()
        .ok()?;
    let mut rows = 0;
    // `Err` where the decoder stopped on something else.
    let mut check = |decoder: &mut datafusion::arrow::json::reader::Decoder| {
        let batch = match decoder.flush() {
            Ok(Some(batch)) => batch,
            Ok(None) => return Ok(None),
            Err(error) if error.to_string().contains("missing from schema") => {
                let what = error.to_string();
                let what = what
                    .strip_prefix("Json error: ")
                    .unwrap_or(&what)
                    .to_string();
                return Ok(Some(Change::Field {
                    from_row: rows,
                    what,
                }));
            }
            Err(_) => return Err(()),
        };
        let found = (whole.iter())
            .filter_map(|&at| first_changed_in(batch.column(at).as_ref()))
            .min();
        let first = rows;
        rows += batch.num_rows() as u64;
        Ok(found.map(|row| Change::Number(first + row as u64)))
    };
    while let Some(chunk) = text.next().await {
        let chunk = chunk.ok()?;
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            let read = decoder.decode(rest).ok()?;
            rest = &rest[read..];
            // The decoder stops short when it holds a batch's rows.
            if !rest.is_empty()
                && let Some(change) = check(&mut decoder).ok()?
            {
                return Some(change);
            }
        }
    }
    check(&mut decoder).ok()?
}

/// The first top-level key of the JSON Lines line `line` that is not among `names` (the file's
/// columns) and holds a value other than null, described for an error; `None` for a line
/// without one, and for a line that is not one JSON object.
pub fn unknown_key_in_line(names: &[String], line: &[u8]) -> Option<String> {
    let object: std::collections::HashMap<String, &RawValue> = serde_json::from_slice(line).ok()?;
    // A null drops nothing: the column would hold NULL there anyway.
    let mut keys: Vec<&String> = (object.iter())
        .filter(|(key, value)| !names.contains(key) && value.get() != "null")
        .map(|(key, _)| key)
        .collect();
    keys.sort();
    let key = crate::error::echo(keys.first()?);
    let listed = super::listed_columns(names.iter().map(String::as_str));
    Some(format!(
        "it has the key \"{key}\", which is not among the columns inferred from the first lines \
         ({listed}), and the reader would drop its values"
    ))
}

/// `data_type` with text for Int64.
fn as_text(data_type: &DataType) -> DataType {
    match data_type {
        DataType::List(item) => DataType::List(Arc::new(Field::new(
            item.name(),
            as_text(item.data_type()),
            true,
        ))),
        DataType::LargeList(item) => DataType::LargeList(Arc::new(Field::new(
            item.name(),
            as_text(item.data_type()),
            true,
        ))),
        _ => DataType::Utf8,
    }
}

/// The first row of `column` (numbers as text, or lists of them) holding a number that an
/// Int64 column's reader changes. A list column's items are searched at once, and the row is
/// the list whose offsets hold the item found (the decoder's lists are contiguous).
fn first_changed_in(column: &dyn Array) -> Option<usize> {
    fn row_of<O: OffsetSizeTrait>(offsets: &OffsetBuffer<O>, item: usize) -> Option<usize> {
        let row = offsets
            .partition_point(|o| o.as_usize() <= item)
            .checked_sub(1)?;
        (row + 1 < offsets.len()).then_some(row)
    }
    if let Some(texts) = column.as_string_opt::<i32>() {
        return texts.iter().position(|text| text.is_some_and(changed));
    }
    if let Some(lists) = column.as_list_opt::<i32>() {
        return row_of(lists.offsets(), first_changed_in(lists.values().as_ref())?);
    }
    let lists = column.as_list_opt::<i64>()?;
    row_of(lists.offsets(), first_changed_in(lists.values().as_ref())?)
}

/// Whether the reader reads `literal` (a number as written) as a number of another value.
fn changed(literal: &str) -> bool {
    // Almost every value: an integer as written.
    if literal.parse::<i64>().is_ok() {
        return false;
    }
    read_as_int64(literal).is_some_and(|read| whole_value(literal) != Some(read))
}

/// The columns of `schema` whose values the reader may cut: Int64, and lists (of lists) of
/// Int64. Inside objects (struct columns) nothing is checked.
pub fn whole_columns(schema: &Schema) -> Vec<WholeColumn> {
    fn holds_int64(data_type: &DataType) -> bool {
        match data_type {
            DataType::Int64 => true,
            DataType::List(item) | DataType::LargeList(item) => holds_int64(item.data_type()),
            _ => false,
        }
    }
    schema
        .fields()
        .iter()
        .filter(|field| holds_int64(field.data_type()))
        .map(|field| WholeColumn {
            name: field.name().clone(),
            data_type: field.data_type().clone(),
        })
        .collect()
}

/// What is wrong with one line (without its line break) of a JSON Lines file: the first value
/// of `columns` that the reader would read as another number, described for an error. `None`
/// for a line without one, and for a line that is not one JSON object (the reader's own errors
/// name those).
pub fn changed_in_line(columns: &[WholeColumn], line: &[u8]) -> Option<String> {
    // Values are borrowed, not parsed: only the checked columns' are looked at.
    let object: std::collections::HashMap<String, &RawValue> = serde_json::from_slice(line).ok()?;
    columns.iter().find_map(|column| {
        let value = object.get(&column.name)?;
        let (literal, read) = first_changed(value)?;
        let name = &column.name;
        let (is, holds) = if column.in_lists() && value.get().starts_with('[') {
            (
                format!("holds {literal} in a list"),
                "lists of whole numbers",
            )
        } else {
            (format!("is {literal}"), "whole numbers")
        };
        Some(format!(
            "its \"{name}\" {is}, where the column (inferred from the first lines) holds \
             {holds} (Int64), and the reader would read it as {read}"
        ))
    })
}

/// The first value in `value` (itself, or inside its lists) that an Int64 column's reader
/// changes, as written, with what it reads.
fn first_changed(value: &RawValue) -> Option<(String, i64)> {
    let text = value.get();
    if text.starts_with('[') {
        let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
        return items.into_iter().find_map(first_changed);
    }
    // A string in a number column is parsed without the float's fallback: one that is not an
    // integer is the reader's own error.
    if text.starts_with('"') {
        return None;
    }
    let read = read_as_int64(text)?;
    changed(text).then(|| (crate::error::echo(text), read))
}

/// What the JSON reader puts in an Int64 column for `literal`: the integer as written, else the
/// literal as a 64-bit float cut towards zero when that fits Int64; `None` where it fails (an
/// error the reader reports itself).
fn read_as_int64(literal: &str) -> Option<i64> {
    if let Ok(value) = literal.parse::<i64>() {
        return Some(value);
    }
    let float = literal.parse::<f64>().ok()?;
    // -2^63 and 2^63 are exact in f64: the range the reader's cast (num-traits) takes.
    const LIMIT: f64 = 9_223_372_036_854_775_808_f64;
    let fits = (-LIMIT..LIMIT).contains(&float);
    fits.then_some(float as i64)
}

/// The exact value of the decimal number `literal` (`-12.50e3`, as JSON and the reader write
/// numbers) when it is a whole number that fits Int64; `None` for a fraction, a value out of
/// range or anything else.
fn whole_value(literal: &str) -> Option<i64> {
    let (negative, unsigned) = match literal.as_bytes().first()? {
        b'-' => (true, &literal[1..]),
        b'+' => (false, &literal[1..]),
        _ => (false, literal),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() {
        return Some(0);
    }
    let exponent: i64 = match exponent {
        Some(e) => e.strip_prefix('+').unwrap_or(e).parse().ok()?,
        None => 0,
    };
    // The value is `significant` times ten to this power (`None`: beyond any i64 exponent,
    // so a fraction or far out of range).
    let power = exponent
        .checked_sub(fraction.len() as i64)?
        .checked_add((digits.len() - significant.len()) as i64)?;
    let digits_of_value = (significant.len() as i64).checked_add(power)?;
    if power < 0 || digits_of_value > 19 {
        return None;
    }
    let magnitude = significant.parse::<i128>().ok()? * 10i128.pow(power as u32);
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use std::sync::Arc;

    #[test]
    fn whole_values_are_exact() {
        // Hand-checked: (literal, its value if a whole number that fits Int64).
        let cases = [
            ("0", Some(0)),
            ("-0", Some(0)),
            ("12", Some(12)),
            ("+12", Some(12)),
            ("1.0", Some(1)),
            ("1.", Some(1)),
            ("1e3", Some(1000)),
            ("1.5E1", Some(15)),
            ("-12.50e3", Some(-12500)),
            ("1200e-2", Some(12)),
            ("0e999999999999999999999", Some(0)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("5000.5", None),
            ("1e-1", None),
            ("1e19", None),
            ("1e400", None),
            (".5", None),
            ("abc", None),
            ("", None),
            ("-", None),
            ("1e", None),
            ("7.5e-9223372036854775808", None),
            ("1.5e-9223372036854775807", None),
            ("1e9223372036854775807", None),
        ];
        for (literal, value) in cases {
            assert_eq!(whole_value(literal), value, "{literal}");
        }
    }

    #[test]
    fn values_the_reader_would_change_are_found() {
        let list = DataType::List(Arc::new(Field::new("item", DataType::Int64, true)));
        let list_of_lists = DataType::List(Arc::new(Field::new("item", list, true)));
        let columns = whole_columns(&Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("n", list_of_lists, true),
        ]));
        let changed = |line: &str| changed_in_line(&columns, line.as_bytes());
        // Read as written: whole numbers however written, null, a missing field; strings (the
        // reader parses them without the float's fallback: "2.5" is its own error), a line
        // that is not JSON (the reader's own error names it).
        for line in [
            r#"{"id": 7, "n": [1, 2, [3]]}"#,
            r#"{"id": 1e3, "n": null, "other": 2.5}"#,
            r#"{"id": "12", "n": ["1.0"]}"#,
            r#"{"id": null}"#,
            r#"{"text": "x"}"#,
            r#"{"id": 9223372036854775807}"#,
            r#"{"id": 1e400}"#,
            r#"{"id": "abc"}"#,
            r#"{"id": "2.5", "n": ["7.5"]}"#,
            "not json",
        ] {
            assert_eq!(changed(line), None, "{line}");
        }
        let found = changed(r#"{"id": 5000.5, "n": [1]}"#).unwrap();
        assert!(
            found.contains("\"id\" is 5000.5") && found.ends_with("read it as 5000"),
            "{found}"
        );
        let found = changed(r#"{"id": -9223372036854775809}"#).unwrap();
        assert!(found.contains("read it as -9223372036854775808"), "{found}");
        // Exponents far beyond any i64 still tell a fraction.
        let found = changed(r#"{"id": 7.5e-9223372036854775808}"#).unwrap();
        assert!(found.ends_with("read it as 0"), "{found}");
        let found = changed(r#"{"id": 1, "n": [1, [2, 3.75]]}"#).unwrap();
        assert!(
            found.contains("\"n\" holds 3.75 in a list") && found.ends_with("read it as 3"),
            "{found}"
        );
        // Above 2^53 a float cannot tell neighbours apart: a fraction there is still found.
        let found = changed(r#"{"id": 9007199254740993.5}"#).unwrap();
        assert!(found.contains("read it as 9007199254740994"), "{found}");
    }

    /// `first_change` over `text` in chunks of `size` bytes.
    fn change_in_chunks(text: &str, size: usize, schema: &Schema) -> Option<Change> {
        let chunks: Vec<datafusion::error::Result<Bytes>> = text
            .as_bytes()
            .chunks(size)
            .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
            .collect();
        let text = futures::stream::iter(chunks).boxed();
        let columns = whole_columns(schema);
        futures::executor::block_on(first_change(text, schema, &columns))
    }

    fn pages_schema() -> Schema {
        let list = DataType::List(Arc::new(Field::new("item", DataType::Int64, true)));
        Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("text", DataType::Utf8, true),
            Field::new("n", list, true),
        ])
    }

    #[test]
    fn the_first_changed_row_is_found_across_chunks_and_batches() {
        let schema = pages_schema();
        let first_row = |text: &str, size: usize| match change_in_chunks(text, size, &schema) {
            Some(Change::Number(row)) => Some(row),
            None => None,
            other => panic!("{other:?}"),
        };
        // Two and a half batches of rows.
        let rows = 2 * BATCH_ROWS + BATCH_ROWS / 2;
        let line =
            |i: usize, id: &str| format!("{{\"id\":{id},\"text\":\"p{i}\",\"n\":[{i},1e2]}}\n");
        let good: String = (0..rows).map(|i| line(i, &i.to_string())).collect();
        for size in [7, 4096, 1 << 20] {
            assert_eq!(first_row(&good, size), None, "{size}");
        }
        for bad in [0, BATCH_ROWS - 1, BATCH_ROWS, rows - 1] {
            let text: String = (0..rows)
                .map(|i| match i == bad {
                    true => line(i, "7.25"),
                    false => line(i, &i.to_string()),
                })
                .collect();
            for size in [7, 4096, 1 << 20] {
                assert_eq!(first_row(&text, size), Some(bad as u64), "{bad} {size}");
            }
        }
        // In a list, after a good batch.
        let text = format!("{good}{{\"id\":1,\"n\":[2,[3]]}}\n{{\"id\":2,\"n\":[2,0.5]}}\n");
        assert_eq!(
            first_row(&text, 4096),
            None,
            "a list in a list is text the decoder refuses: the reader names it"
        );
        let text = format!("{good}{{\"id\":2,\"n\":[2,0.5]}}\n");
        assert_eq!(first_row(&text, 4096), Some(rows as u64));
    }

    #[test]
    fn a_key_that_is_no_column_is_found_with_its_batch() {
        let schema = pages_schema();
        let line = |i: usize| format!("{{\"id\":{i},\"text\":\"p{i}\"}}\n");
        let mut text: String = (0..BATCH_ROWS + 10).map(line).collect();
        assert_eq!(change_in_chunks(&text, 4096, &schema), None);
        text.push_str("{\"id\":1,\"text\":\"late\",\"lang\":\"de\"}\n");
        match change_in_chunks(&text, 4096, &schema) {
            Some(Change::Field { from_row, what }) => {
                assert_eq!(from_row, BATCH_ROWS as u64);
                assert!(what.contains("'lang' missing from schema"), "{what}");
            }
            other => panic!("{other:?}"),
        }
        // Inside an object too.
        let nested = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "meta",
                DataType::Struct(vec![Field::new("a", DataType::Utf8, true)].into()),
                true,
            ),
        ]);
        let text = "{\"id\":1,\"meta\":{\"a\":\"x\"}}\n{\"id\":2,\"meta\":{\"a\":\"y\",\"b\":1}}\n";
        match change_in_chunks(text, 4096, &nested) {
            Some(Change::Field { from_row: 0, what }) => {
                assert!(what.contains("'b' missing from schema"), "{what}")
            }
            other => panic!("{other:?}"),
        }
        let names = ["id".to_string(), "text".to_string()];
        let why = unknown_key_in_line(&names, br#"{"id":1,"text":"x","lang":"de"}"#).unwrap();
        assert!(why.starts_with("it has the key \"lang\""), "{why}");
        assert_eq!(unknown_key_in_line(&names, br#"{"id":1}"#), None);
        assert_eq!(
            unknown_key_in_line(&names, br#"{"id":1,"parent":null}"#),
            None
        );
    }

    #[test]
    fn int64_columns_and_their_lists_are_checked() {
        let list = |item: DataType| DataType::List(Arc::new(Field::new("item", item, true)));
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("text", DataType::Utf8, true),
            Field::new("score", DataType::Float64, true),
            Field::new("tags", list(list(DataType::Int64)), true),
            Field::new("names", list(DataType::Utf8), true),
        ]);
        let names: Vec<(String, bool)> = whole_columns(&schema)
            .into_iter()
            .map(|c| (c.name.clone(), c.in_lists()))
            .collect();
        assert_eq!(
            names,
            vec![("id".to_string(), false), ("tags".to_string(), true)]
        );
    }
}
