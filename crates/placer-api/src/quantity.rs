//! Exact parsing of Kubernetes resource quantities.
//!
//! A quantity is a signed decimal number with an optional suffix: binary (`Ki Mi Gi Ti Pi
//! Ei`), decimal (`n u m k M G T P E`) or a decimal exponent (`e3`, `E-2`). Placer keeps
//! quantities as `i64` in a fixed scale: CPU in millicores ([`parse_milli`]), everything else
//! in base units ([`parse_units`]); values are rounded up as Kubernetes does (`0.5m` cpu is
//! 1m, `1.5` bytes is 2).

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("invalid quantity {0:?}: expected a number with an optional suffix (e.g. 500m, 2, 1.5Gi)")]
    Syntax(String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

/// Parses to millis (`"1"` -> 1000, `"500m"` -> 500), rounding up.
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 3)
}

/// Parses to base units (`"1Gi"` -> 1073741824, `"1k"` -> 1000), rounding up.
pub fn parse_units(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 0)
}

/// Parses `s` and returns `value * 10^scale`, rounded up (towards +infinity).
fn parse_scaled(s: &str, scale: i32) -> Result<i64, QuantityError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let syntax = || QuantityError::Syntax(s.to_string());
    let overflow = || QuantityError::Overflow(s.to_string());
    let bytes = s.as_bytes();
    let mut i = 0;
    let negative = match bytes[0] {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    // digits [. digits]
    let mut mantissa: i128 = 0;
    let mut frac_digits: i32 = 0;
    let mut seen_digit = false;
    let mut seen_dot = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_digit() {
            seen_digit = true;
            if mantissa > (i128::MAX / 100) {
                return Err(overflow());
            }
            mantissa = mantissa * 10 + i128::from(c - b'0');
            if seen_dot {
                frac_digits += 1;
            }
        } else if c == b'.' && !seen_dot {
            seen_dot = true;
        } else {
            break;
        }
        i += 1;
    }
    if !seen_digit {
        return Err(syntax());
    }
    let suffix = &s[i..];
    // value = mantissa * 10^(-frac_digits) * 10^dexp * 2^bexp
    let (dexp, bexp): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let rest = suffix.strip_prefix('e').or_else(|| suffix.strip_prefix('E')).ok_or_else(syntax)?;
            let e: i32 = rest.parse().map_err(|_| syntax())?;
            if !(-30..=30).contains(&e) {
                return Err(overflow());
            }
            (e, 0)
        }
    };
    let mut num: i128 = mantissa;
    num = num.checked_mul(1i128 << bexp).ok_or_else(overflow)?;
    let exp10 = dexp + scale - frac_digits;
    let value: i128 = if exp10 >= 0 {
        let mut v = num;
        for _ in 0..exp10 {
            v = v.checked_mul(10).ok_or_else(overflow)?;
        }
        v
    } else {
        let mut div: i128 = 1;
        for _ in 0..(-exp10) {
            div = div.checked_mul(10).ok_or_else(overflow)?;
        }
        // Round up magnitude (Kubernetes rounds up when scaling down).
        (num + div - 1) / div
    };
    let value = if negative { -value } else { value };
    i64::try_from(value).map_err(|_| overflow())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cpu() {
        assert_eq!(parse_milli("1"), Ok(1000));
        assert_eq!(parse_milli("500m"), Ok(500));
        assert_eq!(parse_milli("0.5"), Ok(500));
        assert_eq!(parse_milli("2.25"), Ok(2250));
        assert_eq!(parse_milli("0.0001"), Ok(1));
        assert_eq!(parse_milli("100u"), Ok(1));
        assert_eq!(parse_milli("-1"), Ok(-1000));
        assert_eq!(parse_milli("1e3"), Ok(1_000_000));
    }

    #[test]
    fn memory() {
        assert_eq!(parse_units("1Gi"), Ok(1 << 30));
        assert_eq!(parse_units("1.5Gi"), Ok(3 << 29));
        assert_eq!(parse_units("512Mi"), Ok(512 << 20));
        assert_eq!(parse_units("1k"), Ok(1000));
        assert_eq!(parse_units("1M"), Ok(1_000_000));
        assert_eq!(parse_units("110"), Ok(110));
        assert_eq!(parse_units("1500m"), Ok(2));
    }

    #[test]
    fn errors() {
        assert!(matches!(parse_units(""), Err(QuantityError::Empty)));
        assert!(matches!(parse_units("abc"), Err(QuantityError::Syntax(_))));
        assert!(matches!(parse_units("1Gb"), Err(QuantityError::Syntax(_))));
        assert!(matches!(parse_units("1.2.3"), Err(QuantityError::Syntax(_))));
        assert!(matches!(parse_units("99999999Ei"), Err(QuantityError::Overflow(_))));
    }

    proptest! {
        #[test]
        fn integers_round_trip(n in 0i64..1_000_000_000) {
            prop_assert_eq!(parse_units(&n.to_string()), Ok(n));
            prop_assert_eq!(parse_milli(&format!("{n}m")), Ok(n));
        }

        #[test]
        fn never_panics(s in ".{0,12}") {
            let _ = parse_units(&s);
            let _ = parse_milli(&s);
        }
    }
}
