//! Issue 16 through the public binary: inputs (directories, stdin, cluster dumps), the
//! table's reasons and events, `placer explain`, `--set` and `placer compare`, and the
//! HTML report.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn placer(args: &[&str]) -> Output {
    match Command::new(env!("CARGO_BIN_EXE_placer")).args(args).current_dir(workspace()).output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run placer: {e}"),
    }
}

fn placer_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_placer"))
        .args(args)
        .current_dir(workspace())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn placer");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("wait placer")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("placer-answers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn validate_and_simulate_take_directories_and_stdin() {
    let out = placer(&["validate", "examples"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("ok examples/compare-balanced.yaml"), "{stdout}");
    assert!(stdout.contains("ok examples/gang-rack.yaml"), "{stdout}");
    let scenario = std::fs::read_to_string(workspace().join("examples/gang-rack.yaml")).expect("example");
    let out = placer_stdin(&["simulate", "-"], &scenario);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("PASS gang-rack -"), "{stdout}");
    let empty = temp_dir("empty");
    let out = placer(&["validate", empty.to_str().unwrap_or_default()]);
    let (_, stderr) = text(&out);
    let _ = std::fs::remove_dir_all(&empty);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no *.yaml or *.yml file"), "{stderr}");
}

#[test]
fn a_kubectl_list_dump_of_nodes_and_pods_loads_and_schedules() {
    let out = placer(&["simulate", "--snapshot", "examples/snapshot/cluster-dump.yaml"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    // The pods Pending in the dump are bound now.
    assert!(stdout.contains("cluster: 4 nodes"), "{stdout}");
    let line = stdout.lines().find(|l| l.contains("cluster:")).unwrap_or_default();
    let bound = line.split(", ").nth(1).unwrap_or_default();
    let (a, b) = bound
        .split_once(" pods bound")
        .map(|(x, _)| x)
        .unwrap_or_default()
        .split_once('/')
        .unwrap_or_default();
    assert_eq!(a, b, "every pod of the dump is bound: {line}");
    // From stdin, with a kind the simulation does not load: skipped, in one line.
    let mut dump =
        std::fs::read_to_string(workspace().join("examples/snapshot/cluster-dump.yaml")).expect("dump");
    dump.push_str("---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: web}\nspec: {ports: [{port: 80}]}\n");
    let out = placer_stdin(&["simulate", "--snapshot", "-"], &dump);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("skipped 1 object of kinds the simulation does not load: v1 Service (1)"),
        "{stderr}"
    );
    // A scenario on top of the dump: its own submissions run on the dump's cluster.
    let out = placer(&[
        "simulate",
        "examples/snapshot/will-it-fit.yaml",
        "--snapshot",
        "examples/snapshot/cluster-dump.yaml",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
}

#[test]
fn the_table_says_why_each_group_is_not_bound() {
    let out = placer(&["simulate", "examples/explain-gpu-racks.yaml", "--events"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("training/eval: waiting for 1 more pod (minCount 4, 3 exist)"), "{stdout}");
    assert!(
        stdout.contains(
            "no rack can hold minCount 64: closest rack r0 (63 of 64 pods fit, lacks 1 nvidia.com/gpu)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("events ("), "{stdout}");
    assert!(stdout.contains("FailedScheduling"), "{stdout}");
    let out = placer(&["simulate", "examples/explain-gpu-racks.yaml", "-o", "json"]);
    let (stdout, _) = text(&out);
    let list: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let events =
        list["items"].as_array().map_or(0, |items| items.iter().filter(|i| i["kind"] == "Event").count());
    assert!(events > 0, "JSON output includes the events");
}

#[test]
fn explain_prints_each_racks_free_gpus_and_the_shortfall() {
    let out = placer(&["explain", "examples/explain-gpu-racks.yaml", "job:training/train-64"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("level topology.example.com/rack (required): 2 domains; 64 pods still to place"),
        "{stdout}"
    );
    let r0 = stdout.lines().find(|l| l.trim_start().starts_with("r0 ")).unwrap_or_default();
    let r1 = stdout.lines().find(|l| l.trim_start().starts_with("r1 ")).unwrap_or_default();
    assert!(r0.contains(" 63 ") && r0.ends_with("1 nvidia.com/gpu"), "{r0}\n{stdout}");
    assert!(r1.contains(" 62 ") && r1.ends_with("2 nvidia.com/gpu"), "{r1}\n{stdout}");

    let out = placer(&["explain", "examples/explain-gpu-racks.yaml", "training/eval"]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("missing: 1 member: minCount is 4 and 3 pod(s) exist"), "{stdout}");

    let out = placer(&["explain", "examples/explain-gpu-racks.yaml", "--output", "json"]);
    let (stdout, _) = text(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let groups = v[0]["podGroups"].as_array().cloned().unwrap_or_default();
    let train = groups.iter().find(|g| g["level"] == "topology.example.com/rack").expect("the rack gang");
    assert_eq!(train["domains"][0]["free"]["nvidia.com/gpu"], 63);
    assert_eq!(train["domains"][0]["shortfall"]["nvidia.com/gpu"], 1);
    let eval = groups.iter().find(|g| g["podGroup"] == "training/eval").expect("eval");
    assert_eq!(eval["missing"], 1);

    let out = placer(&["explain", "examples/explain-gpu-racks.yaml", "training/nope"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("not found"), "{stderr}");
}

#[test]
fn explain_says_why_the_winning_placement_won_with_each_plugins_score() {
    // rack-c (two nodes) and rack-b (three) both hold the four pods (PodGroupPodsCount 4 ->
    // 100 each); rack-a holds two (2 -> 50). NodeResourcesFit (MostAllocated over the
    // placement with the pods placed) prefers the smaller, fuller rack-c to rack-b.
    let out = placer(&["explain", "examples/explain-scores.yaml", "default/train"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("score plugins: PodGroupPodsCount (weight 1), NodeResourcesFit (weight 1)"),
        "{stdout}"
    );
    // The placement rows (those with score cells), the winner marked `<`.
    let row = |name: &str| {
        let prefix = format!("{name} ");
        stdout.lines().find(|l| l.trim_start().starts_with(&prefix) && l.contains(" x1")).unwrap_or_default()
    };
    let (c, b, a) = (row("rack-c"), row("rack-b"), row("rack-a"));
    assert!(c.contains("rack-c <") && c.contains("4 -> 100 x1") && c.ends_with(" 162"), "{c}\n{stdout}");
    assert!(b.contains("4 -> 100 x1") && b.ends_with(" 141"), "{b}\n{stdout}");
    assert!(a.contains("2 -> 50 x1") && a.ends_with(" 101"), "{a}\n{stdout}");
    assert!(stdout.contains("won: rack-c (highest total score)"), "{stdout}");

    let out = placer(&["explain", "examples/explain-scores.yaml", "default/train", "-o", "json"]);
    let (stdout, _) = text(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let p = &v[0]["podGroups"][0]["placements"];
    assert_eq!(p["computedFor"], "decidedCycle");
    let candidates = p["candidates"].as_array().cloned().unwrap_or_default();
    let winner: Vec<_> = candidates.iter().filter(|c| c["winner"] == true).collect();
    assert_eq!(winner.len(), 1, "{p}");
    assert_eq!(winner[0]["name"], "rack-c");
    assert_eq!(winner[0]["total"], 162);
    let scores = winner[0]["scores"].as_array().cloned().unwrap_or_default();
    assert_eq!(scores[0]["plugin"], "PodGroupPodsCount");
    assert_eq!((scores[0]["raw"].clone(), scores[0]["normalized"].clone()), (4.into(), 100.into()));
    let sum: i64 = scores.iter().map(|s| s["weighted"].as_i64().unwrap_or(0)).sum();
    assert_eq!(sum, 162, "the total is the sum of weight x normalized score");

    // A group that fits nowhere: every placement infeasible, with the reason, no winner.
    let out = placer(&["explain", "examples/explain-gpu-racks.yaml", "job:training/train-64"]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("infeasible: Insufficient nvidia.com/gpu"), "{stdout}");
    assert!(stdout.contains("won: none (no placement is feasible)"), "{stdout}");
}

#[test]
fn preempted_groups_and_pods_name_their_preemptor() {
    let out = placer(&["simulate", "examples/explain-preempted.yaml", "--events"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    // The gang's row names the pod that preempted it.
    assert!(stdout.contains("default/batch: preempted by pod default/urgent (2 pods evicted)"), "{stdout}");
    // Each victim, the standalone one too, has its own line.
    for victim in ["batch-0", "batch-1", "cache"] {
        let line = format!("default/{victim}: preempted by pod default/urgent on node node1 (at ");
        assert!(stdout.contains(&line), "{line}\n{stdout}");
    }
    // The event is kube-scheduler's: the preemptor by uid, on the candidate node.
    let out = placer(&["simulate", "examples/explain-preempted.yaml", "-o", "json"]);
    let (stdout, _) = text(&out);
    let list: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let uid = items
        .iter()
        .find(|i| i["kind"] == "Pod" && i["metadata"]["name"] == "urgent")
        .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string))
        .expect("the preemptor's uid");
    let cache = items
        .iter()
        .find(|i| {
            i["kind"] == "Event" && i["reason"] == "Preempted" && i["involvedObject"]["name"] == "cache"
        })
        .expect("the victim's Preempted event");
    assert_eq!(cache["message"], format!("Preempted by pod {uid} on node node1"));

    let out = placer(&["explain", "examples/explain-preempted.yaml", "-o", "json"]);
    let (stdout, _) = text(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let pods = v[0]["preemptedPods"].as_array().cloned().unwrap_or_default();
    assert_eq!(pods.len(), 3, "{v}");
    assert!(pods
        .iter()
        .any(|p| p["pod"] == "default/cache" && p["preemptedBy"] == "pod default/urgent on node node1"));
    assert_eq!(v[0]["podGroups"][0]["reason"], "preempted by pod default/urgent (2 pods evicted)");
}

#[test]
fn explain_ranks_the_hierarchy_s_domains_as_the_algorithm_sorts_them() {
    // BestFit (the default): both racks hold 15 of the 25 pods; the request climbs to the
    // block and fills b0-r0 first (15 + 10).
    let out = placer(&["explain", "examples/compare-balanced.yaml"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("level rack (preferred)"), "{stdout}");
    assert!(stdout.contains("): BestFit\n"), "{stdout}");
    assert!(stdout.contains("order: BestFit: most pods that fit first, then name"), "{stdout}");
    let row = |name: &str| stdout.lines().find(|l| l.contains(name) && l.contains(" <")).unwrap_or_default();
    assert!(row("b0/b0-r0").contains("15        15 <"), "{stdout}");
    assert!(row("b0/b0-r1").contains("15        10 <"), "{stdout}");
    assert!(stdout.contains("placed within one block (the request climbs)"), "{stdout}");

    let out = placer(&[
        "explain",
        "examples/compare-balanced.yaml",
        "--set",
        "scheduler.featureGates.TASBalancedPlacement=true",
        "-o",
        "json",
    ]);
    let (stdout, _) = text(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let r = &v[0]["podGroups"][0]["ranking"];
    assert_eq!(r["algorithm"], "BalancedPlacement", "{r}");
    assert_eq!(r["searchedLevel"], "rack");
    let assigned: Vec<i64> = r["domains"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["assigned"].as_i64()).collect())
        .unwrap_or_default();
    assert_eq!(assigned, [13, 12], "{r}");

    // No topology request at all under topologyLevels: Kueue's implicit default, the
    // lowest level, LeastFreeCapacity's order (was: no domains at all).
    let scenario =
        std::fs::read_to_string(workspace().join("examples/compare-balanced.yaml")).expect("example");
    let implied: String = scenario
        .lines()
        .filter(|l| !l.contains("podset-preferred-topology") && !l.trim_start().starts_with("annotations:"))
        .map(|l| if l == "        metadata:" { "        metadata: {}" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let out = placer_stdin(&["explain", "-"], &implied);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("level kubernetes.io/hostname (implied: no topology request"), "{stdout}");
    assert!(stdout.contains("): LeastFreeCapacity\n"), "{stdout}");
    assert!(stdout.contains("b0/b0-r0/b0-r0-h0  15        15 <"), "{stdout}");
    assert!(stdout.contains("b0/b0-r1/b0-r1-h0  15        10 <"), "{stdout}");
    assert!(stdout.contains("domains are taken in this order until every pod is placed"), "{stdout}");
}

#[test]
fn compare_prints_the_domains_balanced_placement_changes() {
    let out = placer(&[
        "compare",
        "examples/compare-balanced.yaml",
        "--set",
        "scheduler.featureGates.TASBalancedPlacement=true",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("A: b0-r0: 15 pods on 1 node, b0-r1: 10 pods on 1 node"), "{stdout}");
    assert!(stdout.contains("B: b0-r0: 13 pods on 1 node, b0-r1: 12 pods on 1 node"), "{stdout}");
    assert!(stdout.contains("pods bound"), "{stdout}");
    // --set on simulate, and a bad path is bad input naming it.
    let out = placer(&[
        "simulate",
        "examples/compare-balanced.yaml",
        "--set",
        "scheduler.profile.topologyLevls=[a]",
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("topologyLevls"), "{stderr}");
}

#[test]
fn the_html_report_is_self_contained() {
    let dir = temp_dir("report");
    let file = dir.join("r.html");
    let out = placer(&[
        "simulate",
        "examples/explain-gpu-racks.yaml",
        "--report",
        file.to_str().unwrap_or_default(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let html = std::fs::read_to_string(&file).expect("report");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg"), "an SVG hierarchy");
    assert!(html.contains("waiting for 1 more pod"), "unschedulable groups with their reason");
    assert!(!html.contains("<script"), "no script");
    assert!(
        !html.contains("http://") || !html.replace("http://www.w3.org/2000/svg", "").contains("http://"),
        "nothing fetched"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
