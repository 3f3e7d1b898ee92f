//! `placer simulate FILE --report out.html`: one self-contained HTML file per run.
//!
//! Hand-written HTML and SVG (no script, no external resource, nothing fetched at view
//! time): the hierarchy as nested boxes (one per domain of each level, coarsest outside),
//! each node a cell with one bar per resource whose coloured segments are the PodGroups
//! using it; the PodGroups not fully bound with their reason; the PodGroup table; and,
//! when the run advanced virtual time, a timeline of utilisation and pending PodGroups.
//!
//! Size: every colour is one SVG `<path>` (a node's segment is a few bytes of path data,
//! not an element), so the 10,000-node three-level benchmark shape stays well under 5 MB.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use placer_cluster::Object;
use placer_engine::{pod_requests, Resources};
use placer_sim::{GroupState, RunReport};

/// Side of a node cell (px).
const CELL: u32 = 14;
/// Gap between cells and padding inside a domain box (px).
const GAP: u32 = 2;
const PAD: u32 = 4;
/// Height of a domain box's label (px).
const LABEL: u32 = 12;
/// Up to this many nodes get a tooltip (`<title>`) each.
const MAX_TOOLTIPS: usize = 2_000;
/// Resources drawn per node, most interesting first.
const MAX_RESOURCES: usize = 3;

/// Escapes text for HTML / SVG content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A distinct colour for group `i` (golden-angle hues).
fn colour(i: usize) -> String {
    let hue = (i as f64 * 137.508) % 360.0;
    let light = if i.is_multiple_of(2) { 48 } else { 38 };
    format!("hsl({hue:.0},70%,{light}%)")
}

struct NodeView {
    name: String,
    labels: BTreeMap<String, String>,
    allocatable: Resources,
    /// (group index or None, requests) of bound, non-terminal pods.
    pods: Vec<(Option<usize>, Resources)>,
}

/// A domain tree: children by value, nodes at the leaves.
#[derive(Default)]
struct Domain {
    children: BTreeMap<String, Domain>,
    nodes: Vec<usize>,
}

impl Domain {
    fn size(&self) -> (u32, u32) {
        let (count, cw, ch) = if self.children.is_empty() {
            (self.nodes.len(), CELL, CELL)
        } else {
            let (mut w, mut h) = (0, 0);
            for c in self.children.values() {
                let (cw, ch) = c.size();
                w = w.max(cw);
                h = h.max(ch);
            }
            (self.children.len(), w, h)
        };
        let count = count.max(1) as u32;
        let cols = grid_cols(count, cw, ch);
        let rows = count.div_ceil(cols);
        (cols * (cw + GAP) - GAP + 2 * PAD, rows * (ch + GAP) - GAP + 2 * PAD + LABEL)
    }
}

/// Columns for `count` children of `w` x `h`: roughly square overall, a little wide.
fn grid_cols(count: u32, w: u32, h: u32) -> u32 {
    let ratio = (h.max(1) as f64 / w.max(1) as f64) * 1.6;
    ((count as f64 * ratio).sqrt().ceil() as u32).clamp(1, count)
}

struct Svg<'a> {
    nodes: &'a [NodeView],
    resources: &'a [String],
    /// Colour -> path data.
    paths: BTreeMap<String, String>,
    boxes: String,
    tooltips: String,
}

fn rect(path: &mut String, x: u32, y: u32, w: u32, h: u32) {
    let _ = write!(path, "M{x} {y}h{w}v{h}h-{w}z");
}

fn draw(d: &Domain, name: &str, depth: usize, x: u32, y: u32, svg: &mut Svg<'_>) {
    let (w, h) = d.size();
    let fill = ["#f4f6fa", "#e9edf5", "#dde3ef", "#d2d9e8"][depth.min(3)];
    let _ = write!(
        svg.boxes,
        r##"<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" stroke="#8a94a8"/>"##
    );
    if !name.is_empty() {
        let _ = write!(svg.boxes, r#"<text x="{}" y="{}">{}</text>"#, x + PAD, y + LABEL - 2, esc(name));
    }
    let (cx, cy) = (x + PAD, y + PAD + LABEL);
    if d.children.is_empty() {
        let cols = grid_cols(d.nodes.len().max(1) as u32, CELL, CELL);
        for (i, &n) in d.nodes.iter().enumerate() {
            let i = i as u32;
            let nx = cx + (i % cols) * (CELL + GAP);
            let ny = cy + (i / cols) * (CELL + GAP);
            draw_node(n, nx, ny, svg);
        }
        return;
    }
    let (mut cw, mut ch) = (0, 0);
    for c in d.children.values() {
        let (a, b) = c.size();
        cw = cw.max(a);
        ch = ch.max(b);
    }
    let cols = grid_cols(d.children.len() as u32, cw, ch);
    for (i, (value, child)) in d.children.iter().enumerate() {
        let i = i as u32;
        draw(child, value, depth + 1, cx + (i % cols) * (cw + GAP), cy + (i / cols) * (ch + GAP), svg);
    }
}

fn draw_node(index: usize, x: u32, y: u32, svg: &mut Svg<'_>) {
    let (nodes, resources) = (svg.nodes, svg.resources);
    let n = &nodes[index];
    let tooltip = svg.nodes.len() <= MAX_TOOLTIPS;
    rect(svg.paths.entry("#ffffff".into()).or_default(), x, y, CELL, CELL);
    let bars = resources.len().max(1) as u32;
    let bar_h = CELL / bars;
    for (r, name) in resources.iter().enumerate() {
        let alloc = n.allocatable.get(name);
        if alloc <= 0 {
            continue;
        }
        let by = y + r as u32 * bar_h;
        let mut used_px = 0u32;
        let mut per_group: BTreeMap<Option<usize>, i64> = BTreeMap::new();
        for (g, req) in &n.pods {
            let v = if name == placer_engine::PODS { 1 } else { req.get(name) };
            *per_group.entry(*g).or_default() += v;
        }
        for (g, v) in per_group {
            let px = ((v as f64 / alloc as f64) * CELL as f64).round() as u32;
            let px = px.min(CELL - used_px);
            if px == 0 {
                continue;
            }
            let c = g.map_or("#9aa3b5".to_string(), colour);
            rect(svg.paths.entry(c).or_default(), x + used_px, by, px, bar_h.max(1));
            used_px += px;
        }
    }
    if tooltip {
        let mut t = esc(&n.name);
        for name in resources {
            let alloc = n.allocatable.get(name);
            let used: i64 =
                n.pods.iter().map(|(_, r)| if name == placer_engine::PODS { 1 } else { r.get(name) }).sum();
            let _ = write!(t, "\n{name}: {used}/{alloc}");
        }
        let _ = write!(
            svg.tooltips,
            r#"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill-opacity="0"><title>{t}</title></rect>"#
        );
    }
}

/// The resources to draw: extended ones first (GPUs), then cpu, memory, pods.
fn drawn_resources(nodes: &[NodeView]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for n in nodes {
        for (name, _) in n.allocatable.iter_nonzero() {
            if !names.iter().any(|x| x == name) {
                names.push(name.to_string());
            }
        }
    }
    let rank = |n: &str| match n {
        "cpu" => 1,
        "memory" => 2,
        "pods" => 3,
        "ephemeral-storage" => 4,
        _ => 0,
    };
    names.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    names.truncate(MAX_RESOURCES);
    names
}

fn hierarchy_svg(
    report: &RunReport,
    group_index: &BTreeMap<(String, String), usize>,
) -> (String, Vec<String>) {
    let mut nodes: Vec<NodeView> = Vec::new();
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for o in &report.objects {
        if let Object::Node(n) = o {
            let allocatable = n
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| Resources::from_list(a).ok())
                .unwrap_or_default();
            by_name.insert(o.object_ref().name, nodes.len());
            nodes.push(NodeView {
                name: o.object_ref().name,
                labels: n.metadata.labels.clone().unwrap_or_default(),
                allocatable,
                pods: Vec::new(),
            });
        }
    }
    for o in &report.objects {
        let Object::Pod(p) = o else { continue };
        let Some(spec) = p.spec.as_ref() else { continue };
        let Some(&n) = spec.node_name.as_ref().and_then(|n| by_name.get(n)) else { continue };
        if matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed")) {
            continue;
        }
        let group = spec
            .scheduling_group
            .as_ref()
            .and_then(|g| g.pod_group_name.clone())
            .and_then(|g| group_index.get(&(o.object_ref().namespace, g)).copied());
        let req = pod_requests(spec).unwrap_or_default();
        nodes[n].pods.push((group, req));
    }
    // Levels: the configured ones, else the groups' own topology keys.
    let mut levels = report.topology_levels.clone();
    if levels.is_empty() {
        for row in &report.groups {
            for (k, _) in &row.domains {
                if !levels.contains(k) && k != "kubernetes.io/hostname" {
                    levels.push(k.clone());
                }
            }
        }
    }
    levels.retain(|l| l != "kubernetes.io/hostname");
    let mut root = Domain::default();
    for (i, n) in nodes.iter().enumerate() {
        let mut d = &mut root;
        for l in &levels {
            let v = n.labels.get(l).cloned().unwrap_or_else(|| format!("(no {l})"));
            d = d.children.entry(v).or_default();
        }
        d.nodes.push(i);
    }
    let resources = drawn_resources(&nodes);
    let mut svg = Svg {
        nodes: &nodes,
        resources: &resources,
        paths: BTreeMap::new(),
        boxes: String::new(),
        tooltips: String::new(),
    };
    let (w, h) = root.size();
    draw(&root, "cluster", 0, 0, 0, &mut svg);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="10">"#
    );
    out.push_str(&svg.boxes);
    for (c, d) in &svg.paths {
        let stroke = if c == "#ffffff" { r##" stroke="#b9c0cf" stroke-width="0.5""## } else { "" };
        let _ = write!(out, r#"<path fill="{c}"{stroke} d="{d}"/>"#);
    }
    out.push_str(&svg.tooltips);
    out.push_str("</svg>");
    let mut legend = vec![format!(
        "levels (outside in): {}",
        if levels.is_empty() { "none".into() } else { levels.join(" → ") }
    )];
    legend.push(format!("each node: one bar per resource, top to bottom: {}", resources.join(", ")));
    (out, legend)
}

fn timeline_svg(report: &RunReport) -> Option<String> {
    let t = &report.timeline;
    if t.len() < 2 || t.last().map(|s| s.time_ms) == t.first().map(|s| s.time_ms) {
        return None;
    }
    let (w, h, left, bottom) = (760.0, 220.0, 40.0, 24.0);
    let t0 = t[0].time_ms as f64;
    let span = (t[t.len() - 1].time_ms as f64 - t0).max(1.0);
    let x = |ms: u64| left + (ms as f64 - t0) / span * (w - left - 10.0);
    let y = |pct: f64| 10.0 + (1.0 - pct.clamp(0.0, 100.0) / 100.0) * (h - bottom - 10.0);
    let max_pending = t.iter().map(|s| s.groups_pending).max().unwrap_or(0).max(1) as f64;
    let mut out = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="10"><rect x="{left}" y="10" width="{}" height="{}" fill="#fafbfd" stroke="#8a94a8"/>"##,
        w - left - 10.0,
        h - bottom - 10.0
    );
    let mut names: Vec<String> = Vec::new();
    for s in t {
        for (n, _) in &s.resources {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let mut legend = String::new();
    for (i, name) in names.iter().enumerate() {
        let points: Vec<String> = t
            .iter()
            .map(|s| {
                let v = s.resources.iter().find(|(n, _)| n == name).map_or(0.0, |(_, v)| *v);
                format!("{:.1},{:.1}", x(s.time_ms), y(v))
            })
            .collect();
        let c = colour(i + 3);
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        let _ = write!(legend, r#"<span style="color:{c}">■</span> {} % &nbsp; "#, esc(name));
    }
    let points: Vec<String> = t
        .iter()
        .map(|s| format!("{:.1},{:.1}", x(s.time_ms), y(s.groups_pending as f64 / max_pending * 100.0)))
        .collect();
    let _ = write!(
        out,
        r##"<polyline fill="none" stroke="#d0312d" stroke-dasharray="4 2" stroke-width="1.5" points="{}"/>"##,
        points.join(" ")
    );
    let _ = write!(legend, r#"<span style="color:#d0312d">- -</span> pending PodGroups (max {max_pending})"#);
    let _ = write!(
        out,
        r#"<text x="2" y="{:.0}">100%</text><text x="2" y="{:.0}">0%</text>"#,
        y(100.0) + 4.0,
        y(0.0)
    );
    let _ = write!(
        out,
        r#"<text x="{left}" y="{}">{}</text><text x="{}" y="{}" text-anchor="end">{}</text></svg>"#,
        h - 6.0,
        esc(&crate::output::format_ms(t[0].time_ms)),
        w - 10.0,
        h - 6.0,
        esc(&crate::output::format_ms(t[t.len() - 1].time_ms))
    );
    Some(format!("{out}<p class=legend>{legend}</p>"))
}

/// The report of one run as an HTML document.
pub fn render(report: &RunReport) -> String {
    let mut group_index = BTreeMap::new();
    for (i, g) in report.groups.iter().enumerate() {
        group_index.insert((g.namespace.clone(), g.name.clone()), i);
    }
    let (svg, legend) = hierarchy_svg(report, &group_index);
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Placer report: {name}</title><style>\
body{{font-family:sans-serif;margin:16px;color:#1c2333}}h1{{font-size:20px}}h2{{font-size:16px;margin-top:24px}}\
table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #c9cfdb;padding:2px 6px;text-align:left}}\
.sw{{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}}.legend{{font-size:12px;color:#4a5468}}\
.unsched li{{margin:2px 0}}.scroll{{overflow:auto;max-height:80vh;border:1px solid #c9cfdb}}</style></head><body>\
<h1>Placer report: {name}</h1><p class=legend>{file} · virtual time {time} · {cluster}</p>",
        name = esc(&report.name),
        file = esc(&report.file.display().to_string()),
        time = esc(&crate::output::format_ms(report.virtual_time_ms)),
        cluster = esc(&report.cluster.to_string()),
    );
    let unschedulable: Vec<_> = report.groups.iter().filter(|g| g.reason.is_some()).collect();
    if !unschedulable.is_empty() {
        html.push_str("<h2>PodGroups not fully bound</h2><ul class=unsched>");
        for g in unschedulable {
            let i = group_index[&(g.namespace.clone(), g.name.clone())];
            let _ = write!(
                html,
                "<li><span class=sw style=\"background:{}\"></span><b>{}/{}</b> ({} {}/{}): {}</li>",
                colour(i),
                esc(&g.namespace),
                esc(&g.name),
                g.state,
                g.bound,
                g.total,
                esc(g.reason.as_deref().unwrap_or(""))
            );
        }
        html.push_str("</ul>");
    }
    html.push_str("<h2>Topology</h2>");
    for l in legend {
        let _ = write!(html, "<p class=legend>{}</p>", esc(&l));
    }
    let _ = write!(html, "<div class=scroll id=hierarchy>{svg}</div>");
    if let Some(t) = timeline_svg(report) {
        let _ = write!(html, "<h2>Timeline</h2>{t}");
    }
    html.push_str("<h2>PodGroups</h2><table><tr><th></th><th>PodGroup</th><th>Policy</th><th>State</th><th>Bound</th><th>Domains</th><th>Condition</th><th>Why</th></tr>");
    for (i, g) in report.groups.iter().enumerate() {
        let domains: Vec<String> = g
            .domains
            .iter()
            .map(|(k, v)| format!("{}: {}", k.rsplit('/').next().unwrap_or(k), v.join(", ")))
            .collect();
        let _ = write!(
            html,
            "<tr><td><span class=sw style=\"background:{}\"></span></td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            colour(i),
            esc(&g.namespace),
            esc(&g.name),
            esc(&g.policy),
            if g.state == GroupState::Scheduled { "Scheduled".to_string() } else { format!("<b>{}</b>", g.state) },
            g.bound,
            g.total,
            esc(&domains.join("; ")),
            esc(g.condition.as_deref().unwrap_or("-")),
            esc(g.reason.as_deref().unwrap_or("")),
        );
    }
    html.push_str("</table></body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn grids_are_roughly_square() {
        assert_eq!(grid_cols(1, 10, 10), 1);
        assert!(grid_cols(100, 10, 10) >= 10);
        assert!(grid_cols(100, 10, 10) <= 14);
    }
}
