//! The conformance suite: every scenario under `shared/scenarios/conformance/` (next to the
//! repository: `$CARGO_MANIFEST_DIR/../../../shared/scenarios/conformance`) is simulated and
//! its expectations checked.
//!
//! `tests/known-failures.txt` lists the cases that are allowed to fail, one per line as
//! `folder/file.yaml  # reason`. The test fails when a case fails that is not listed, and
//! when a listed case passes (remove it from the list), so the list is always exact.
//!
//! Regenerate the list from the actual results with
//! `PLACER_UPDATE_KNOWN_FAILURES=1 cargo test -p placer-sim --test conformance`; reasons of
//! cases that still fail are kept, new ones get their first failure as the reason.
//!
//! Every case runs on its own thread with a wall-clock limit ([`CASE_TIMEOUT`]), so one
//! case that never ends cannot hang the suite.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use placer_sim::{simulate_file, Outcome, RunOptions};

/// Wall-clock limit per case.
const CASE_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest reason written to the list.
const REASON_MAX: usize = 160;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios/conformance")
}

fn known_failures_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/known-failures.txt")
}

/// Every `*.yaml` below `dir`, as paths relative to it with `/` separators, sorted.
fn cases(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                if let Ok(rel) = path.strip_prefix(root) {
                    out.push(
                        rel.components()
                            .map(|c| c.as_os_str().to_string_lossy())
                            .collect::<Vec<_>>()
                            .join("/"),
                    );
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// `case -> reason` from the known-failures file (comments and blank lines skipped).
fn read_known(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('#') {
            Some((case, reason)) => (case.trim().to_string(), reason.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

fn one_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() > REASON_MAX {
        format!("{}...", line.chars().take(REASON_MAX).collect::<String>())
    } else {
        line.to_string()
    }
}

/// Runs one case: `Ok(())` when it passes, else its first failure.
fn run_case(path: PathBuf) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name(path.display().to_string()).spawn(move || {
        let result = match simulate_file(&path, &RunOptions::default()) {
            Ok(Outcome::RejectedAsExpected(_)) => Ok(()),
            Ok(Outcome::Ran(report)) => match report.failures().next() {
                None => Ok(()),
                Some((at, failure)) => Err(format!("{at}: {failure}")),
            },
            Err(e) => Err(e.to_string()),
        };
        // The receiver may have given up (timeout); nothing to do then.
        let _ = tx.send(result);
    });
    if let Err(e) = spawned {
        return Err(format!("could not start the case: {e}"));
    }
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(result) => result.map_err(|e| one_line(&e)),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("timed out after {}s", CASE_TIMEOUT.as_secs())),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked".to_string()),
    }
}

fn write_known(path: &Path, failing: &BTreeMap<String, String>) {
    let mut text = String::from(
        "# Conformance cases that are allowed to fail, one per line: `folder/file.yaml  # reason`.\n\
         # A failing case not listed here fails the test, and so does a listed case that passes.\n\
         # Regenerate: PLACER_UPDATE_KNOWN_FAILURES=1 cargo test -p placer-sim --test conformance\n\
         # (reasons of cases that still fail are kept).\n",
    );
    for (case, reason) in failing {
        text.push_str(&format!("{case}  # {reason}\n"));
    }
    if let Err(e) = std::fs::write(path, text) {
        panic!("cannot write {}: {e}", path.display());
    }
}

#[test]
fn conformance() {
    let dir = corpus_dir();
    if !dir.is_dir() {
        eprintln!("conformance corpus not found at {}: skipped", dir.display());
        return;
    }
    let all = cases(&dir);
    assert!(!all.is_empty(), "no scenarios under {}", dir.display());
    let known = read_known(&known_failures_file());

    // A few workers; each case on its own thread with a timeout.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 4);
    let queue = Arc::new(Mutex::new(all.clone()));
    let results = Arc::new(Mutex::new(BTreeMap::new()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (queue, results, dir) = (Arc::clone(&queue), Arc::clone(&results), dir.clone());
            scope.spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let Some(case) = next else { break };
                let result = run_case(dir.join(&case));
                results.lock().unwrap_or_else(|e| e.into_inner()).insert(case, result);
            });
        }
    });
    let results: BTreeMap<String, Result<(), String>> = Arc::try_unwrap(results)
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_default();

    // Per-folder pass counts.
    let mut per_folder: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (case, result) in &results {
        let folder = case.split('/').next().unwrap_or("");
        let entry = per_folder.entry(folder).or_default();
        entry.1 += 1;
        if result.is_ok() {
            entry.0 += 1;
        }
    }
    for (folder, (passed, total)) in &per_folder {
        eprintln!("conformance {folder}: {passed}/{total} pass");
    }

    if std::env::var_os("PLACER_UPDATE_KNOWN_FAILURES").is_some_and(|v| v == "1") {
        let failing: BTreeMap<String, String> = results
            .iter()
            .filter_map(|(case, r)| {
                let reason = r.as_ref().err()?;
                Some((
                    case.clone(),
                    known.get(case).filter(|k| !k.is_empty()).cloned().unwrap_or_else(|| reason.clone()),
                ))
            })
            .collect();
        write_known(&known_failures_file(), &failing);
        eprintln!("rewrote {} with {} failing cases", known_failures_file().display(), failing.len());
        return;
    }

    let mut problems = Vec::new();
    for (case, result) in &results {
        match (result, known.contains_key(case)) {
            (Err(reason), false) => {
                problems.push(format!("{case}: fails and is not in known-failures.txt: {reason}"))
            }
            (Ok(()), true) => problems.push(format!("{case}: now passes: remove it from known-failures.txt")),
            _ => {}
        }
    }
    for case in known.keys().filter(|c| !results.contains_key(*c)) {
        problems.push(format!("{case}: listed in known-failures.txt but no such scenario"));
    }
    assert!(
        problems.is_empty(),
        "{} conformance mismatch(es):\n  {}\n(regenerate with PLACER_UPDATE_KNOWN_FAILURES=1 if intended)",
        problems.len(),
        problems.join("\n  ")
    );
}
