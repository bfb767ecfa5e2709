//! Quantities as people write them in a scenario: `100Gbit`, `12.5GB/s`, `50.5ms`, `1MiB`.
//!
//! Each is a newtype that deserializes from text (or a bare number in the base unit: bytes,
//! bytes per second, seconds) and refuses anything else with an error naming the text.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A data rate in bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bandwidth(pub u64);

/// A span of virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Span(pub Duration);

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

/// Text that is not a quantity of the expected kind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a {kind} (examples: {examples})")]
pub struct UnitError {
    pub text: String,
    pub kind: &'static str,
    pub examples: &'static str,
}

impl Bandwidth {
    /// Parses `100Gbit`, `100Gbit/s`, `10Gb/s` (bits, decimal prefixes), `12.5GB/s`, `800MB/s`
    /// (bytes), `1GiB/s` (binary), or a bare number of bytes per second.
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let error = || UnitError {
            text: text.to_owned(),
            kind: "bandwidth",
            examples: "100Gbit, 10Gb/s, 12.5GB/s, 1GiB/s",
        };
        let trimmed = text.trim();
        let unit_text = trimmed.strip_suffix("/s").unwrap_or(trimmed);
        let (number, unit) = split_number(unit_text).ok_or_else(error)?;
        let (scale, bits) = match unit {
            "" | "B" => (1.0, false),
            "bit" | "b" | "bps" => (1.0, true),
            "Kbit" | "Kb" | "kbit" | "kb" => (1e3, true),
            "Mbit" | "Mb" => (1e6, true),
            "Gbit" | "Gb" => (1e9, true),
            "Tbit" | "Tb" => (1e12, true),
            "KB" | "kB" => (1e3, false),
            "MB" => (1e6, false),
            "GB" => (1e9, false),
            "TB" => (1e12, false),
            "KiB" => (1024.0, false),
            "MiB" => (1024.0 * 1024.0, false),
            "GiB" => (1024.0 * 1024.0 * 1024.0, false),
            _ => return Err(error()),
        };
        let bytes = number * scale / if bits { 8.0 } else { 1.0 };
        to_u64(bytes).filter(|b| *b > 0).map(Self).ok_or_else(error)
    }
}

impl Span {
    /// Parses `50.5ms`, `10us`, `250ns`, `3s`, `2min`, or a bare number of seconds.
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let error = || UnitError {
            text: text.to_owned(),
            kind: "time span",
            examples: "50.5ms, 10us, 3s, 2min",
        };
        let (number, unit) = split_number(text.trim()).ok_or_else(error)?;
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "" | "s" => 1e9,
            "min" => 60e9,
            "h" => 3600e9,
            _ => return Err(error()),
        };
        to_u64(number * nanos_per_unit).map(|n| Self(Duration::from_nanos(n))).ok_or_else(error)
    }

    pub fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }
}

impl Size {
    /// Parses `1MiB`, `4KiB`, `1MB`, `9000`, or `512B`.
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let error =
            || UnitError { text: text.to_owned(), kind: "size", examples: "1MiB, 4KiB, 1MB, 9000" };
        let (number, unit) = split_number(text.trim()).ok_or_else(error)?;
        let scale = match unit {
            "" | "B" => 1.0,
            "K" | "KiB" => 1024.0,
            "M" | "MiB" => 1024.0 * 1024.0,
            "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
            "KB" | "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            _ => return Err(error()),
        };
        let bytes = number * scale;
        if bytes.fract() != 0.0 {
            return Err(error());
        }
        to_u64(bytes).map(Self).ok_or_else(error)
    }
}

/// Splits `12.5GB` into `12.5` and `GB`; `None` when no finite, non-negative number leads.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let end = text
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map_or(text.len(), |(index, _)| index);
    let (number, unit) = text.split_at(end);
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some((value, unit.trim()))
}

fn to_u64(value: f64) -> Option<u64> {
    // 2^63 keeps the cast exact-enough and far from overflow.
    (value.is_finite() && (0.0..9.2e18).contains(&value)).then(|| value.round() as u64)
}

/// Text or a bare number, as YAML gives them.
struct QuantityVisitor<F> {
    parse: F,
    kind: &'static str,
}

impl<'de, T, F: Fn(&str) -> Result<T, UnitError>> Visitor<'de> for QuantityVisitor<F> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "a {}", self.kind)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        (self.parse)(text).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<T, E> {
        (self.parse)(&value.to_string()).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<T, E> {
        (self.parse)(&value.to_string()).map_err(E::custom)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<T, E> {
        (self.parse)(&value.to_string()).map_err(E::custom)
    }
}

macro_rules! quantity_serde {
    ($type:ty, $kind:literal, $display:expr) => {
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(QuantityVisitor { parse: <$type>::parse, kind: $kind })
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                #[allow(clippy::redundant_closure_call)]
                serializer.serialize_str(&($display)(self))
            }
        }
    };
}

quantity_serde!(Bandwidth, "bandwidth", |b: &Bandwidth| format!("{}B/s", b.0));
quantity_serde!(Span, "time span", |s: &Span| format!("{}ns", s.0.as_nanos()));
quantity_serde!(Size, "size", |s: &Size| format!("{}B", s.0));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths() {
        assert_eq!(Bandwidth::parse("100Gbit"), Ok(Bandwidth(12_500_000_000)));
        assert_eq!(Bandwidth::parse("100Gbit/s"), Ok(Bandwidth(12_500_000_000)));
        assert_eq!(Bandwidth::parse("2Gb/s"), Ok(Bandwidth(250_000_000)));
        assert_eq!(Bandwidth::parse("12.5GB/s"), Ok(Bandwidth(12_500_000_000)));
        assert_eq!(Bandwidth::parse("1GiB/s"), Ok(Bandwidth(1 << 30)));
        assert_eq!(Bandwidth::parse("1000"), Ok(Bandwidth(1000)));
        for bad in ["", "fast", "10Gbitz", "-1Gbit", "0", "1e3Gbit", "1..2Gbit"] {
            assert!(Bandwidth::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn spans() {
        assert_eq!(Span::parse("50.5ms"), Ok(Span(Duration::from_micros(50_500))));
        assert_eq!(Span::parse("10us"), Ok(Span(Duration::from_micros(10))));
        assert_eq!(Span::parse("3"), Ok(Span(Duration::from_secs(3))));
        assert_eq!(Span::parse("2min"), Ok(Span(Duration::from_secs(120))));
        assert!(Span::parse("3 weeks").is_err());
        assert!(Span::parse("99999999999999h").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(Size::parse("1MiB"), Ok(Size(1 << 20)));
        assert_eq!(Size::parse("4K"), Ok(Size(4096)));
        assert_eq!(Size::parse("9000"), Ok(Size(9000)));
        assert_eq!(Size::parse("1MB"), Ok(Size(1_000_000)));
        assert!(Size::parse("1.5B").is_err());
        assert!(Size::parse("lots").is_err());
    }

    #[test]
    fn yaml_numbers_and_text() {
        let span: Span = yaml_serde::from_str("0.5").unwrap();
        assert_eq!(span, Span(Duration::from_millis(500)));
        let size: Size = yaml_serde::from_str("1MiB").unwrap();
        assert_eq!(size, Size(1 << 20));
        let error = yaml_serde::from_str::<Bandwidth>("fast").unwrap_err().to_string();
        assert!(error.contains("\"fast\" is not a bandwidth"), "{error}");
    }
}
