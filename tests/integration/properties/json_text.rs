//! Property tests of the JSON parser and writers against the model writer.

use super::*;

/// Whatever `parse` accepts, the other entry points accept too, and it writes back to text
/// that parses to the same value.
fn check_arbitrary_json(text: &str) -> Result<(), TestCaseError> {
    let parsed = json::parse(text);
    prop_assert_eq!(json::validate(text).is_ok(), parsed.is_ok());
    for depth in 0..4 {
        prop_assert_eq!(json::parse_shallow(text, depth).is_ok(), parsed.is_ok());
    }
    if let Ok(value) = parsed {
        let compact = json::to_compact(&value);
        let again = json::parse(&compact).map_err(fail)?;
        prop_assert_eq!(&again, &value);
        prop_assert_eq!(json::to_compact(&again), compact);
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn json_canonical_text_round_trips_at_every_depth(value in json_value()) {
        let text = canon(&value);
        let full = json::parse(&text).map_err(fail)?;
        prop_assert_eq!(&json::to_compact(&full), &text);
        prop_assert!(json::validate(&text).is_ok());
        for depth in 0..4 {
            let shallow = json::parse_shallow(&text, depth).map_err(fail)?;
            prop_assert_eq!(&json::to_compact(&shallow), &text, "depth {}", depth);
            prop_assert_eq!(&shallow, &full, "depth {}", depth);
        }
    }

    #[test]
    fn json_non_canonical_text_writes_back_canonical(value in json_value(), seed in any::<u64>()) {
        let mut loose = String::new();
        write_loose(&value, &mut Rng(seed), &mut loose);
        let parsed = json::parse(&loose).map_err(|e| fail(format!("{e} in {loose:?}")))?;
        prop_assert_eq!(json::to_compact(&parsed), canon(&value), "from {:?}", loose);
        for depth in 0..4 {
            let shallow = json::parse_shallow(&loose, depth).map_err(fail)?;
            prop_assert_eq!(&shallow, &parsed, "depth {}", depth);
        }
    }

    #[test]
    fn js_number_formatting_matches_the_ecmascript_algorithm(x in js_number()) {
        let expected = js_number_model(x);
        prop_assert_eq!(json::format_js_number(x), expected.clone());
        prop_assert_eq!(expected.parse::<f64>(), Ok(x));
        let value = json::parse(&expected).map_err(fail)?;
        prop_assert_eq!(value.as_f64(), Some(x));
        prop_assert_eq!(json::to_compact(&value), expected);
    }

    #[test]
    fn arbitrary_text_never_panics_and_accepted_json_reparses(
        bytes in prop::collection::vec(any::<u8>(), 0..64)
    ) {
        check_arbitrary_json(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn damaged_json_never_panics_and_accepted_json_reparses(bytes in mutated_json()) {
        check_arbitrary_json(&String::from_utf8_lossy(&bytes))?;
    }
}
