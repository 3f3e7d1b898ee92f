//! Rendering shared by the subcommands: result lines, the PodGroup table, errors.
//!
//! Text is written through `anstream`, which drops the colour codes when the stream is
//! not a terminal or `NO_COLOR` is set.

use std::io::Write;
use std::path::Path;

use anstyle::{AnsiColor, Style};
use comfy_table::{presets, Cell, Table};
use placer_sim::{GroupRow, LoadError, RunReport};

pub const PASS: Style = Style::new().bold().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
pub const FAIL: Style = Style::new().bold().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));
pub const ERROR: Style = Style::new().bold().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));
pub const WARN: Style = Style::new().bold().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
pub const DIM: Style = Style::new().dimmed();
pub const RESET: anstyle::Reset = anstyle::Reset;

/// How many domain values a table cell shows before summarizing the rest.
const MAX_VALUES: usize = 4;

/// The last segment of a label key (`topology.example.com/rack` -> `rack`).
fn short_key(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

fn domains_cell(row: &GroupRow) -> String {
    if row.domains.is_empty() {
        return "-".to_string();
    }
    row.domains
        .iter()
        .map(|(key, values)| {
            let shown: Vec<&str> = values.iter().take(MAX_VALUES).map(String::as_str).collect();
            let mut s = format!(
                "{}: {}",
                short_key(key),
                if shown.is_empty() { "-".to_string() } else { shown.join(", ") }
            );
            if values.len() > MAX_VALUES {
                s.push_str(&format!(" (+{})", values.len() - MAX_VALUES));
            }
            s
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The PodGroup table of a report (`None` when there is no PodGroup).
pub fn group_table(report: &RunReport) -> Option<String> {
    if report.groups.is_empty() {
        return None;
    }
    let mut table = Table::new();
    table.load_style(presets::UTF8_FULL_CONDENSED);
    table.set_header(["PodGroup", "Policy", "State", "Bound", "Domains", "Condition"]);
    for row in &report.groups {
        table.add_row([
            Cell::new(format!("{}/{}", row.namespace, row.name)),
            Cell::new(&row.policy),
            Cell::new(row.state.to_string()),
            Cell::new(format!("{}/{}", row.bound, row.total)),
            Cell::new(domains_cell(row)),
            Cell::new(row.condition.clone().unwrap_or_else(|| "-".to_string())),
        ]);
    }
    Some(table.to_string())
}

/// Writes the human-readable result of one run.
pub fn write_report(out: &mut dyn Write, report: &RunReport) -> std::io::Result<()> {
    let (word, style) = if report.passed() { ("PASS", PASS) } else { ("FAIL", FAIL) };
    writeln!(
        out,
        "{style}{word}{RESET} {} {DIM}{}{RESET} ({} checks, virtual time {})",
        report.name,
        report.file.display(),
        report.checked(),
        format_ms(report.virtual_time_ms)
    )?;
    if let Some(table) = group_table(report) {
        for line in table.lines() {
            writeln!(out, "  {line}")?;
        }
    }
    for row in &report.groups {
        if let Some(reason) = &row.reason {
            writeln!(out, "  {WARN}{}/{}{RESET}: {reason}", row.namespace, row.name)?;
        }
    }
    write_preempted_pods(out, &placer_sim::explain::preempted_pods(&report.events, &report.objects))?;
    writeln!(out, "  cluster: {}", report.cluster)?;
    for (at, failure) in report.failures() {
        writeln!(out, "  {FAIL}FAIL{RESET} {at}: {failure}")?;
    }
    for e in &report.controller_errors {
        writeln!(out, "  {WARN}warning:{RESET} {e}")?;
    }
    Ok(())
}

/// Writes one line per pod the scheduler preempted: `ns/pod: preempted by pod ns/high on
/// node n1 (at 9ms)`.
pub fn write_preempted_pods(
    out: &mut dyn Write,
    pods: &[placer_sim::explain::PreemptedPod],
) -> std::io::Result<()> {
    for p in pods {
        let again = if p.exists { ", created again since" } else { "" };
        writeln!(out, "  {WARN}{}{RESET}: preempted by {} (at {}{again})", p.pod, p.by, format_ms(p.at_ms))?;
    }
    Ok(())
}

/// Writes the events a run recorded, in order: virtual time, type, reason, object, note.
pub fn write_events(out: &mut dyn Write, report: &RunReport) -> std::io::Result<()> {
    if report.events.is_empty() {
        return writeln!(out, "  events: none");
    }
    writeln!(out, "  events ({}):", report.events.len())?;
    for e in &report.events {
        let style = if e.type_ == "Warning" { WARN } else { DIM };
        writeln!(
            out,
            "    {:>8} {style}{:<7}{RESET} {:<22} {} {}: {}",
            format_ms(e.time_ms),
            e.type_,
            e.reason,
            e.regarding.kind,
            object_name(&e.regarding),
            e.note
        )?;
    }
    Ok(())
}

fn object_name(r: &placer_cluster::ObjectRef) -> String {
    if r.namespace.is_empty() {
        r.name.clone()
    } else {
        format!("{}/{}", r.namespace, r.name)
    }
}

/// The events of a run as core `v1` Event objects (for `--output json|yaml`); the virtual
/// time is the `placer.dev/virtual-time-ms` annotation.
pub fn event_objects(report: &RunReport) -> Vec<serde_json::Value> {
    report
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let r = &e.regarding;
            let namespace = if r.namespace.is_empty() { "default" } else { r.namespace.as_str() };
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": format!("{}.{}", r.name, i),
                    "namespace": namespace,
                    "annotations": {"placer.dev/virtual-time-ms": e.time_ms.to_string()},
                },
                "involvedObject": {
                    "apiVersion": r.kind.api_version(),
                    "kind": r.kind.name(),
                    "namespace": r.namespace,
                    "name": r.name,
                },
                "type": e.type_,
                "reason": e.reason,
                "message": e.note,
                "source": {"component": e.reporter},
                "count": 1,
            })
        })
        .collect()
}

/// `1.5s`, `250ms`, `2m3s`.
pub fn format_ms(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        let s = ms as f64 / 1000.0;
        return format!("{}s", trim_float(s));
    }
    let minutes = ms / 60_000;
    let rest = ms % 60_000;
    if rest == 0 {
        format!("{minutes}m")
    } else {
        format!("{minutes}m{}s", trim_float(rest as f64 / 1000.0))
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Writes a load error: the message, and for YAML errors the source snippet.
pub fn write_load_error(out: &mut dyn Write, err: &LoadError) -> std::io::Result<()> {
    writeln!(out, "{ERROR}error:{RESET} {err}")?;
    if let LoadError::Yaml { snippet, file, .. } = err {
        for line in snippet.lines().skip(1) {
            writeln!(out, "{}", line.replace("<input>", &file.display().to_string()))?;
        }
    }
    Ok(())
}

/// Writes `PASS <file> (rejected as expected: <first problem>)`.
pub fn write_expected_rejection(out: &mut dyn Write, file: &Path, err: &LoadError) -> std::io::Result<()> {
    let first = err.to_string().lines().next().unwrap_or_default().to_string();
    writeln!(out, "{PASS}PASS{RESET} {} (rejected as expected: {first})", file.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_ms(0), "0ms");
        assert_eq!(format_ms(250), "250ms");
        assert_eq!(format_ms(1_500), "1.5s");
        assert_eq!(format_ms(30_000), "30s");
        assert_eq!(format_ms(120_000), "2m");
        assert_eq!(format_ms(123_000), "2m3s");
    }

    #[test]
    fn long_domain_lists_are_summarized() {
        let row = GroupRow {
            namespace: "default".into(),
            name: "pg".into(),
            policy: "basic".into(),
            state: placer_sim::GroupState::Scheduled,
            bound: 6,
            total: 6,
            domains: vec![
                ("topology.example.com/rack".into(), vec!["r1".into()]),
                ("kubernetes.io/hostname".into(), (1..=6).map(|i| format!("n{i}")).collect()),
            ],
            condition: None,
            exists: true,
            reason: None,
        };
        assert_eq!(domains_cell(&row), "rack: r1\nhostname: n1, n2, n3, n4 (+2)");
    }
}
