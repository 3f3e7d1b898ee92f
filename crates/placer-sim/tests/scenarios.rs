//! The examples and the fixtures, through the public API.

use std::path::{Path, PathBuf};

use placer_sim::{load_file, simulate_file, LoadError, Outcome, RunOptions, SimulateError};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

fn load_error(rel: &str) -> (PathBuf, LoadError) {
    let path = fixture(rel);
    match load_file(&path) {
        Err(e) => (path, e),
        Ok(s) => panic!("{} loaded, expected an error: {s:?}", path.display()),
    }
}

#[test]
fn every_example_holds() {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(workspace().join("examples"))
        .map(|d| {
            d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "yaml")).collect()
        })
        .unwrap_or_default();
    examples.sort();
    assert!(examples.iter().any(|p| p.ends_with("gang-rack.yaml")), "examples/gang-rack.yaml is missing");
    for path in examples {
        match simulate_file(&path, &RunOptions::default()) {
            Ok(Outcome::Ran(report)) => {
                let failures: Vec<String> = report.failures().map(|(at, f)| format!("{at}: {f}")).collect();
                assert!(failures.is_empty(), "{}: {failures:#?}", path.display());
                assert!(report.checked() > 0, "{} checks nothing", path.display());
            }
            Ok(Outcome::RejectedAsExpected(e)) => panic!("{}: an example should run: {e}", path.display()),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Every `*.yaml` below `dir` (recursively), sorted.
fn yaml_files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The repository's own scenarios (`tests/scenarios/**`, e.g. seed 002's worked examples
/// under `tas/`): every expectation holds.
#[test]
fn every_repository_scenario_holds() {
    let files = yaml_files_below(&workspace().join("tests/scenarios"));
    assert!(!files.is_empty(), "no scenario under tests/scenarios");
    let mut failed = Vec::new();
    for path in &files {
        match simulate_file(path, &RunOptions::default()) {
            Ok(outcome) if outcome.passed() => {
                if let Outcome::Ran(report) = &outcome {
                    assert!(report.checked() > 0, "{} checks nothing", path.display());
                }
            }
            Ok(Outcome::Ran(report)) => {
                let failures: Vec<String> = report.failures().map(|(at, f)| format!("{at}: {f}")).collect();
                failed.push(format!("{}: {failures:#?}", path.display()));
            }
            Ok(Outcome::RejectedAsExpected(e)) => failed.push(format!("{}: {e}", path.display())),
            Err(e) => failed.push(e.to_string()),
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

#[test]
fn yaml_syntax_error_names_file_line_and_column() {
    let (path, err) = load_error("bad/yaml-syntax.yaml");
    let LoadError::Yaml { line, column, .. } = &err else { panic!("expected a YAML error, got {err}") };
    assert_eq!((*line, *column), (4, 3));
    assert_eq!(
        err.to_string(),
        format!("{}:4:3: submit: \"-\" is only valid inside a block", path.display())
    );
}

#[test]
fn negative_cpu_request_names_object_and_field() {
    let (path, err) = load_error("bad/negative-cpu.yaml");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:12:63: submit[0]: Pod default/p0: spec.containers[0].resources.requests[cpu]: \
             Invalid value: \"-1\": must be greater than or equal to 0",
            path.display()
        )
    );
    assert!(!err.is_expected());
}

#[test]
fn min_count_zero_is_rejected() {
    let (path, err) = load_error("bad/mincount-zero.yaml");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:8:33: submit[0]: PodGroup default/pg: spec.schedulingPolicy.gang.minCount: \
             Required value: must be greater than or equal to 1",
            path.display()
        )
    );
}

#[test]
fn bad_input_is_a_load_error_from_simulate_file() {
    for rel in ["bad/yaml-syntax.yaml", "bad/negative-cpu.yaml", "bad/mincount-zero.yaml"] {
        let result = simulate_file(fixture(rel), &RunOptions::default());
        assert!(matches!(result, Err(SimulateError::Load(_))), "{rel}: {result:?}");
    }
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let err = load_file(fixture("does-not-exist.yaml")).unwrap_err();
    assert!(matches!(err, LoadError::Io { .. }));
    assert!(err.to_string().contains("does-not-exist.yaml"), "{err}");
}

#[test]
fn store_level_scenario_passes() {
    let outcome = simulate_file(fixture("good/delete-bound-pod.yaml"), &RunOptions::default()).unwrap();
    assert!(outcome.passed());
}

#[test]
fn a_failed_expectation_says_expected_and_got() {
    let Outcome::Ran(report) =
        simulate_file(fixture("failing/wrong-expectation.yaml"), &RunOptions::default()).unwrap()
    else {
        panic!("expected a run");
    };
    let failures: Vec<String> = report.failures().map(|(at, f)| format!("{at}: {f}")).collect();
    assert_eq!(failures, ["steps[0].expect: pods.default/a: expected n2, got n1"]);
}

#[test]
fn runs_are_deterministic() {
    let path = workspace().join("examples/gang-rack.yaml");
    let a = simulate_file(&path, &RunOptions::default()).unwrap();
    let b = simulate_file(&path, &RunOptions::default()).unwrap();
    let (Outcome::Ran(a), Outcome::Ran(b)) = (a, b) else { panic!("expected runs") };
    assert_eq!(a.objects, b.objects);
    assert_eq!(a.metrics, b.metrics);
}

/// Upstream's DynamicResources PreBind records a `Normal` event `BindingConditionsPending`
/// ("waiting for binding conditions for device on node <node>") on a pod whose devices have
/// binding conditions, before it waits for them.
#[test]
fn a_pod_waiting_for_device_binding_conditions_gets_upstream_s_event() {
    let path = workspace().join("tests/scenarios/dra/014-binding-conditions.yaml");
    let Outcome::Ran(report) = simulate_file(&path, &RunOptions::default()).unwrap() else {
        panic!("expected a run");
    };
    assert!(report.passed());
    let pending: Vec<(String, String, String)> = report
        .events
        .iter()
        .filter(|e| e.reason == "BindingConditionsPending")
        .map(|e| (e.regarding.name.clone(), e.type_.clone(), e.note.clone()))
        .collect();
    assert_eq!(
        pending.first(),
        Some(&(
            "p0".to_string(),
            "Normal".to_string(),
            "waiting for binding conditions for device on node n1".to_string()
        ))
    );
    // No other pod of the scenario waits before its devices' conditions are checked.
    assert!(pending
        .iter()
        .all(|(_, t, note)| t == "Normal" && note.starts_with("waiting for binding conditions")));
}
