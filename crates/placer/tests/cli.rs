//! The `placer` binary: exit codes and output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> PathBuf {
    workspace().join("crates/placer-sim/tests/fixtures").join(rel)
}

fn placer(args: &[&str]) -> Output {
    match Command::new(env!("CARGO_BIN_EXE_placer")).args(args).current_dir(workspace()).output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run placer: {e}"),
    }
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

#[test]
fn simulate_example_passes_with_table_and_summary() {
    let out = placer(&["simulate", "examples/gang-rack.yaml"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("PASS gang-rack examples/gang-rack.yaml"), "{stdout}");
    assert!(stdout.contains("default/train"), "{stdout}");
    assert!(stdout.contains("rack: rack-b"), "{stdout}");
    assert!(stdout.contains("cluster: 5 nodes, 6/6 pods bound"), "{stdout}");
    assert!(!stdout.contains('\u{1b}'), "no colour codes when not writing to a terminal: {stdout}");
}

#[test]
fn failed_expectation_exits_1_and_says_what_differs() {
    let out = placer(&["simulate", path(&fixture("failing/wrong-expectation.yaml"))]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL steps[0].expect: pods.default/a: expected n2, got n1"), "{stdout}");
}

#[test]
fn bad_input_exits_2_with_the_precise_message() {
    for (rel, message) in [
        ("bad/yaml-syntax.yaml", ":4:3: submit: \"-\" is only valid inside a block"),
        (
            "bad/negative-cpu.yaml",
            ":12:63: submit[0]: Pod default/p0: spec.containers[0].resources.requests[cpu]",
        ),
        (
            "bad/mincount-zero.yaml",
            "spec.schedulingPolicy.gang.minCount: Required value: must be greater than or equal to 1",
        ),
    ] {
        for command in ["simulate", "validate"] {
            let out = placer(&[command, path(&fixture(rel))]);
            let (stdout, stderr) = text(&out);
            assert_eq!(out.status.code(), Some(2), "{command} {rel}: {stdout}{stderr}");
            assert!(stderr.contains(message), "{command} {rel}: errors go to stderr: {stderr}");
            assert!(!stdout.contains(message), "{command} {rel}: never to stdout: {stdout}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

#[test]
fn the_worst_file_decides_the_exit_code() {
    let good = fixture("good/delete-bound-pod.yaml");
    let failing = fixture("failing/wrong-expectation.yaml");
    let bad = fixture("bad/mincount-zero.yaml");
    assert_eq!(placer(&["simulate", path(&good), path(&failing)]).status.code(), Some(1));
    assert_eq!(placer(&["simulate", path(&failing), path(&bad), path(&good)]).status.code(), Some(2));
    assert_eq!(placer(&["simulate", path(&good)]).status.code(), Some(0));
}

#[test]
fn validate_accepts_the_examples() {
    let out = placer(&["validate", "examples/gang-rack.yaml", "examples/gang-quorum.yaml"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("ok examples/gang-rack.yaml (gang-rack: 5 nodes"), "{stdout}");
}

/// Kueue has no CronJob webhook: a CronJob whose Jobs the Job webhook will refuse is valid
/// (exit code 0) and gets a warning at the annotation's line naming the CronJob.
#[test]
fn validate_warns_about_a_cronjob_whose_jobs_will_be_refused() {
    let file = "tests/scenarios/tas-validation/008-cronjob-template-is-not-checked-its-jobs-are-refused.yaml";
    let out = placer(&["validate", file]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "warning: {file}:26:17: submit[0]: CronJob default/nightly: \
             spec.jobTemplate.spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: \
             Invalid value: \"0\": must be greater than or equal to 1 (Kueue does not check a CronJob"
        )),
        "{stdout}"
    );
}

#[test]
fn json_output_is_a_list_of_the_final_objects() {
    let out = placer(&["simulate", "--output", "json", "examples/gang-rack.yaml"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("PASS gang-rack"), "the report goes to stderr: {stderr}");
    let list: serde_json::Value = match serde_json::from_str(&stdout) {
        Ok(v) => v,
        Err(e) => panic!("{e}: {stdout}"),
    };
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let objects = items.iter().filter(|i| i["kind"] != "Event").count();
    assert_eq!(objects, 5 + 6 + 1, "nodes, pods and the PodGroup");
    // The recorded events follow the objects, as v1 Events (issue 16).
    let events = items.iter().filter(|i| i["kind"] == "Event").count();
    assert!(events > 0, "the events are included");
    assert!(items.iter().skip(objects).all(|i| i["kind"] == "Event"), "events come after the objects");
}

#[test]
fn yaml_output_keeps_strings_quoted() {
    let out = placer(&["simulate", "-o", "yaml", path(&fixture("good/delete-bound-pod.yaml"))]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout.contains("power: \"on\""), "{stdout}");
}

#[test]
fn metrics_are_written_to_a_file_apart_from_the_report() {
    let file = std::env::temp_dir().join(format!("placer-cli-metrics-{}.txt", std::process::id()));
    let out = placer(&["simulate", "--metrics", path(&file), "examples/gang-rack.yaml"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(!stdout.contains("# TYPE "), "the report carries no metrics: {stdout}");
    let metrics = std::fs::read_to_string(&file).expect("the metrics file");
    let _ = std::fs::remove_file(&file);
    for needle in [
        "# HELP scheduler_podgroup_schedule_attempts ",
        "scheduler_podgroup_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 1",
        "# TYPE scheduler_podgroup_scheduling_attempt_duration_seconds histogram",
        "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 5",
        "scheduler_placement_total{profile=\"default-scheduler\"}",
        "scheduler_pending_pods{queue=\"active\"} 0",
        "# EOF",
    ] {
        assert!(metrics.contains(needle), "{needle:?} missing from:\n{metrics}");
    }
}

#[test]
fn missing_file_and_bad_arguments_exit_2() {
    let out = placer(&["simulate", "no/such/file.yaml"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("no/such/file.yaml"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(placer(&["simulate"]).status.code(), Some(2));
    assert_eq!(placer(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn cluster_prints_a_scenarios_manifests_with_the_namespaces_they_need() {
    let out = placer(&["cluster", "examples/job-training.yaml", "--manifests"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: training\n---\n"),
        "{stdout}"
    );
    assert!(stdout.contains("kind: Job"), "{stdout}");
    // The namespace is not repeated when the scenario creates it.
    let out = placer(&["cluster", "examples/serve-demo.yaml", "--manifests"]);
    assert_eq!(text(&out).0.matches("kind: Namespace").count(), 1);
}

#[test]
fn cluster_rejects_bad_input_before_serving() {
    let out = placer(&["cluster", "--speed", "0", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("--speed must be a positive number"), "{}", text(&out).1);
    let out = placer(&["cluster", "no/such/file.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let out = placer(&["cluster", "--latency", "fast", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("--latency"), "{}", text(&out).1);
    let out = placer(&["cluster", "--manifests"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn endless_input_stops_at_the_size_cap_with_a_sentence() {
    let out = placer(&["validate", "/dev/zero"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("/dev/zero: the file is larger than 16 MiB (16777216 bytes), the most Placer reads"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn simulate_help_points_to_the_in_repository_format() {
    let out = placer(&["simulate", "--help"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert!(stdout.contains("docs/scenario-format.md"), "{stdout}");
    assert!(workspace().join("docs/scenario-format.md").is_file());
}

#[test]
fn bench_failures_prints_recovery_figures() {
    let out = placer(&["bench", "--failures", "--quick"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("failure benchmark: 200 nodes"), "{stdout}");
    assert!(stdout.contains("repaired in place"), "{stdout}");
    assert!(stdout.contains("re-placed"), "{stdout}");
    assert!(stdout.contains("time to recovery p50"), "{stdout}");
    assert!(stdout.contains("GPU-hours lost"), "{stdout}");
}

#[test]
fn replay_prints_the_side_by_side_table_and_writes_the_plot() {
    let dir = std::env::temp_dir().join(format!("placer-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("small.html");
    let out = placer(&[
        "replay",
        "examples/traces/small.yaml",
        "--configs",
        "kep5732,tas-bestfit,placer",
        "--plot",
        path(&page),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("trace small: 32 nodes, 9 arrivals (6 gangs)"), "{stdout}");
    for id in ["kep5732", "tas-bestfit", "placer"] {
        assert!(stdout.lines().any(|l| l.starts_with(id)), "a row for {id}: {stdout}");
    }
    assert!(stdout.contains("6/6"), "every gang completes: {stdout}");
    assert!(stdout.contains("best per measure:"), "{stdout}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("small: GPU utilisation"), "{html}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_bad_input_exits_2_naming_what_is_wrong() {
    let out = placer(&["replay", "examples/traces/small.yaml", "--configs", "nope"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("unknown configuration \"nope\""), "{stderr}");
    let out = placer(&["replay", "--builtin", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("unknown built-in trace \"nope\""));
    let dir = std::env::temp_dir().join(format!("placer-replay-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "name: bad\ncluster:\n  generate:\n    levels: [kubernetes.io/hostname]\n    fanout: [2]\n    \
         allocatable: {cpu: \"4\", pods: \"10\"}\narrivals:\n  - {at: 0s, pods: 2, requests: {cpu: \"1\"}, required: rack, runTime: 1m}\n",
    )
    .unwrap();
    let out = placer(&["replay", path(&bad)]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad.yaml:8: arrivals[0].required: unknown level \"rack\""), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_prints_the_effective_profile_and_reads_back_its_args() {
    // Defaults: kube-scheduler v1.36's score plugins, ImageLocality last, and the
    // NodeResourcesFit args.
    let out = placer(&["config"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"),
        "{stdout}"
    );
    assert!(stdout.contains("- name: NodeResourcesBalancedAllocation\n        weight: 1\n      - name: ImageLocality\n        weight: 1\n"), "{stdout}");
    assert!(stdout.contains("kind: NodeResourcesFitArgs"), "{stdout}");
    // Every default plugin with arguments, with upstream's defaults (DefaultPreemption too).
    for kind in ["DefaultPreemptionArgs", "PodTopologySpreadArgs", "VolumeBindingArgs"] {
        assert!(stdout.contains(&format!("kind: {kind}")), "{kind}: {stdout}");
    }
    assert!(stdout.contains("minCandidateNodesAbsolute: 100"), "{stdout}");
    assert!(stdout.contains("defaultingType: System"), "{stdout}");
    assert!(stdout.contains("bindTimeoutSeconds: 600"), "{stdout}");
    // A scenario's RequestedToCapacityRatio strategy shows up, and a serve file with the
    // printed args reads back.
    let out = placer(&[
        "config",
        "--scenario",
        "tests/scenarios/plugins/003-requested-to-capacity-ratio-packs.yaml",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("type: RequestedToCapacityRatio"), "{stdout}");
    let dir = std::env::temp_dir().join(format!("placer-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("serve.yaml");
    // The first profile's pluginConfig (up to the next profile).
    let plugin_config = &stdout[stdout.find("  pluginConfig:").expect("pluginConfig")..];
    let body: String = plugin_config
        .lines()
        .take_while(|l| !l.starts_with("- "))
        .map(|l| format!("{}\n", &l[2..]))
        .collect();
    std::fs::write(&file, format!("schedulerName: placer\n{body}")).expect("write");
    let out = placer(&["config", "--serve-config", path(&file)]);
    let (again, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{again}{stderr}");
    assert!(again.contains("type: RequestedToCapacityRatio"), "{again}");
    // Invalid args: kube-scheduler's message, exit code 2.
    std::fs::write(
        &file,
        "pluginConfig:\n- name: NodeResourcesFit\n  args: {scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 101}]}}\n",
    )
    .expect("write");
    let out = placer(&["config", "--serve-config", path(&file)]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("plugin NodeResourcesFit: pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
