//! The trace lab end to end: a trace file replayed through the full simulator under every
//! configuration, then summarised and rendered.

use std::path::Path;

use placer_lab::driver::Stop;
use placer_lab::{configs, generators, plot, report, run_lab, trace, ReplayOptions};

fn small() -> placer_lab::Trace {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces/small.yaml");
    match trace::load_file(&file) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn every_configuration_runs_the_example_trace_to_the_end() {
    let t = small();
    let all = configs::all();
    let r = run_lab(&t, &all, &ReplayOptions::default(), 2).expect("replays run");
    assert_eq!(r.summaries.len(), all.len());
    let names: Vec<&str> = t.arrivals.iter().map(|a| a.name.as_str()).collect();
    for (run, s) in r.runs.iter().zip(&r.summaries) {
        assert_eq!(run.stop, Stop::Drained, "{}", s.config);
        assert!(run.controller_errors.is_empty(), "{}: {:?}", s.config, run.controller_errors);
        for (name, rec) in names.iter().zip(&run.records) {
            assert!(
                rec.start_ms.is_some() && rec.end_ms.is_some(),
                "{}: {name} never ran: {rec:?}",
                s.config
            );
        }
        assert_eq!((s.gangs, s.gangs_completed, s.gangs_never_placed), (6, 6, 0), "{}", s.config);
        // Required racks and blocks are honoured by every configuration.
        let train_a = &run.records[names.iter().position(|n| *n == "train-a").unwrap()];
        assert_eq!(train_a.domains[..2], [1, 1], "{}: train-a in one block and rack", s.config);
        let job_d = &run.records[names.iter().position(|n| *n == "job-d").unwrap()];
        assert_eq!(job_d.domains[0], 1, "{}: job-d in one block", s.config);
        assert!(s.device_util > 0.0 && s.device_util <= 1.0, "{}: {}", s.config, s.device_util);
        assert!(s.wait_p99_s.is_some(), "{}", s.config);
    }
    let text = report::render_text(&r);
    for c in &all {
        assert!(text.contains(c.id), "{text}");
    }
    assert!(text.contains("best per measure:"), "{text}");
    let page = plot::html(std::slice::from_ref(&r));
    assert_eq!(page.matches("<svg").count(), 2, "utilisation and pending gangs");
    assert_eq!(page.matches("<polyline").count(), 2 * all.len(), "one line per configuration and chart");
    let svg = plot::svg(std::slice::from_ref(&r));
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
}

#[test]
fn replays_are_deterministic() {
    let t = generators::builtin("mixed", 3, 0.02).unwrap();
    let c = [configs::KEP5732, configs::PLACER];
    let a = run_lab(&t, &c, &ReplayOptions::default(), 2).unwrap();
    let b = run_lab(&t, &c, &ReplayOptions::default(), 1).unwrap();
    for (x, y) in a.runs.iter().zip(&b.runs) {
        assert_eq!(x.records, y.records, "{}", x.config);
        assert_eq!(x.samples.len(), y.samples.len());
    }
}

#[test]
fn built_in_workloads_replay_at_small_scale() {
    for name in generators::BUILTIN {
        let t = generators::builtin(name, 1, 0.02).unwrap();
        let r = run_lab(&t, &[configs::TAS_BEST_FIT], &ReplayOptions::default(), 1).unwrap();
        let s = &r.summaries[0];
        assert!(s.gangs_completed > 0, "{name}: {s:?}");
        assert!(s.device_util > 0.0, "{name}: {s:?}");
    }
}
