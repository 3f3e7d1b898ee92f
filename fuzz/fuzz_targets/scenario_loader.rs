//! The scenario loader on arbitrary text: it must never panic, never hang, and reject with
//! a message naming the file. Small scenarios that load are also run, with tight limits,
//! so the controllers and the engine see fuzzed objects too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use placer_sim::scenario::StepAction;
use placer_sim::{load_str, run, RunOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match load_str(text, "fuzz.yaml") {
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with("fuzz.yaml"), "{message}");
        }
        Ok(s) => {
            let small = s.node_count() <= 16
                && s.submit.len() <= 32
                && s.steps.len() <= 8
                && s.steps.iter().all(|step| match &step.action {
                    StepAction::Advance { ms } => *ms <= 600_000,
                    StepAction::Submit(list) => list.len() <= 32,
                    _ => true,
                });
            if small {
                let opts = RunOptions { max_rounds: 500, max_settle_ms: 3_600_000, ..RunOptions::default() };
                let _ = run(&s, &opts);
            }
        }
    }
});
