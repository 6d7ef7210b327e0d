//! JavaScript's `Number.prototype.toString` for finite numbers (what `JSON.stringify` writes).

/// Formats a finite `value` the way JavaScript does: the shortest digits that round-trip,
/// plain notation for exponents in `[-7, 21)`, otherwise `d.ddde±x`; `-0` is written as `0`.
pub fn format_js_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_owned();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    // Rust's `{:e}` gives the fewest digits that round-trip, e.g. "1.2345e-7", but breaks an
    // exact tie between two such digit strings upwards, where JavaScript takes the even one
    // (1914676890813182.25 is "…182.2"). The nearest decimal with that many digits, ties to
    // even, is what JavaScript writes, and Rust's fixed-precision form rounds exactly so.
    let shortest = format!("{:e}", value.abs());
    let (mantissa, _) = shortest.split_once('e').unwrap_or((&shortest, "0"));
    let k = mantissa.chars().filter(char::is_ascii_digit).count().max(1);
    let sci = format!("{:.*e}", k - 1, value.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = match digits.trim_end_matches('0') {
        "" => "0".to_owned(),
        trimmed => trimmed.to_owned(),
    };
    let k = digits.len() as i32;
    let n = exp.parse::<i32>().unwrap_or(0) + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let exp_sign = if n - 1 < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        format!("{first}{frac}e{exp_sign}{}", (n - 1).abs())
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::format_js_number as f;

    #[test]
    fn matches_javascript_output() {
        assert_eq!(f(0.0), "0");
        assert_eq!(f(-0.0), "0");
        assert_eq!(f(1.0), "1");
        assert_eq!(f(-42.0), "-42");
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1e20), "100000000000000000000");
        assert_eq!(f(1.5e-7), "1.5e-7");
        assert_eq!(f(1e-7), "1e-7");
        assert_eq!(f(0.000001), "0.000001");
        assert_eq!(f(123456.789), "123456.789");
        assert_eq!(f(1763681581544.0), "1763681581544");
        assert_eq!(f(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(f(5e-324), "5e-324");
        // Two shortest digit strings are equally close: the even one is written.
        let tie = 1_914_676_890_813_182.0 + 0.25;
        assert_eq!(f(tie), "1914676890813182.2");
        assert_eq!(f(-tie), "-1914676890813182.2");
    }
}
