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

/// FNV-1a over the JSON of everything a replay measured except its wall time: records
/// (start, end, domains, restarts per workload), every sample, the end, the averages.
fn digest(run: &placer_lab::RunResult) -> u64 {
    let json = serde_json::to_string(&(
        &run.records,
        &run.samples,
        run.end_ms,
        run.stop,
        run.average,
        run.loaded_average,
        &run.controller_errors,
    ))
    .expect("serializable");
    json.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// What a replay measures is pinned: a change that makes the lab faster must leave every
/// record and sample of these small built-in traces as they were (digests taken on main
/// adbd6b5, before the replay speed-ups), under every configuration.
#[test]
fn replays_measure_what_they_measured_before_the_speed_ups() {
    let expected: &[(&str, u64, &str, u64)] = &[
        ("kueue-tas", 1, "kep5732", 0xbfbeb18e1439c807),
        ("kueue-tas", 1, "tas-bestfit", 0xe8238b12bf117cd2),
        ("kueue-tas", 1, "tas-lfc", 0x423c702bba8a862c),
        ("kueue-tas", 1, "tas-balanced", 0x0d471c28dc6c7d2a),
        ("kueue-tas", 1, "placer", 0x5a99249d2d6454d0),
        ("kueue-tas", 1, "tas-mixed", 0x0d471c28dc6c7d2a),
        ("kueue-tas", 1, "placer-score", 0xbfbeb18e1439c807),
        ("gpu-training", 1, "kep5732", 0x59efb565497370eb),
        ("gpu-training", 1, "tas-bestfit", 0x277ed660e38ad202),
        ("gpu-training", 1, "tas-lfc", 0x197b0b9f81204f3b),
        ("gpu-training", 1, "tas-balanced", 0x277ed660e38ad202),
        ("gpu-training", 1, "placer", 0x708518e6eaf10ced),
        ("gpu-training", 1, "tas-mixed", 0x277ed660e38ad202),
        ("gpu-training", 1, "placer-score", 0x7ed62f225ad4f552),
        ("mixed", 1, "kep5732", 0x78ace6c8f8fda948),
        ("mixed", 1, "tas-bestfit", 0xc6e3fe53f9d5543b),
        ("mixed", 1, "tas-lfc", 0x48cfe90352fb0efd),
        ("mixed", 1, "tas-balanced", 0x878711854ab9d498),
        ("mixed", 1, "placer", 0x3381183222a78110),
        ("mixed", 1, "tas-mixed", 0xc6e3fe53f9d5543b),
        ("mixed", 1, "placer-score", 0x78ace6c8f8fda948),
        ("mixed", 2, "kep5732", 0x8f5ac843a1d68818),
        ("mixed", 2, "tas-bestfit", 0x728a5f572212efff),
        ("mixed", 2, "tas-lfc", 0xf9f36b261d4c8eb9),
        ("mixed", 2, "tas-balanced", 0x7ddad634b8fe5e99),
        ("mixed", 2, "placer", 0x963b833843f4f2f1),
        ("mixed", 2, "tas-mixed", 0x728a5f572212efff),
        ("mixed", 2, "placer-score", 0x8f5ac843a1d68818),
    ];
    let mut got = Vec::new();
    for (name, seed) in [("kueue-tas", 1), ("gpu-training", 1), ("mixed", 1), ("mixed", 2)] {
        let t = generators::builtin(name, seed, 0.02).unwrap();
        let r = run_lab(&t, &configs::all(), &ReplayOptions::default(), 2).unwrap();
        for run in &r.runs {
            got.push((name, seed, run.config.clone(), digest(run)));
        }
    }
    for g in &got {
        println!("({:?}, {}, {:?}, {:#018x}),", g.0, g.1, g.2, g.3);
    }
    let got: Vec<(&str, u64, &str, u64)> = got.iter().map(|(n, s, c, d)| (*n, *s, c.as_str(), *d)).collect();
    assert_eq!(got, expected);
}
