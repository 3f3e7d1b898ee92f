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
    let number_start = i;
    let mut digit_count = 0usize;
    let mut frac_digits: i64 = 0;
    let mut seen_dot = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_digit() {
            digit_count += 1;
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
    if digit_count == 0 {
        return Err(syntax());
    }
    let number = &bytes[number_start..i];
    let suffix = &s[i..];
    // value = digits * 10^(-frac_digits) * 10^dexp * 2^bexp
    let (dexp, bexp): (i64, u32) = match suffix {
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
            let e: i64 = rest.parse().map_err(|_| syntax())?;
            if !(-30..=30).contains(&e) {
                return Err(overflow());
            }
            (e, 0)
        }
    };
    let exp10 = dexp + i64::from(scale) - frac_digits;
    let magnitude = if digit_count <= 19 {
        // Fast path: the mantissa is below 10^19 < 2^64, so mantissa x 2^60 fits an i128 and
        // 10^38 is the largest divisor needed.
        let mut mantissa: i128 = 0;
        for &c in number.iter().filter(|c| c.is_ascii_digit()) {
            mantissa = mantissa * 10 + i128::from(c - b'0');
        }
        let num = mantissa << bexp;
        if exp10 >= 0 {
            let mut v = num;
            for _ in 0..exp10 {
                v = v.checked_mul(10).ok_or_else(overflow)?;
            }
            v
        } else if exp10 < -38 {
            i128::from(num > 0)
        } else {
            let div = 10i128.pow(u32::try_from(-exp10).unwrap_or(38));
            num / div + i128::from(num % div != 0)
        }
    } else {
        exact_magnitude(number, bexp, exp10).ok_or_else(overflow)?
    };
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).map_err(|_| overflow())
}

/// `digits x 2^bexp x 10^exp10` rounded up, for mantissas of any length: the number is kept
/// as a decimal digit string, so nothing overflows or is lost before the final conversion.
/// `None` when the result does not fit an i128.
fn exact_magnitude(number: &[u8], bexp: u32, exp10: i64) -> Option<i128> {
    // Leading zeros carry no value; dropping them bounds the work by the significant digits.
    let mut digits: Vec<u8> =
        number.iter().filter(|c| c.is_ascii_digit()).map(|c| c - b'0').skip_while(|&d| d == 0).collect();
    for _ in 0..bexp {
        double(&mut digits);
    }
    let (head, round_up) = if exp10 >= 0 {
        (&digits[..], false)
    } else {
        // Dividing by 10^k drops the last k digits; any non-zero among them rounds the
        // magnitude up (Kubernetes rounds up when scaling down).
        let k = usize::try_from(-exp10).unwrap_or(usize::MAX).min(digits.len());
        let (head, tail) = digits.split_at(digits.len() - k);
        (head, tail.iter().any(|&d| d != 0))
    };
    let mut value: i128 = 0;
    for &d in head {
        value = value.checked_mul(10)?.checked_add(i128::from(d))?;
    }
    for _ in 0..exp10.max(0) {
        value = value.checked_mul(10)?;
    }
    value.checked_add(i128::from(round_up))
}

/// Multiplies a big-endian decimal digit string by two in place.
fn double(digits: &mut Vec<u8>) {
    let mut carry = 0;
    for d in digits.iter_mut().rev() {
        let v = *d * 2 + carry;
        *d = v % 10;
        carry = v / 10;
    }
    if carry > 0 {
        digits.insert(0, carry);
    }
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

    /// Found by `cargo fuzz run quantity`: a long fraction with a binary suffix overflowed
    /// the rounding step. Long inputs are exact now, whatever their length.
    #[test]
    fn long_fractions_are_exact() {
        let fuzzed = "-.0000000000000000000145891612204752986761Ei";
        assert_eq!(parse_milli(fuzzed), Ok(-17));
        assert_eq!(parse_units(fuzzed), Ok(-1));
        assert_eq!(parse_units("1.0000000000000000000000000000000000000000000Ei"), Ok(1 << 60));
        assert_eq!(parse_milli("0.000000000000000000000000000000000000000000001"), Ok(1));
        assert_eq!(parse_units("0.000000000000000000000000000000000000000000000"), Ok(0));
        assert_eq!(parse_units("0000000000000000000000000000000000000000000007"), Ok(7));
        assert_eq!(parse_units("1234567890123456789012345n"), Ok(1_234_567_890_123_457));
        assert!(matches!(parse_units("9223372036854775808"), Err(QuantityError::Overflow(_))));
        assert_eq!(parse_units("9223372036854775807"), Ok(i64::MAX));
    }

    proptest! {
        #[test]
        fn integers_round_trip(n in 0i64..1_000_000_000) {
            prop_assert_eq!(parse_units(&n.to_string()), Ok(n));
            prop_assert_eq!(parse_milli(&format!("{n}m")), Ok(n));
        }

        /// The fixed-width fast path and the digit-string path agree wherever both apply.
        #[test]
        fn fast_path_matches_exact(int in "[0-9]{0,10}", frac in "[0-9]{0,9}", bexp in prop::sample::select(vec![0u32, 10, 20, 30, 40, 50, 60]), dexp in -30i64..=30) {
            prop_assume!(!(int.is_empty() && frac.is_empty()));
            let text = if frac.is_empty() { int.clone() } else { format!("{int}.{frac}") };
            let suffix = if bexp == 0 { format!("e{dexp}") } else { ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][(bexp / 10) as usize].to_string() };
            let dexp = if bexp == 0 { dexp } else { 0 };
            for (scale, parse) in [(0i64, parse_units as fn(&str) -> Result<i64, QuantityError>), (3, parse_milli)] {
                let exp10 = dexp + scale - frac.len() as i64;
                let exact = exact_magnitude(text.as_bytes(), bexp, exp10).and_then(|v| i64::try_from(v).ok());
                prop_assert_eq!(parse(&format!("{text}{suffix}")).ok(), exact, "{}{}", text, suffix);
            }
        }

        #[test]
        fn never_panics(s in "[-+]?[0-9]{0,30}[.]?[0-9]{0,30}(Ei|Ki|n|m|k|E|e-9|)|.{0,12}") {
            let _ = parse_units(&s);
            let _ = parse_milli(&s);
        }
    }
}
