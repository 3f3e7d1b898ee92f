//! `placer compare FILE --set PATH=VALUE...`: runs a scenario as written and again with
//! the overrides, and prints per PodGroup what changed (state, bound pods, domains used at
//! each level, pods and nodes per domain) and the two cluster summaries side by side.
//! Exit code 0 whether or not anything changed (2 on bad input).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use placer_sim::{RunOptions, RunReport};

use crate::input::{resolve_or_report, InputArgs, SetArgs};
use crate::output::{write_load_error, DIM, RESET, WARN};
use crate::Status;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario file (`-` for stdin).
    #[arg(value_name = "FILE", required_unless_present = "snapshot")]
    file: Option<PathBuf>,
    /// A cluster dump (`kubectl get ... -A -o yaml`) as the cluster, under FILE or alone.
    #[arg(long, value_name = "DUMP")]
    snapshot: Option<PathBuf>,
    #[command(flatten)]
    set: SetArgs,
    /// Print every PodGroup, not only those that changed.
    #[arg(long)]
    all: bool,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
}

/// Where one group's pods ended up: level -> domain -> (pods, distinct nodes).
type Placement = BTreeMap<String, BTreeMap<String, (usize, usize)>>;

/// For every PodGroup of a run: its bound pods per domain at each of `levels`.
fn placements(report: &RunReport, levels: &[String]) -> BTreeMap<(String, String), Placement> {
    let mut labels: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut nodes_of: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for o in &report.objects {
        match o {
            placer_cluster::Object::Node(n) => {
                labels.insert(o.object_ref().name, n.metadata.labels.clone().unwrap_or_default());
            }
            placer_cluster::Object::Pod(p) => {
                let spec = p.spec.as_ref();
                let group =
                    spec.and_then(|s| s.scheduling_group.as_ref()).and_then(|g| g.pod_group_name.clone());
                let node = spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
                if let (Some(g), Some(n)) = (group, node) {
                    nodes_of.entry((o.object_ref().namespace, g)).or_default().push(n);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for (key, nodes) in nodes_of {
        let mut p = Placement::new();
        for level in levels {
            let mut per: BTreeMap<String, (usize, std::collections::BTreeSet<&str>)> = BTreeMap::new();
            for n in &nodes {
                let value = labels.get(n).and_then(|l| l.get(level)).cloned().unwrap_or_else(|| "-".into());
                let e = per.entry(value).or_default();
                e.0 += 1;
                e.1.insert(n);
            }
            p.insert(level.clone(), per.into_iter().map(|(v, (pods, ns))| (v, (pods, ns.len()))).collect());
        }
        out.insert(key, p);
    }
    out
}

/// Levels to compare: the configured ones of either run, else every label key that is a
/// group's own topology key, else the hostname.
fn levels(a: &RunReport, b: &RunReport) -> Vec<String> {
    let mut levels: Vec<String> = a.topology_levels.clone();
    for l in &b.topology_levels {
        if !levels.contains(l) {
            levels.push(l.clone());
        }
    }
    for row in a.groups.iter().chain(&b.groups) {
        for (k, _) in &row.domains {
            if !levels.contains(k) {
                levels.push(k.clone());
            }
        }
    }
    if !levels.iter().any(|l| l == "kubernetes.io/hostname") {
        levels.push("kubernetes.io/hostname".into());
    }
    levels
}

fn short(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

fn describe(p: Option<&BTreeMap<String, (usize, usize)>>) -> String {
    match p {
        None => "-".into(),
        Some(m) if m.is_empty() => "-".into(),
        Some(m) => m
            .iter()
            .map(|(v, (pods, nodes))| {
                let (p, n) = (if *pods == 1 { "" } else { "s" }, if *nodes == 1 { "" } else { "s" });
                format!("{v}: {pods} pod{p} on {nodes} node{n}")
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    if args.set.sets.is_empty() {
        anyhow::bail!("compare needs at least one --set PATH=VALUE (what to change)");
    }
    let input = InputArgs { files: args.file.iter().cloned().collect(), snapshot: args.snapshot.clone() };
    let Some(inputs) = resolve_or_report(&input, &args.set) else { return Ok(Status::BadInput) };
    let mut out = anstream::stdout();
    let mut json = Vec::new();
    for file in inputs.entries() {
        let (base, changed) = match (inputs.load_plain(&file), inputs.load(&file)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                write_load_error(&mut anstream::stderr(), &e)?;
                return Ok(Status::BadInput);
            }
        };
        let a = placer_sim::run(&base, &RunOptions::default()).map_err(anyhow::Error::new)?;
        let b = placer_sim::run(&changed, &RunOptions::default()).map_err(anyhow::Error::new)?;
        let levels = levels(&a, &b);
        let (pa, pb) = (placements(&a, &levels), placements(&b, &levels));
        let mut keys: Vec<(String, String)> =
            a.groups.iter().chain(&b.groups).map(|r| (r.namespace.clone(), r.name.clone())).collect();
        keys.sort();
        keys.dedup();
        let settings = args.set.sets.join(" ");
        if !args.json {
            writeln!(out, "{} {DIM}{}{RESET}", a.name, file.display())?;
            writeln!(out, "  A: as written    B: --set {settings}")?;
        }
        let mut changed_groups = Vec::new();
        let mut unchanged = 0;
        for key in &keys {
            let row = |r: &RunReport| {
                r.groups.iter().find(|g| (&g.namespace, &g.name) == (&key.0, &key.1)).cloned()
            };
            let (ra, rb) = (row(&a), row(&b));
            let state = |r: &Option<placer_sim::GroupRow>| {
                r.as_ref().map_or("absent".to_string(), |r| format!("{} {}/{}", r.state, r.bound, r.total))
            };
            let mut diffs: Vec<(String, String, String)> = Vec::new();
            let (sa, sb) = (state(&ra), state(&rb));
            if sa != sb {
                diffs.push(("state".into(), sa.clone(), sb.clone()));
            }
            for level in &levels {
                let da = describe(pa.get(key).and_then(|p| p.get(level)));
                let db = describe(pb.get(key).and_then(|p| p.get(level)));
                if da != db {
                    diffs.push((short(level).to_string(), da, db));
                }
            }
            if diffs.is_empty() {
                unchanged += 1;
                if !args.all {
                    continue;
                }
            }
            if args.json {
                changed_groups.push(serde_json::json!({
                    "podGroup": format!("{}/{}", key.0, key.1),
                    "a": sa, "b": sb,
                    "changes": diffs.iter().map(|(what, x, y)| serde_json::json!({"what": what, "a": x, "b": y})).collect::<Vec<_>>(),
                }));
                continue;
            }
            if diffs.is_empty() {
                writeln!(out, "  {}/{}: unchanged ({sa})", key.0, key.1)?;
                continue;
            }
            writeln!(out, "  {WARN}{}/{}{RESET}: changed", key.0, key.1)?;
            for (what, x, y) in &diffs {
                writeln!(out, "    {what:<10} A: {x}")?;
                writeln!(out, "    {:<10} B: {y}", "")?;
            }
        }
        if args.json {
            json.push(serde_json::json!({
                "scenario": a.name,
                "file": file.display().to_string(),
                "set": args.set.sets,
                "changed": changed_groups,
                "unchanged": unchanged,
                "cluster": {"a": a.cluster.to_string(), "b": b.cluster.to_string()},
            }));
            continue;
        }
        if !args.all && unchanged > 0 {
            writeln!(out, "  {DIM}{unchanged} PodGroup(s) unchanged{RESET}")?;
        }
        let mut table = comfy_table::Table::new();
        table.load_style(comfy_table::presets::NOTHING);
        table.set_header(["cluster", "A (as written)", "B (with --set)"]);
        table.add_row(["nodes".to_string(), a.cluster.nodes.to_string(), b.cluster.nodes.to_string()]);
        table.add_row([
            "pods bound".to_string(),
            format!("{}/{}", a.cluster.pods_bound, a.cluster.pods_total),
            format!("{}/{}", b.cluster.pods_bound, b.cluster.pods_total),
        ]);
        let count =
            |r: &RunReport, s: placer_sim::GroupState| r.groups.iter().filter(|g| g.state == s).count();
        for s in [
            placer_sim::GroupState::Scheduled,
            placer_sim::GroupState::Partial,
            placer_sim::GroupState::Unschedulable,
            placer_sim::GroupState::Pending,
        ] {
            table.add_row([format!("PodGroups {s}"), count(&a, s).to_string(), count(&b, s).to_string()]);
        }
        for ra in &a.cluster.resources {
            let pb = b.cluster.resources.iter().find(|r| r.name == ra.name).map_or(0.0, |r| r.percent());
            table.add_row([ra.name.clone(), format!("{:.1}%", ra.percent()), format!("{pb:.1}%")]);
        }
        for line in table.to_string().lines() {
            writeln!(out, "  {}", line.trim_end())?;
        }
    }
    if args.json {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &json).context("writing JSON")?;
        writeln!(stdout)?;
    }
    Ok(Status::Pass)
}
