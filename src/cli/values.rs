//! Parsers for flag values whose errors must teach: sizes, k, ranges, feature strings, row counts.
//! Each error echoes the value cut to `crate::error::ECHO_LIMIT` characters.

use crate::fingerprint::{MAX_K, Width};
use crate::job::config::{MAX_K_ANY_WIDTH, Verify};
use crate::text::FeatureOptions;

pub fn parse_sweep(text: &str) -> std::result::Result<(u32, u32), String> {
    let bounds = text
        .split_once("..=")
        .map(|(a, b)| (a.trim().parse::<u32>(), b.trim().parse::<u32>()));
    match bounds {
        Some((Ok(low), Ok(high))) if low <= high => Ok((low, high)),
        Some((Ok(low), Ok(high))) => Err(format!(
            "'{}' runs backwards: give the smaller k first ({high}..={low})",
            crate::error::echo(text)
        )),
        _ => match text.trim().parse::<u32>() {
            Ok(k) => Ok((k, k)),
            Err(_) => Err(format!(
                "'{}' is not a range like 0..=3",
                crate::error::echo(text)
            )),
        },
    }
}

/// `--features` as given: the options, and the width if the string names one (`bits=`), so
/// that `--bits` can be checked against it (`FeatureOptions` alone cannot tell `bits=64` from
/// the default).
#[derive(Debug, Clone)]
pub struct FeaturesArg {
    pub options: FeatureOptions,
    pub bits: Option<Width>,
}

/// A value parser whose error echoes the value cut to `crate::error::ECHO_LIMIT` characters
/// (clap's own message for a function parser repeats the whole value, 120 KB of --features
/// included), and without what may be a password (before an '@') or a signature (after a '?').
#[derive(Clone)]
pub struct Cut<F>(pub F);

impl<F, T> clap::builder::TypedValueParser for Cut<F>
where
    F: Fn(&str) -> std::result::Result<T, String> + Clone + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<T, clap::Error> {
        let Some(text) = value.to_str() else {
            return Err(clap::Error::new(clap::error::ErrorKind::InvalidUtf8).with_cmd(cmd));
        };
        (self.0)(text).map_err(|message| {
            let arg = arg.map_or_else(|| "...".to_string(), |a| a.to_string());
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "invalid value '{}' for '{arg}': {message}\n\nFor more information, try \
                     '--help'.",
                    crate::error::echo(&crate::storage::redacted(text))
                ),
            )
            .with_cmd(cmd)
        })
    }
}

/// `--k`: 0..=16 here (the most of 128-bit fingerprints); `job::config::check_k` holds 64-bit ones to
/// 0..=8 once the width is known.
pub fn parse_k(text: &str) -> std::result::Result<u32, String> {
    let allowed = format!(
        "--k (the largest Hamming distance that matches) allows 0..={} for 64-bit \
         fingerprints, 0..={} with --bits 128",
        MAX_K, MAX_K_ANY_WIDTH
    );
    match text.trim().parse::<u32>() {
        Ok(k) if k <= MAX_K_ANY_WIDTH => Ok(k),
        Ok(k) => Err(format!("{k} is too large; {allowed}")),
        Err(_) => Err(format!("not a whole number from 0; {allowed}")),
    }
}

/// A size in bytes, with an optional K, M or G (powers of 1024).
pub fn parse_size(text: &str) -> std::result::Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let multiplier: usize = match unit.trim().to_ascii_uppercase().trim_end_matches('B') {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return Err(not_a_size(text)),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .filter(|&n| n > 0)
        .ok_or_else(|| not_a_size(text))
}

fn not_a_size(text: &str) -> String {
    format!(
        "'{}' is not a size such as 512M or 4G",
        crate::error::echo(text)
    )
}

/// The smallest `--memory-limit`: the shipped sample's run needs 4M on two partitions (at 2M a
/// sort cannot reserve its merge buffer). More partitions need more; DataFusion's "Resources
/// exhausted" then says to raise the limit or lower --threads (`crate::error::resource_hint`).
pub const MIN_MEMORY_LIMIT: usize = 4 << 20;

/// `--memory-limit`: a size (`parse_size`) of at least `MIN_MEMORY_LIMIT`.
pub fn parse_memory_limit(text: &str) -> std::result::Result<usize, String> {
    let bytes = parse_size(text)?;
    if bytes < MIN_MEMORY_LIMIT {
        return Err(format!(
            "too small to run in: DataFusion's sorts, aggregates and Parquet writers each \
             reserve buffers of their own, so neardup needs at least {}M (more with many \
             --threads), e.g. 512M or 4G",
            MIN_MEMORY_LIMIT >> 20
        ));
    }
    Ok(bytes)
}

pub fn parse_features(text: &str) -> std::result::Result<FeaturesArg, String> {
    let options = FeatureOptions::parse(text).map_err(|e| e.to_string())?;
    // `FeatureOptions::parse` has checked the value, and that `bits=` is given at most once.
    let bits = text
        .split(',')
        .filter_map(|item| item.split_once('='))
        .filter(|(key, _)| key.trim() == "bits")
        .filter_map(|(_, value)| value.trim().parse::<u32>().ok())
        .filter_map(Width::from_bits)
        .next_back();
    Ok(FeaturesArg { options, bits })
}

/// `--verify`: `off`, or a similarity threshold in 0..=1.
pub fn parse_verify(text: &str) -> std::result::Result<Verify, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(Verify::Off);
    }
    match text.parse::<f64>() {
        Ok(t) if (0.0..=1.0).contains(&t) => Ok(Verify::AtLeast(t)),
        _ => Err(
            "a similarity threshold from 0 to 1 (e.g. 0.75, the default), or off to keep every \
             pair within k unverified"
                .into(),
        ),
    }
}

/// `--maxrows`: a count, or `inf` for every row.
pub fn parse_max_rows(text: &str) -> std::result::Result<usize, String> {
    if text == "inf" {
        return Ok(usize::MAX);
    }
    text.parse()
        .map_err(|_| "a whole number of rows, or inf for all of them".to_string())
}

#[cfg(test)]
mod tests {
    use crate::fingerprint::Width;

    #[test]
    fn sizes_take_units() {
        assert_eq!(super::parse_size("512M"), Ok(512 << 20));
        assert_eq!(super::parse_size("4g"), Ok(4 << 30));
        assert_eq!(super::parse_size("2GB"), Ok(2 << 30));
        assert_eq!(super::parse_size("1000"), Ok(1000));
        for bad in ["", "0", "M", "12X", "-5M", "99999999999999999999G"] {
            assert!(super::parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_limits_below_the_floor_are_refused() {
        assert_eq!(super::parse_memory_limit("4M"), Ok(4 << 20));
        assert_eq!(super::parse_memory_limit("1G"), Ok(1 << 30));
        for small in ["1", "1K", "3M", "4194303"] {
            let err = super::parse_memory_limit(small).unwrap_err();
            assert!(err.contains("at least 4M"), "{small}: {err}");
        }
        assert!(
            super::parse_memory_limit("lots")
                .unwrap_err()
                .contains("512M")
        );
    }

    #[test]
    fn k_is_parsed_up_to_the_widest_fingerprints() {
        assert_eq!(super::parse_k("0"), Ok(0));
        assert_eq!(super::parse_k("16"), Ok(16));
        for bad in ["-1", "17", "99999999999", "many"] {
            let err = super::parse_k(bad).unwrap_err();
            assert!(
                err.contains("0..=8 for 64-bit") && err.contains("0..=16 with --bits 128"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_width_named_in_features_is_seen() {
        let given = |text: &str| super::parse_features(text).unwrap();
        assert_eq!(given("mode=chars").bits, None);
        let twice = super::parse_features("bits=128, bits = 64").unwrap_err();
        assert!(twice.contains("given twice"), "{twice}");
        assert_eq!(given("bits=128").bits, Some(Width::Bits128));
    }
}
