//! `placer explain FILE [NAMESPACE/PODGROUP]`: runs a scenario and says, for each PodGroup
//! (or the one named), what was decided and why: the group's state and condition, how
//! many members are missing, every candidate domain of its topology level with the free
//! capacity of the resources it requests and how many of its pods fit there, what the
//! closest domain lacks, and the pod-level filter rejections counted per reason. Every
//! figure comes from the engine ([`placer_engine::Engine::explain_group`]) over the final
//! cluster state.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use placer_cluster::ClusterStore;
use placer_engine::{GroupExplanation, GroupKey, PlacementScores, ScoredPlacement, TasAlgorithm, TasRanking};
use placer_sim::explain::{explain, format_amount, format_resources, preempted_pods};
use placer_sim::{GroupRow, RunOptions, RunReport};

use crate::input::{resolve_or_report, InputArgs, SetArgs};
use crate::output::{write_load_error, DIM, FAIL, RESET, WARN};
use crate::Status;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario file (`-` for stdin; format: docs/scenario-format.md).
    #[arg(value_name = "FILE", required_unless_present = "snapshot")]
    file: Option<PathBuf>,
    /// Only this PodGroup (default: every PodGroup). `job:NAMESPACE/JOB` names the
    /// PodGroup the Job controller made for a Job.
    #[arg(value_name = "NAMESPACE/PODGROUP")]
    group: Option<String>,
    /// A cluster dump (`kubectl get ... -A -o yaml`) as the cluster, under FILE or alone.
    #[arg(long, value_name = "DUMP")]
    snapshot: Option<PathBuf>,
    /// Show every candidate domain (default: the first `--top`).
    #[arg(long)]
    all: bool,
    /// How many candidate domains to show per group.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    output: Format,
    #[command(flatten)]
    set: SetArgs,
}

fn key_text(k: &GroupKey) -> String {
    format!("{}/{}", k.namespace, k.name)
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    if let Some(g) = &args.group {
        let rest = g.strip_prefix(placer_sim::expect::JOB_KEY_PREFIX).unwrap_or(g);
        if !matches!(rest.split_once('/'), Some((ns, name)) if !ns.is_empty() && !name.is_empty()) {
            anyhow::bail!("{g:?}: expected NAMESPACE/PODGROUP or job:NAMESPACE/JOB");
        }
    }
    let input = InputArgs { files: args.file.iter().cloned().collect(), snapshot: args.snapshot.clone() };
    let Some(inputs) = resolve_or_report(&input, &args.set) else { return Ok(Status::BadInput) };
    let mut status = Status::Pass;
    let mut json_out = Vec::new();
    let mut out = anstream::stdout();
    for file in inputs.entries() {
        let scenario = match inputs.load(&file) {
            Ok(s) => s,
            Err(e) => {
                write_load_error(&mut anstream::stderr(), &e)?;
                status = status.max(Status::BadInput);
                continue;
            }
        };
        let config = placer_sim::scheduler_config(&scenario).map_err(anyhow::Error::msg)?;
        let report = placer_sim::run(&scenario, &RunOptions::default()).map_err(anyhow::Error::new)?;
        let only = match &args.group {
            Some(g) => match resolve_group(&report, g) {
                Ok(k) => Some(k),
                Err(message) => {
                    writeln!(anstream::stderr(), "{FAIL}error:{RESET} {}: {message}", file.display())?;
                    status = status.max(Status::Fail);
                    continue;
                }
            },
            None => None,
        };
        let explanations = explain(&config, &report.objects, report.virtual_time_ms, only.as_ref());
        if let Some(k) = &only {
            if explanations.is_empty() {
                writeln!(
                    anstream::stderr(),
                    "{FAIL}error:{RESET} {}: PodGroup {} not found (no PodGroup object, no pod names it)",
                    file.display(),
                    key_text(k)
                )?;
                status = status.max(Status::Fail);
                continue;
            }
        }
        match args.output {
            Format::Json => json_out.push(serde_json::json!({
                "scenario": report.name,
                "file": file.display().to_string(),
                "podGroups": explanations.iter().map(|e| to_json(e, row_of(&report, &e.group))).collect::<Vec<_>>(),
                "preemptedPods": preempted_pods(&report.events, &report.objects).iter().map(|p| serde_json::json!({
                    "pod": p.pod, "preemptedBy": p.by, "event": p.note, "virtualTimeMs": p.at_ms, "existsAgain": p.exists,
                })).collect::<Vec<_>>(),
            })),
            Format::Text => {
                writeln!(out, "{} {DIM}{}{RESET}", report.name, file.display())?;
                for e in &explanations {
                    write_text(&mut out, e, row_of(&report, &e.group), &report, if args.all { usize::MAX } else { args.top })?;
                }
                if only.is_none() {
                    let preempted = preempted_pods(&report.events, &report.objects);
                    if !preempted.is_empty() {
                        writeln!(out)?;
                        writeln!(out, "Preempted pods ({}):", preempted.len())?;
                        crate::output::write_preempted_pods(&mut out, &preempted)?;
                    }
                }
            }
        }
    }
    if args.output == Format::Json {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &json_out).context("writing JSON")?;
        writeln!(stdout)?;
    }
    Ok(status)
}

/// `ns/name` or `job:ns/name[/template]` as a group key, against the run's final objects.
fn resolve_group(report: &RunReport, text: &str) -> Result<GroupKey, String> {
    let mut store = placer_cluster::embedded::EmbeddedCluster::new();
    if text.starts_with(placer_sim::expect::JOB_KEY_PREFIX) {
        for o in &report.objects {
            if matches!(o.kind(), placer_cluster::Kind::Job | placer_cluster::Kind::PodGroup) {
                store.create(o.clone()).map_err(|e| e.to_string())?;
            }
        }
    }
    placer_sim::expect::resolve_group_key(&store, text).map(|(ns, name)| GroupKey::new(ns, name))
}

fn row_of<'a>(report: &'a RunReport, key: &GroupKey) -> Option<&'a GroupRow> {
    report.groups.iter().find(|r| *r.namespace == *key.namespace && *r.name == *key.name)
}

/// The `PodGroupScheduled` condition's message of a group, from the final objects.
fn condition_message(report: &RunReport, key: &GroupKey) -> Option<String> {
    report.objects.iter().find_map(|o| {
        let r = o.object_ref();
        if r.kind != placer_cluster::Kind::PodGroup || *r.namespace != *key.namespace || *r.name != *key.name
        {
            return None;
        }
        let json = o.to_json();
        json.pointer("/status/conditions")?.as_array()?.iter().find_map(|c| {
            (c.get("type")?.as_str()? == placer_engine::CONDITION_POD_GROUP_SCHEDULED)
                .then(|| c.get("message").and_then(|m| m.as_str()).unwrap_or("").to_string())
        })
    })
}

fn write_text(
    out: &mut dyn Write,
    e: &GroupExplanation,
    row: Option<&GroupRow>,
    report: &RunReport,
    top: usize,
) -> std::io::Result<()> {
    let state = row.map_or("Pending".to_string(), |r| r.state.to_string());
    let policy = if e.gang { format!("gang, minCount {}", e.min_count) } else { "basic".to_string() };
    writeln!(out)?;
    writeln!(
        out,
        "PodGroup {}: {state}, {}/{} pods bound ({policy})",
        key_text(&e.group),
        e.scheduled,
        e.members
    )?;
    if !e.exists {
        writeln!(
            out,
            "  {WARN}no PodGroup object{RESET}: {} pod(s) name it; they wait for it to be created",
            e.members
        )?;
        return Ok(());
    }
    if let Some(row) = row {
        if let Some(c) = &row.condition {
            let message = condition_message(report, &e.group).unwrap_or_default();
            writeln!(
                out,
                "  decision: {c}{}",
                if message.is_empty() { String::new() } else { format!(": {message}") }
            )?;
        }
        if let Some(reason) = &row.reason {
            writeln!(out, "  why: {reason}")?;
        }
    }
    if e.gang && e.missing > 0 {
        let plural = if e.missing == 1 { "" } else { "s" };
        writeln!(
            out,
            "  {WARN}missing{RESET}: {} member{plural}: minCount is {} and {} pod(s) exist",
            e.missing, e.min_count, e.members
        )?;
    }
    if let Some(pod) = &e.pod {
        writeln!(
            out,
            "  each pod requests {} (computed for {}/{})",
            format_resources(&e.requests),
            pod.namespace,
            pod.name
        )?;
    }
    if let Some(level) = &e.level {
        let kind = match e.level_mode {
            Some("implied") => {
                "implied: no topology request, Kueue's default spreads the pods over the lowest level"
            }
            Some("unconstrained") => "unconstrained: spread over the lowest level",
            Some(other) => other,
            None if e.level_required => "required",
            None => "preferred",
        };
        writeln!(
            out,
            "  level {level} ({kind}): {} domains; {} pods still to place{}",
            e.domains.len(),
            e.needed,
            if e.used_domains.is_empty() {
                String::new()
            } else {
                format!("; bound pods use {}", e.used_domains.join(", "))
            }
        )?;
        let resources: Vec<&str> = e.requests.iter().map(|(n, _)| n.as_str()).collect();
        let mut table = comfy_table::Table::new();
        table.load_style(comfy_table::presets::NOTHING);
        let mut header = vec!["domain".to_string(), "nodes".to_string()];
        header.extend(resources.iter().map(|r| format!("free {r}")));
        header.extend(["pods fit".to_string(), format!("short for {}", e.needed)]);
        table.set_header(header);
        for d in e.domains.iter().take(top) {
            let mut cells = vec![
                if e.used_domains.contains(&d.value) { format!("{} *", d.value) } else { d.value.clone() },
                d.nodes.to_string(),
            ];
            cells.extend(d.free.iter().map(|(n, v)| format_amount(n, *v)));
            cells.push(d.fits.to_string());
            cells.push(if d.shortfall.is_empty() {
                if d.fits >= e.needed {
                    "-".into()
                } else {
                    format!("{} pods (filters)", e.needed - d.fits)
                }
            } else {
                format_resources(&d.shortfall)
            });
            table.add_row(cells);
        }
        for line in table.to_string().lines() {
            writeln!(out, "   {}", line.trim_end())?;
        }
        if e.domains.len() > top {
            writeln!(out, "   {DIM}({} more; --all shows every one){RESET}", e.domains.len() - top)?;
        }
        if !e.used_domains.is_empty() {
            writeln!(out, "   {DIM}* holds bound pods of the group{RESET}")?;
        }
    }
    if let Some(p) = &e.placements {
        write_placement_scores(out, p, e.placements_as_decided, top)?;
    }
    match &e.ranking {
        Some(Ok(r)) => write_ranking(out, r, e.placements_as_decided, top)?,
        Some(Err(why)) => writeln!(out, "  {WARN}topology request refused{RESET}: {why}")?,
        None => {}
    }
    if let Some(f) = &e.filters {
        write!(out, "  filters: {}/{} nodes pass for this pod", f.feasible, f.nodes)?;
        if f.reasons.is_empty() {
            writeln!(out)?;
        } else {
            let parts: Vec<String> = f.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
            writeln!(out, "; rejected: {}", parts.join(", "))?;
        }
    }
    Ok(())
}

/// The placement search's candidates with each PlacementScore plugin's score: `raw ->
/// normalized x weight` per plugin, the total, the winner marked `<`.
fn write_placement_scores(
    out: &mut dyn Write,
    p: &PlacementScores,
    as_decided: bool,
    top: usize,
) -> std::io::Result<()> {
    let when = if as_decided {
        "the cycle that placed it, its own pods taken out of today's cluster"
    } else {
        "the next cycle, for the pods still to place"
    };
    let plugins: Vec<String> = p.plugins.iter().map(|(n, w)| format!("{n} (weight {w})")).collect();
    writeln!(
        out,
        "  placements ({when}): {} candidates; score plugins: {}",
        p.candidates.len(),
        if plugins.is_empty() { "none".to_string() } else { plugins.join(", ") }
    )?;
    if let Some(note) = &p.note {
        writeln!(out, "   {DIM}{note}{RESET}")?;
    }
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::NOTHING);
    let mut header = vec!["placement".to_string(), "nodes".to_string(), "pods".to_string()];
    header.extend(p.plugins.iter().map(|(n, _)| n.clone()));
    header.push("total".to_string());
    table.set_header(header);
    // The winner first, then the scored ones by total, then the rest in evaluation order.
    let mut rows: Vec<&ScoredPlacement> = p.candidates.iter().collect();
    rows.sort_by_key(|c| (!c.winner, std::cmp::Reverse(c.total)));
    for c in rows.iter().take(top) {
        let mut cells = vec![
            if c.winner { format!("{} <", c.name) } else { c.name.clone() },
            c.nodes.to_string(),
            c.pods.map_or_else(|| "-".to_string(), |n| n.to_string()),
        ];
        if c.raw.is_empty() {
            let why = if !c.evaluated {
                "not evaluated (enough feasible placements found)".to_string()
            } else {
                format!("infeasible: {}", c.reason)
            };
            cells.push(why);
        } else {
            for ((raw, norm), (_, weight)) in c.raw.iter().zip(&c.normalized).zip(&p.plugins) {
                cells.push(if raw == norm {
                    format!("{norm} x{weight}")
                } else {
                    format!("{raw} -> {norm} x{weight}")
                });
            }
            cells.push(c.total.map_or_else(String::new, |t| t.to_string()));
        }
        table.add_row(cells);
    }
    for line in table.to_string().lines() {
        writeln!(out, "   {}", line.trim_end())?;
    }
    if p.candidates.len() > top {
        writeln!(out, "   {DIM}({} more; --all shows every one){RESET}", p.candidates.len() - top)?;
    }
    match (&p.decided_by, p.candidates.iter().find(|c| c.winner)) {
        (Some(why), Some(w)) => {
            writeln!(out, "   won: {} ({why}){DIM}; score cells: raw -> normalized x weight{RESET}", w.name)?
        }
        _ => writeln!(out, "   won: none (no placement is feasible)")?,
    }
    Ok(())
}

/// The sort of phase 2a, in words, for `r`'s algorithm.
fn ranking_rule(r: &TasRanking) -> String {
    let slices = r.slice_size > 1;
    let unit = if slices { "slices" } else { "pods" };
    let need = if slices { r.count / r.slice_size } else { r.count };
    let then = if slices { "then fewest pods, then name" } else { "then name" };
    match r.chosen {
        TasAlgorithm::LeastFreeCapacity => format!(
            "LeastFreeCapacity: fewest {unit} that fit first, {then}; the first domain holding {need} {unit} wins"
        ),
        TasAlgorithm::BalancedPlacement => format!(
            "BalancedPlacement (preferred requests): the fewest domains holding {need} {unit}, spread evenly; \
             else BestFit's order: most {unit} that fit first, {then}"
        ),
        TasAlgorithm::BestFit => format!(
            "BestFit: most {unit} that fit first, {then}; the tightest domain (fewest {unit}) still holding \
             {need} {unit} wins"
        ),
    }
}

/// The hierarchical algorithm's order of the searched level's domains.
fn write_ranking(out: &mut dyn Write, r: &TasRanking, as_decided: bool, top: usize) -> std::io::Result<()> {
    let when = if as_decided {
        "the cycle that placed it, its own pods taken out of today's cluster"
    } else {
        "the next cycle, for the pods still to place"
    };
    let ran = match r.ran {
        Some(a) if a != r.chosen => format!("; ran {} (fallback)", a.name()),
        _ => String::new(),
    };
    writeln!(out, "  algorithm ({when}): {}{ran}", r.chosen.name())?;
    writeln!(out, "   order: {}", ranking_rule(r))?;
    let slices = r.slice_size > 1;
    let affinity = r.domains.iter().any(|d| d.affinity != 0);
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::NOTHING);
    let mut header = vec!["rank", "domain"];
    if affinity {
        header.push("affinity");
    }
    if slices {
        header.push("slices fit");
    }
    header.extend(["pods fit", "assigned"]);
    table.set_header(header);
    for (i, d) in r.domains.iter().enumerate().take(top) {
        let mut cells = vec![(i + 1).to_string(), d.path.join("/")];
        if affinity {
            cells.push(d.affinity.to_string());
        }
        if slices {
            cells.push(d.slices.to_string());
        }
        cells.push(d.pods.to_string());
        cells.push(if d.assigned > 0 { format!("{} <", d.assigned) } else { "-".to_string() });
        table.add_row(cells);
    }
    for line in table.to_string().lines() {
        writeln!(out, "   {}", line.trim_end())?;
    }
    if r.domains.len() > top {
        writeln!(out, "   {DIM}({} more; --all shows every one){RESET}", r.domains.len() - top)?;
    }
    if !r.failure.is_empty() {
        writeln!(out, "   no assignment: {}", r.failure)?;
    } else if let Some(level) = r.fit_level {
        let used = r.domains.iter().filter(|d| d.assigned > 0).count();
        if level < r.requested_level {
            let name = r.levels.get(level).map_or("?", String::as_str);
            writeln!(
                out,
                "   no single domain of this level holds them: placed within one {name} (the request climbs)"
            )?;
        } else if used > 1 && r.chosen != TasAlgorithm::BalancedPlacement {
            writeln!(out, "   no single domain holds them all: domains are taken in this order until every pod is placed")?;
        }
    }
    Ok(())
}

fn ranking_json(r: &TasRanking, as_decided: bool) -> serde_json::Value {
    serde_json::json!({
        "computedFor": if as_decided { "decidedCycle" } else { "nextCycle" },
        "algorithm": r.chosen.name(),
        "ran": r.ran.map(|a| a.name()),
        "order": ranking_rule(r),
        "searchedLevel": r.levels.get(r.requested_level),
        "fitLevelName": r.fit_level.and_then(|l| r.levels.get(l)),
        "required": r.required,
        "count": r.count,
        "sliceSize": r.slice_size,
        "fitLevel": r.fit_level,
        "failure": (!r.failure.is_empty()).then_some(&r.failure),
        "domains": r.domains.iter().enumerate().map(|(i, d)| serde_json::json!({
            "rank": i + 1,
            "path": d.path,
            "podsFit": d.pods,
            "slicesFit": d.slices,
            "leaderFits": d.leader > 0,
            "affinity": d.affinity,
            "assigned": d.assigned,
        })).collect::<Vec<_>>(),
    })
}

fn placement_scores_json(p: &PlacementScores, as_decided: bool) -> serde_json::Value {
    serde_json::json!({
        "computedFor": if as_decided { "decidedCycle" } else { "nextCycle" },
        "plugins": p.plugins.iter().map(|(n, w)| serde_json::json!({"name": n, "weight": w})).collect::<Vec<_>>(),
        "placementsToFind": (p.to_find != usize::MAX).then_some(p.to_find),
        "decidedBy": p.decided_by,
        "note": p.note,
        "candidates": p.candidates.iter().map(|c| serde_json::json!({
            "name": c.name,
            "nodes": c.nodes,
            "evaluated": c.evaluated,
            "feasible": c.feasible,
            "pods": c.pods,
            "reason": (!c.reason.is_empty()).then_some(&c.reason),
            "scores": (!c.raw.is_empty()).then(|| p.plugins.iter().zip(c.raw.iter().zip(&c.normalized)).map(|((n, w), (raw, norm))| serde_json::json!({
                "plugin": n, "raw": raw, "normalized": norm, "weight": w, "weighted": norm.saturating_mul(*w),
            })).collect::<Vec<_>>()),
            "total": c.total,
            "winner": c.winner,
        })).collect::<Vec<_>>(),
    })
}

fn pairs(list: &[(String, i64)]) -> serde_json::Value {
    serde_json::Value::Object(list.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect())
}

fn to_json(e: &GroupExplanation, row: Option<&GroupRow>) -> serde_json::Value {
    serde_json::json!({
        "podGroup": key_text(&e.group),
        "exists": e.exists,
        "state": row.map(|r| r.state.to_string()),
        "condition": row.and_then(|r| r.condition.clone()),
        "reason": row.and_then(|r| r.reason.clone()),
        "gang": e.gang,
        "minCount": e.min_count,
        "members": e.members,
        "scheduled": e.scheduled,
        "missing": e.missing,
        "needed": e.needed,
        "pod": e.pod.as_ref().map(|p| format!("{}/{}", p.namespace, p.name)),
        "requests": pairs(&e.requests),
        "level": e.level,
        "levelRequired": e.level_required,
        "usedDomains": e.used_domains,
        "domains": e.domains.iter().map(|d| serde_json::json!({
            "value": d.value,
            "nodes": d.nodes,
            "free": pairs(&d.free),
            "podsFit": d.fits,
            "shortfall": pairs(&d.shortfall),
        })).collect::<Vec<_>>(),
        "placements": e.placements.as_ref().map(|p| placement_scores_json(p, e.placements_as_decided)),
        "levelMode": e.level_mode,
        "ranking": e.ranking.as_ref().map(|r| match r {
            Ok(r) => ranking_json(r, e.placements_as_decided),
            Err(why) => serde_json::json!({"refused": why}),
        }),
        "filters": e.filters.as_ref().map(|f| serde_json::json!({
            "nodes": f.nodes,
            "feasible": f.feasible,
            "reasons": f.reasons.iter().map(|(r, n)| serde_json::json!({"reason": r, "nodes": n})).collect::<Vec<_>>(),
        })),
    })
}
