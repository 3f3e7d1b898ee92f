//! The suite's report: workload results, the scaling curve and the optimized-vs-baseline
//! comparison, as aligned text tables or JSON.

use serde::Serialize;

use crate::memory::{format_bytes, format_kib};
use crate::runner::WorkloadResult;
use crate::simulate::SimulateResult;

/// One point of the scaling curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingPoint {
    pub id: String,
    pub nodes: u64,
    pub decisions: u64,
    /// Mean wall time per decision.
    pub mean_decision_ms: f64,
    pub p99_ms: f64,
    pub pods_per_second: f64,
    /// Time per decision over the previous point's (`None` for the first point).
    pub time_ratio: Option<f64>,
    /// Nodes over the previous point's.
    pub node_ratio: Option<f64>,
    /// `ln(time_ratio) / ln(node_ratio)`: 1 is linear growth, below 1 sub-linear.
    pub growth_exponent: Option<f64>,
    pub peak_memory_bytes: Option<u64>,
}

/// Scaling points from results (in the given order, which is increasing nodes).
pub fn scaling_curve(results: &[&WorkloadResult]) -> Vec<ScalingPoint> {
    let mut out: Vec<ScalingPoint> = Vec::with_capacity(results.len());
    for r in results {
        let mean = r.mean_decision_ms();
        let (time_ratio, node_ratio) = match out.last() {
            Some(prev) if prev.mean_decision_ms > 0.0 && prev.nodes > 0 => {
                (Some(mean / prev.mean_decision_ms), Some(r.nodes as f64 / prev.nodes as f64))
            }
            _ => (None, None),
        };
        let growth_exponent = match (time_ratio, node_ratio) {
            (Some(t), Some(n)) if t > 0.0 && n > 1.0 => Some(t.ln() / n.ln()),
            _ => None,
        };
        out.push(ScalingPoint {
            id: r.id.clone(),
            nodes: r.nodes,
            decisions: r.decisions,
            mean_decision_ms: mean,
            p99_ms: r.latency.p99_ms,
            pods_per_second: r.pods_per_second,
            time_ratio,
            node_ratio,
            growth_exponent,
            peak_memory_bytes: r.peak_memory_bytes,
        });
    }
    out
}

/// The same workload with both placement searches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineComparison {
    pub id: String,
    pub optimized_schedule_seconds: f64,
    pub baseline_schedule_seconds: f64,
    pub optimized_p99_ms: f64,
    pub baseline_p99_ms: f64,
    /// `baseline_schedule_seconds / optimized_schedule_seconds`.
    pub speedup: f64,
    /// Both searches bound the same pods to the same nodes in the same order.
    pub same_decisions: bool,
}

impl BaselineComparison {
    pub fn new(optimized: &WorkloadResult, baseline: &WorkloadResult) -> BaselineComparison {
        BaselineComparison {
            id: optimized.id.clone(),
            optimized_schedule_seconds: optimized.schedule_seconds,
            baseline_schedule_seconds: baseline.schedule_seconds,
            optimized_p99_ms: optimized.latency.p99_ms,
            baseline_p99_ms: baseline.latency.p99_ms,
            speedup: if optimized.schedule_seconds > 0.0 {
                baseline.schedule_seconds / optimized.schedule_seconds
            } else {
                0.0
            },
            same_decisions: optimized.decisions_digest == baseline.decisions_digest,
        }
    }
}

/// Where the figures were measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    pub os: String,
    pub arch: String,
    /// `std::thread::available_parallelism`.
    pub cpus: usize,
    /// `debug` or `release` build of the benchmark.
    pub profile: String,
}

impl Machine {
    pub fn current() -> Machine {
        Machine {
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            profile: if cfg!(debug_assertions) { "debug" } else { "release" }.to_string(),
        }
    }
}

/// Everything one `placer bench` run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    pub quick: bool,
    pub machine: Machine,
    /// Every run, optimized and baseline, in run order.
    pub workloads: Vec<WorkloadResult>,
    pub scaling: Vec<ScalingPoint>,
    pub baseline: Vec<BaselineComparison>,
    /// The `simulate` workload (the full simulator on a generated scenario file), when
    /// selected.
    pub simulate: Vec<SimulateResult>,
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// An aligned text table: a header row, a rule, the rows. Columns are separated by two
/// spaces; widths count characters.
pub fn render_table(headers: &[&str], align: &[Align], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(cols) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut s = String::new();
        for (i, cell) in cells.enumerate().take(cols) {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = widths[i].saturating_sub(cell.chars().count());
            match align.get(i).copied().unwrap_or(Align::Left) {
                Align::Left => {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                }
                Align::Right => {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
        }
        s.trim_end().to_string()
    };
    let mut out = line(&mut headers.iter().copied());
    out.push('\n');
    let total = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
        out.push('\n');
    }
    out
}

fn fixed(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

/// Thousands separators: `12345.6` -> `12,346`.
pub fn thousands(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The report as text: the workload table, then the baseline comparison, then the
/// scaling curve (sections without rows are left out).
pub fn render_text(report: &BenchReport) -> String {
    use Align::{Left as L, Right as R};
    let m = &report.machine;
    let mut out = format!(
        "placer bench{}: {} {} ({} cpus visible, {} build)\n\n",
        if report.quick { " --quick" } else { "" },
        m.os,
        m.arch,
        m.cpus,
        m.profile
    );
    let rows: Vec<Vec<String>> = report
        .workloads
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.search.clone(),
                thousands(r.nodes as f64),
                r.topology.clone(),
                if r.groups > 0 {
                    format!("{} x {}", thousands(r.groups as f64), thousands(r.pods as f64))
                } else {
                    format!("{} pods", thousands(r.pods as f64))
                },
                format!("{:.1}%", r.placed_share * 100.0),
                fixed(r.schedule_seconds, 2),
                fixed(r.apply_seconds, 2),
                thousands(r.pods_per_second),
                thousands(r.end_to_end_pods_per_second),
                fixed(r.latency.p50_ms, 2),
                fixed(r.latency.p90_ms, 2),
                fixed(r.latency.p99_ms, 2),
                r.largest_group.map_or_else(
                    || "-".to_string(),
                    |g| format!("{} ({})", fixed(g.latency.p99_ms, 2), thousands(f64::from(g.size))),
                ),
                r.placements_per_decision.map_or_else(|| "-".to_string(), |p| fixed(p, 1)),
                format_bytes(r.memory_after_nodes_bytes),
                format_bytes(r.peak_memory_bytes),
                format_kib(r.memory_per_node_bytes),
                format_kib(r.memory_per_pod_bytes),
            ]
        })
        .collect();
    out.push_str(&render_table(
        &[
            "workload",
            "search",
            "nodes",
            "topology",
            "groups x pods",
            "placed",
            "sched s",
            "apply s",
            "pods/s",
            "e2e pods/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "p99 largest",
            "evals/dec",
            "mem nodes",
            "peak mem",
            "mem/node",
            "mem/pod",
        ],
        &[L, L, R, L, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R],
        &rows,
    ));

    if !report.baseline.is_empty() {
        out.push_str("\noptimized vs baseline placement search (same workload, same binary)\n");
        let rows: Vec<Vec<String>> = report
            .baseline
            .iter()
            .map(|b| {
                vec![
                    b.id.clone(),
                    fixed(b.optimized_schedule_seconds, 3),
                    fixed(b.baseline_schedule_seconds, 3),
                    fixed(b.optimized_p99_ms, 2),
                    fixed(b.baseline_p99_ms, 2),
                    format!("{:.1}x", b.speedup),
                    if b.same_decisions { "yes" } else { "no" }.to_string(),
                ]
            })
            .collect();
        out.push_str(&render_table(
            &[
                "workload",
                "optimized s",
                "baseline s",
                "opt p99 ms",
                "base p99 ms",
                "speed-up",
                "same decisions",
            ],
            &[L, R, R, R, R, R, R],
            &rows,
        ));
    }

    if !report.scaling.is_empty() {
        out.push_str("\nscaling (b's shape): time per decision vs nodes\n");
        let opt = |v: Option<f64>, d: usize| v.map_or_else(|| "-".to_string(), |x| fixed(x, d));
        let rows: Vec<Vec<String>> = report
            .scaling
            .iter()
            .map(|p| {
                vec![
                    thousands(p.nodes as f64),
                    thousands(p.decisions as f64),
                    fixed(p.mean_decision_ms, 3),
                    fixed(p.p99_ms, 2),
                    opt(p.node_ratio, 1),
                    opt(p.time_ratio, 2),
                    opt(p.growth_exponent, 2),
                    thousands(p.pods_per_second),
                    format_bytes(p.peak_memory_bytes),
                ]
            })
            .collect();
        out.push_str(&render_table(
            &[
                "nodes",
                "decisions",
                "ms/decision",
                "p99 ms",
                "x nodes",
                "x time",
                "exponent",
                "pods/s",
                "peak mem",
            ],
            &[R, R, R, R, R, R, R, R, R],
            &rows,
        ));
        out.push_str("(exponent = ln(x time) / ln(x nodes): 1.0 is linear growth)\n");
    }

    if !report.simulate.is_empty() {
        out.push_str("\nfull simulator on a generated scenario file (placer simulate FILE, in process)\n");
        let rows: Vec<Vec<String>> = report
            .simulate
            .iter()
            .map(|s| {
                vec![
                    s.id.clone(),
                    thousands(s.nodes as f64),
                    thousands(s.pods as f64),
                    format_bytes(Some(s.file_bytes)),
                    fixed(s.load_seconds, 2),
                    fixed(s.run_seconds, 2),
                    fixed(s.wall_seconds, 2),
                    format!("{}/{}", thousands(s.bound_pods as f64), thousands(s.pods as f64)),
                    if s.passed { "yes" } else { "no" }.to_string(),
                    format_bytes(s.memory_before_bytes),
                    format_bytes(s.peak_memory_bytes),
                ]
            })
            .collect();
        out.push_str(&render_table(
            &[
                "workload",
                "nodes",
                "gang",
                "file",
                "load s",
                "run s",
                "wall s",
                "bound",
                "expect",
                "mem before",
                "peak mem",
            ],
            &[L, R, R, R, R, R, R, R, R, R, R],
            &rows,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencySummary;

    fn result(id: &str, nodes: u64, decisions: u64, seconds: f64, digest: &str) -> WorkloadResult {
        WorkloadResult {
            id: id.to_string(),
            title: String::new(),
            search: "optimized".to_string(),
            nodes,
            topology: "1 racks x 1 hosts".to_string(),
            groups: decisions,
            pods: decisions * 10,
            bound_pods: decisions * 10,
            placed: decisions,
            placed_share: 1.0,
            decisions,
            schedule_seconds: seconds,
            apply_seconds: 0.0,
            pods_per_second: (decisions * 10) as f64 / seconds,
            end_to_end_pods_per_second: (decisions * 10) as f64 / seconds,
            latency: LatencySummary::default(),
            latency_source: "schedule call".to_string(),
            largest_group: None,
            placements_per_decision: Some(2.0),
            memory_after_nodes_bytes: None,
            peak_memory_bytes: None,
            memory_per_node_bytes: None,
            memory_per_pod_bytes: None,
            decisions_digest: digest.to_string(),
            total_seconds: seconds,
        }
    }

    #[test]
    fn tables_align_columns() {
        let t = render_table(
            &["name", "n"],
            &[Align::Left, Align::Right],
            &[vec!["a".to_string(), "1".to_string()], vec!["long".to_string(), "1000".to_string()]],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "name     n");
        assert_eq!(lines[1], "----------");
        assert_eq!(lines[2], "a        1");
        assert_eq!(lines[3], "long  1000");
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }

    #[test]
    fn scaling_ratios_and_exponent() {
        let a = result("s1", 1_000, 100, 0.1, "x");
        let b = result("s2", 10_000, 100, 1.0, "x");
        let c = result("s3", 20_000, 100, 1.0, "x");
        let curve = scaling_curve(&[&a, &b, &c]);
        assert_eq!(curve[0].time_ratio, None);
        assert!((curve[0].mean_decision_ms - 1.0).abs() < 1e-9);
        assert!((curve[1].time_ratio.unwrap_or(0.0) - 10.0).abs() < 1e-9);
        assert!(
            (curve[1].growth_exponent.unwrap_or(0.0) - 1.0).abs() < 1e-9,
            "10x time for 10x nodes is linear"
        );
        assert!(curve[2].growth_exponent.unwrap_or(1.0).abs() < 1e-9, "flat time is exponent 0");
    }

    #[test]
    fn baseline_comparison_and_text() {
        let o = result("b", 5_000, 10, 0.5, "d1");
        let mut b = result("b", 5_000, 10, 10.0, "d1");
        b.search = "baseline".to_string();
        let cmp = BaselineComparison::new(&o, &b);
        assert!((cmp.speedup - 20.0).abs() < 1e-9);
        assert!(cmp.same_decisions);
        let report = BenchReport {
            quick: true,
            machine: Machine::current(),
            workloads: vec![o.clone(), b],
            scaling: scaling_curve(&[&o]),
            baseline: vec![cmp],
            simulate: Vec::new(),
        };
        let text = render_text(&report);
        assert!(text.contains("20.0x"));
        assert!(text.contains("scaling"));
        let json = serde_json::to_value(&report).expect("serializes");
        assert_eq!(json["baseline"][0]["same_decisions"], true);
        assert_eq!(json["workloads"][1]["search"], "baseline");
    }
}
