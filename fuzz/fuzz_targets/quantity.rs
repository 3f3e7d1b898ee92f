//! The quantity parser on arbitrary text: it never panics, cpu and other resources agree
//! (millis are units times 1000 when both fit), and a value that parses is echoed within
//! the message limit when validation rejects it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::quantity::{parse_milli, parse_units};
use placer_cluster::validation::{check_quantity, echo, MAX_ECHO_CHARS};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let milli = parse_milli(text);
    let units = parse_units(text);
    if let (Ok(m), Ok(u)) = (&milli, &units) {
        // Both round the magnitude up: |millis| is at most |units| x 1000 and more than
        // (|units| - 1) x 1000.
        let (m, u) = (i128::from(*m).abs(), i128::from(*u).abs());
        assert!(m <= u * 1000 && m > (u - 1) * 1000, "{text:?}: {m} milli, {u} units");
    }
    let q = Quantity(text.to_string());
    let _ = check_quantity("cpu", &q);
    let _ = check_quantity("memory", &q);
    assert!(echo(text).chars().count() <= MAX_ECHO_CHARS + 40);
});
