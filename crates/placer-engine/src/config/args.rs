//! Plugin arguments as KubeSchedulerConfiguration's `pluginConfig` writes them
//! (`kubescheduler.config.k8s.io/v1`), with kube-scheduler's defaulting
//! (`pkg/scheduler/apis/config/v1/defaults.go`) and validation messages
//! (`pkg/scheduler/apis/config/validation/validation_pluginargs.go`).
//!
//! Both homes read `pluginConfig` through [`apply_plugin_config`] (a scenario's
//! `scheduler.profile.pluginConfig`, `placer serve`'s `pluginConfig`), so a profile means
//! the same everywhere. Which plugins take arguments is the registry's business
//! (`crate::plugins::registry`, `Registry::args`): a plugin registers its [`PluginArgs`]
//! type next to its factories, and [`read`] / [`show`] do the rest the same way for
//! every plugin (parse strictly, default, check `apiVersion` / `kind`, validate, apply;
//! show the effective arguments with their type meta).
//!
//! One file per plugin family: [`resources`] (NodeResourcesFit, BalancedAllocation),
//! [`affinity`] (NodeAffinity, InterPodAffinity), [`spread`] (PodTopologySpread),
//! [`preemption`] (DefaultPreemption), [`volume`] (VolumeBinding).

mod affinity;
mod preemption;
mod resources;
mod spread;
mod volume;

#[cfg(test)]
mod tests;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::SchedulerConfig;

pub use affinity::{InterPodAffinityArgs, InterPodAffinityConfig, NodeAffinityArgs};
pub use preemption::{DefaultPreemptionArgs, PreemptionCandidates};
pub use resources::{NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs};
pub use spread::{PodTopologySpreadArgs, SpreadDefaulting};
pub use volume::{VolumeBindingArgs, VolumeBindingConfig};

/// The `apiVersion` of plugin arguments.
pub const ARGS_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// kube's `MaxCustomPriorityScore`.
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

/// One plugin's `pluginConfig` arguments: the serde shape of `<Plugin>Args` (strict:
/// unknown fields are errors), with kube-scheduler's defaulting and validation and how the
/// engine keeps them.
pub trait PluginArgs: Serialize + DeserializeOwned {
    /// The `kind` of the arguments (`NodeResourcesFitArgs`).
    const KIND: &'static str;
    /// The written `apiVersion` and `kind`.
    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>);
    /// kube-scheduler's `SetDefaults_<Kind>` (some defaults follow feature gates).
    fn defaulted(self, _config: &SchedulerConfig) -> Self {
        self
    }
    /// kube-scheduler's `Validate<Kind>` on defaulted arguments at field path `path`.
    fn validate(&self, config: &SchedulerConfig, path: &str, errs: &mut Vec<String>);
    /// Stores valid, defaulted arguments in the configuration.
    fn apply(self, config: &mut SchedulerConfig);
    /// The arguments that give `config`'s behaviour (what `placer config` shows).
    fn effective(config: &SchedulerConfig) -> Self;
}

/// Reads plugin arguments of type `T` (at field path `path`, e.g.
/// `pluginConfig[1].args`) into `config`. Errors are field errors, each starting with its
/// path; on error `config` is unchanged.
pub fn read<T: PluginArgs>(
    config: &mut SchedulerConfig,
    args: &Value,
    path: &str,
) -> Result<(), Vec<String>> {
    let mut parsed = parse_args::<T>(args, path)?.defaulted(config);
    let mut errs = Vec::new();
    let (api_version, kind) = parsed.type_meta();
    check_type_meta(&mut errs, path, api_version.as_deref(), kind.as_deref(), T::KIND);
    parsed.validate(config, path, &mut errs);
    if !errs.is_empty() {
        return Err(errs);
    }
    parsed.apply(config);
    Ok(())
}

/// The effective arguments of type `T`, as `pluginConfig` would write them.
pub fn show<T: PluginArgs>(config: &SchedulerConfig) -> Value {
    let mut args = T::effective(config);
    let (api_version, kind) = args.type_meta();
    *api_version = Some(ARGS_API_VERSION.to_string());
    *kind = Some(T::KIND.to_string());
    serde_json::to_value(args).unwrap_or_else(|_| json!({}))
}

/// `apiVersion` and `kind` of written arguments, when given, must be the plugin's.
fn check_type_meta(
    errs: &mut Vec<String>,
    path: &str,
    api_version: Option<&str>,
    kind: Option<&str>,
    expected: &str,
) {
    if let Some(v) = api_version.filter(|v| *v != ARGS_API_VERSION) {
        errs.push(format!(
            "{path}.apiVersion: Unsupported value: {}: supported values: {ARGS_API_VERSION:?}",
            echo(v)
        ));
    }
    if let Some(k) = kind.filter(|k| *k != expected) {
        errs.push(format!(
            "{path}.kind: Unsupported value: {}: supported values: {}",
            echo(k),
            echo(expected)
        ));
    }
}

/// Parses a plugin's `args` (at `path`) as `T`; the error is a field error on `path`.
fn parse_args<T: DeserializeOwned>(args: &Value, path: &str) -> Result<T, Vec<String>> {
    // Absent `args` (null) are the defaults, as kube-scheduler reads a missing args object.
    let args = if args.is_null() { json!({}) } else { args.clone() };
    serde_json::from_value::<T>(args.clone())
        .map_err(|e| vec![format!("{path}: Invalid value: {}: {e}", echo(&args))])
}

/// A JSON rendering of a value in an error, as the API machinery's `field.Invalid` prints
/// strings and numbers.
fn echo(v: impl Serialize) -> String {
    serde_json::to_string(&v).unwrap_or_default()
}

/// How the API machinery's `field.Invalid` prints a `[]string` (Go's `%#v`):
/// `[]string{"a", "b"}`, `[]string(nil)` when absent.
fn go_strings(values: Option<&[String]>) -> String {
    match values {
        None => "[]string(nil)".to_string(),
        Some(v) => format!("[]string{{{}}}", v.iter().map(echo).collect::<Vec<_>>().join(", ")),
    }
}

/// `field.NotSupported`'s list of values: each quoted, in the given order.
fn supported(values: &[&str]) -> String {
    values.iter().map(echo).collect::<Vec<_>>().join(", ")
}

/// The API machinery's `ValidateLabelName`: one `Invalid value` per message of Go's
/// `IsQualifiedName`.
fn label_name_errors(errs: &mut Vec<String>, path: &str, name: &str) {
    for m in placer_api::names::qualified_name_errors(name) {
        errs.push(format!("{path}: Invalid value: {}: {m}", echo(name)));
    }
}

/// `UtilizationShapePoint`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UtilizationShapePointArgs {
    pub utilization: i64,
    pub score: i64,
}

/// kube-scheduler's `validateFunctionShape` (RequestedToCapacityRatio, VolumeBinding).
fn validate_shape(errs: &mut Vec<String>, path: &str, shape: &[UtilizationShapePointArgs]) {
    if shape.is_empty() {
        errs.push(format!("{path}: Required value: at least one point must be specified"));
        return;
    }
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errs.push(format!(
            "{path}[{i}].utilization: Invalid value: {}: values must be sorted in increasing order",
            shape[i].utilization
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            errs.push(format!(
                "{path}[{i}].utilization: Invalid value: {}: not in valid range [0, 100]",
                p.utilization
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            errs.push(format!(
                "{path}[{i}].score: Invalid value: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                p.score
            ));
        }
    }
}

/// One `pluginConfig` entry: a plugin name and its arguments.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginConfigEntry {
    pub name: String,
    #[serde(default)]
    pub args: Value,
}

/// A problem of one `pluginConfig` entry: the plugin it is about, the field path
/// (`pluginConfig[1].args.minCandidateNodesPercentage`) and kube-scheduler's message.
/// Displays as `field: message`; loaders add the file and the profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsError {
    /// The entry's plugin name, as written.
    pub plugin: String,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Applies a profile's `pluginConfig` (at `path`, e.g. `profiles[0].pluginConfig`) to
/// `config` through the registry's argument readers. Every problem is reported, each with
/// its plugin and field path: a plugin named twice (`Duplicate value`), a plugin that does
/// not exist or takes no arguments, and the plugin's own validation. Gates must be set in
/// `config` first: some arguments are defaulted and validated by them.
pub fn apply_plugin_config(
    config: &mut SchedulerConfig,
    entries: &[PluginConfigEntry],
    path: &str,
) -> Result<(), Vec<ArgsError>> {
    let registry = crate::plugins::registry();
    let mut errs = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let mut problems = Vec::new();
        if entries[..i].iter().any(|o| o.name == e.name) {
            problems.push(format!("{at}: Duplicate value: {}", echo(&e.name)));
        } else {
            match registry.args_reader(&e.name) {
                Some(read) => {
                    if let Err(mut more) = read(config, &e.args, &format!("{at}.args")) {
                        problems.append(&mut more);
                    }
                }
                None if registry.has(&e.name) => problems.push(format!(
                    "{at}.name: Invalid value: {}: plugin takes no arguments in Placer",
                    echo(&e.name)
                )),
                None => problems.push(format!("{at}.name: Invalid value: {}: unknown plugin", echo(&e.name))),
            }
        }
        errs.extend(problems.into_iter().map(|p| {
            let (field, message) = p.split_once(": ").unwrap_or((at.as_str(), p.as_str()));
            ArgsError { plugin: e.name.clone(), field: field.to_string(), message: message.to_string() }
        }));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}
