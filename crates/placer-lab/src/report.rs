//! The side-by-side table and the verdict per measure.

use std::fmt::Write;

use serde::Serialize;

use crate::summary::Summary;
use crate::TraceReport;

/// `12.3s`, `4.5m`, `2.1h` (`-` for none).
pub fn fmt_secs(s: Option<f64>) -> String {
    match s {
        None => "-".to_string(),
        Some(s) if s < 60.0 => format!("{s:.1}s"),
        Some(s) if s < 3600.0 => format!("{:.1}m", s / 60.0),
        Some(s) => format!("{:.1}h", s / 3600.0),
    }
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// Which way a measure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Better {
    Higher,
    Lower,
}

/// The measures the verdict covers: (name, direction, value).
#[allow(clippy::type_complexity)]
pub fn measures(
    levels: &[String],
    device: &str,
) -> Vec<(String, Better, Box<dyn Fn(&Summary) -> Option<f64>>)> {
    let mut m: Vec<(String, Better, Box<dyn Fn(&Summary) -> Option<f64>>)> = vec![
        (format!("{device} utilisation"), Better::Higher, Box::new(|s: &Summary| Some(s.device_util))),
        ("gang wait p50".into(), Better::Lower, Box::new(|s: &Summary| s.wait_p50_s)),
        ("gang wait p90".into(), Better::Lower, Box::new(|s: &Summary| s.wait_p90_s)),
        ("gang wait p99".into(), Better::Lower, Box::new(|s: &Summary| s.wait_p99_s)),
        ("gangs completed".into(), Better::Higher, Box::new(|s: &Summary| Some(s.gangs_completed as f64))),
        (
            "gangs never placed".into(),
            Better::Lower,
            Box::new(|s: &Summary| Some(s.gangs_never_placed as f64)),
        ),
    ];
    for (i, l) in levels.iter().enumerate() {
        m.push((
            format!("{l}s per gang"),
            Better::Lower,
            Box::new(move |s: &Summary| s.domains_per_gang.get(i).copied()),
        ));
    }
    m.push(("stranded in hosts".into(), Better::Lower, Box::new(|s: &Summary| Some(s.stranded_hosts))));
    m.push(("stranded in racks".into(), Better::Lower, Box::new(|s: &Summary| Some(s.stranded_racks))));
    m.push((
        "median gangs placeable".into(),
        Better::Higher,
        Box::new(|s: &Summary| Some(s.median_gangs_placeable)),
    ));
    m.push((
        "free unusable by median gang".into(),
        Better::Lower,
        Box::new(|s: &Summary| Some(s.unusable_free)),
    ));
    m.push(("makespan".into(), Better::Lower, Box::new(|s: &Summary| Some(s.makespan_s))));
    m
}

/// The best configuration on one measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub measure: String,
    /// Configurations sharing the best value.
    pub best: Vec<String>,
    pub best_value: f64,
    /// The runner-up's value (`None` when every configuration ties).
    pub next_value: Option<f64>,
    pub next: Option<String>,
}

/// The winner of every measure over `summaries`.
pub fn verdicts(summaries: &[Summary], levels: &[String], device: &str) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (name, better, f) in measures(levels, device) {
        let mut vals: Vec<(f64, &str)> =
            summaries.iter().filter_map(|s| f(s).map(|v| (v, s.config.as_str()))).collect();
        if vals.is_empty() {
            continue;
        }
        vals.sort_by(|a, b| match better {
            Better::Higher => b.0.total_cmp(&a.0),
            Better::Lower => a.0.total_cmp(&b.0),
        });
        let best_value = vals[0].0;
        let same = |v: f64| (v - best_value).abs() <= 1e-9 * best_value.abs().max(1.0);
        let best: Vec<String> = vals.iter().filter(|(v, _)| same(*v)).map(|(_, c)| c.to_string()).collect();
        let next = vals.iter().find(|(v, _)| !same(*v));
        out.push(Verdict {
            measure: name,
            best,
            best_value,
            next_value: next.map(|n| n.0),
            next: next.map(|n| n.1.to_string()),
        });
    }
    out
}

fn fmt_measure(name: &str, v: f64) -> String {
    if name.contains("wait") || name == "makespan" {
        fmt_secs(Some(v))
    } else if name.contains("utilisation") || name.contains("stranded") || name.contains("unusable") {
        pct(v)
    } else if name.contains("per gang") || name.contains("placeable") {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

/// The table of one trace, its legend and the verdicts, as text.
pub fn render_text(r: &TraceReport) -> String {
    let mut out = String::new();
    let device = r.runs.first().map_or("GPU", |x| x.device.name());
    let _ = writeln!(
        out,
        "trace {}: {} nodes, {} arrivals ({} gangs), {} pods",
        r.trace, r.nodes, r.arrivals, r.gangs, r.pods
    );
    if let Some(d) = &r.description {
        let _ = writeln!(out, "  {d}");
    }
    let mut headers: Vec<String> = vec![
        "config".into(),
        format!("{device} util"),
        "CPU util".into(),
        "run util".into(),
        "wait p50".into(),
        "p90".into(),
        "p99".into(),
        "done/gangs".into(),
        "never".into(),
    ];
    headers.extend(r.levels.iter().map(|l| format!("{l}s/gang")));
    headers.extend(
        ["strand host", "strand rack", "median fits", "unusable", "restarts", "makespan", "wall s"]
            .map(String::from),
    );
    let single = r.summaries.iter().any(|s| s.single_wait_p99_s.is_some());
    if single {
        headers.push("single p99".into());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in &r.summaries {
        let mut row = vec![
            s.config.clone(),
            pct(s.device_util),
            pct(s.cpu_util),
            pct(s.device_util_run),
            fmt_secs(s.wait_p50_s),
            fmt_secs(s.wait_p90_s),
            fmt_secs(s.wait_p99_s),
            format!("{}/{}", s.gangs_completed, s.gangs),
            s.gangs_never_placed.to_string(),
        ];
        row.extend(s.domains_per_gang.iter().map(|d| format!("{d:.2}")));
        row.extend([
            pct(s.stranded_hosts),
            pct(s.stranded_racks),
            format!("{:.1}", s.median_gangs_placeable),
            pct(s.unusable_free),
            s.restarts.to_string(),
            format!("{}{}", fmt_secs(Some(s.makespan_s)), if s.stopped_at_horizon { "*" } else { "" }),
            format!("{:.1}", s.wall_s),
        ]);
        if single {
            row.push(fmt_secs(s.single_wait_p99_s));
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..headers.len())
        .map(|i| rows.iter().map(|r| r[i].len()).chain([headers[i].len()]).max().unwrap_or(0))
        .collect();
    let line =
        |cells: &[String]| {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == 0 {
                        format!("{c:<w$}", w = widths[i])
                    } else {
                        format!("{c:>w$}", w = widths[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        };
    let head = line(&headers);
    let _ = writeln!(out, "{head}\n{}", "-".repeat(head.len()));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row));
    }
    if r.summaries.iter().any(|s| s.stopped_at_horizon) {
        let _ = writeln!(out, "(* stopped at the trace's horizon)");
    }
    for s in &r.summaries {
        let _ = writeln!(out, "  {:<14} {}", s.config, s.title);
    }
    let _ = writeln!(out, "wall time per configuration (s):");
    for s in &r.summaries {
        let t = &s.time;
        let _ = writeln!(
            out,
            "  {:<14} {:.1} = scheduler {:.1} + job controller {:.1} + kubelet {:.1} + lab {:.1} + samples {:.1} (+ setup); {} instants, {} rounds",
            s.config, s.wall_s, t.scheduler, t.job_controller, t.kubelet, t.lab, t.samples, t.instants, t.rounds
        );
    }
    let _ = writeln!(out, "best per measure:");
    for v in verdicts(&r.summaries, &r.levels, device) {
        let margin = match (&v.next, v.next_value) {
            (Some(n), Some(nv)) => format!(
                " (next {n} {}{})",
                fmt_measure(&v.measure, nv),
                if nv.abs() > 1e-12 {
                    format!(", {:+.1}%", (v.best_value - nv) / nv.abs() * 100.0)
                } else {
                    String::new()
                }
            ),
            _ => " (all equal)".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<30} {} {}{margin}",
            v.measure,
            v.best.join(" = "),
            fmt_measure(&v.measure, v.best_value)
        );
    }
    out
}
