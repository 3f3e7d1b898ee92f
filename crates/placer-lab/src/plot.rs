//! Timelines as hand-written SVG: per trace, the device utilisation and the pending gangs
//! over virtual time, one line per configuration. [`html`] wraps every trace's charts and
//! tables into one self-contained page (no scripts, no external files).

use std::fmt::Write;

use crate::report::render_text;
use crate::TraceReport;

/// Line colours, one per configuration (colour-blind friendly, Okabe-Ito).
const COLOURS: [&str; 8] =
    ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000"];

const W: f64 = 760.0;
const H: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 40.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" upper bound and tick step for values up to `max`.
fn ticks(max: f64) -> (f64, f64) {
    if max <= 0.0 || !max.is_finite() {
        return (1.0, 0.25);
    }
    let raw = max / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

fn fmt_time(s: f64, span: f64) -> String {
    if span >= 7200.0 {
        format!("{:.0}h", s / 3600.0)
    } else if span >= 120.0 {
        format!("{:.0}m", s / 60.0)
    } else {
        format!("{s:.0}s")
    }
}

/// One chart: `series` = (label, points (seconds, value)).
pub fn chart(
    title: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    y_max: Option<f64>,
    percent: bool,
) -> String {
    let x_end = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).fold(0.0, f64::max).max(1.0);
    let data_max = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).fold(0.0, f64::max);
    let (y_top, y_step) = match y_max {
        Some(m) => (m, m / 4.0),
        None => ticks(data_max),
    };
    let (x_top, x_step) = ticks(x_end);
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let x = |v: f64| LEFT + v / x_top * pw;
    let y = |v: f64| TOP + ph - v / y_top * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = write!(s, r#"<text x="{LEFT}" y="18" font-size="13" font-weight="bold">{}</text>"#, esc(title));
    // grid and axes
    let mut v = 0.0;
    while v <= y_top + 1e-9 {
        let label = if percent { format!("{:.0}%", v * 100.0) } else { format!("{v:.0}") };
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#ddd"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{label}</text>"##,
            y(v),
            LEFT + pw,
            LEFT - 6.0,
            y(v) + 4.0
        );
        v += y_step;
    }
    let mut t = 0.0;
    while t <= x_top + 1e-9 {
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#eee"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"##,
            x(t),
            TOP + ph,
            TOP + ph + 14.0,
            fmt_time(t, x_top)
        );
        t += x_step;
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">virtual time</text><text x="14" y="{:.1}" transform="rotate(-90 14 {:.1})" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 6.0,
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        esc(y_label)
    );
    for (i, (label, pts)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let path: Vec<String> =
            pts.iter().map(|(a, b)| format!("{:.1},{:.1}", x(*a), y(b.min(y_top)))).collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            path.join(" ")
        );
        let ly = TOP + 14.0 * i as f64 + 6.0;
        let _ = write!(
            s,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{2:.1}" y2="{1:.1}" stroke="{colour}" stroke-width="3"/><text x="{3:.1}" y="{4:.1}">{5}</text>"#,
            LEFT + pw + 10.0,
            ly,
            LEFT + pw + 28.0,
            LEFT + pw + 32.0,
            ly + 4.0,
            esc(label)
        );
    }
    s.push_str("</svg>");
    s
}

/// The two charts of one trace.
pub fn trace_charts(r: &TraceReport) -> String {
    let device = r.runs.first().map_or("GPU", |x| x.device.name());
    let util: Vec<(String, Vec<(f64, f64)>)> = r
        .runs
        .iter()
        .map(|run| {
            (
                run.config.clone(),
                run.samples.iter().map(|s| (s.t_ms as f64 / 1000.0, s.device_util)).collect(),
            )
        })
        .collect();
    let pending: Vec<(String, Vec<(f64, f64)>)> = r
        .runs
        .iter()
        .map(|run| {
            (
                run.config.clone(),
                run.samples.iter().map(|s| (s.t_ms as f64 / 1000.0, s.pending_gangs as f64)).collect(),
            )
        })
        .collect();
    format!(
        "{}\n{}",
        chart(&format!("{}: {device} utilisation", r.trace), "utilisation", &util, Some(1.0), true),
        chart(&format!("{}: pending gangs", r.trace), "gangs waiting", &pending, None, false)
    )
}

/// A self-contained HTML page with every trace's charts and table.
pub fn html(reports: &[TraceReport]) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>placer replay</title>\
         <style>body{font-family:sans-serif;margin:2em;max-width:1200px}pre{font-size:12px;overflow-x:auto;background:#f6f6f6;padding:1em}</style>\
         </head><body>\n<h1>placer replay</h1>\n",
    );
    for r in reports {
        let _ = write!(
            s,
            "<h2>{}</h2>\n{}\n<pre>{}</pre>\n",
            esc(&r.trace),
            trace_charts(r),
            esc(&render_text(r))
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// A standalone SVG: every trace's two charts stacked.
pub fn svg(reports: &[TraceReport]) -> String {
    let mut body = String::new();
    let mut y = 0.0;
    for r in reports {
        for c in trace_charts(r).lines() {
            let _ = write!(body, r#"<g transform="translate(0 {y})">{c}</g>"#);
            y += H;
        }
    }
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{y}" viewBox="0 0 {W} {y}">{body}</svg>"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0), (1.0, 0.25));
        assert_eq!(ticks(95.0), (100.0, 25.0));
        assert_eq!(ticks(7.0), (8.0, 2.0));
    }

    #[test]
    fn chart_is_one_svg_with_a_line_per_series() {
        let series = vec![
            ("a<b".to_string(), vec![(0.0, 0.1), (10.0, 0.5)]),
            ("c".to_string(), vec![(0.0, 0.0), (10.0, 0.9)]),
        ];
        let s = chart("t", "u", &series, Some(1.0), true);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("a&lt;b"), "labels are escaped");
        assert!(s.contains(">100%<"));
    }
}
