//! `VolumeBindingArgs`: `bindTimeoutSeconds` and `shape`.
//!
//! `shape` is the storage capacity score's function (`StorageCapacityScoring`, alpha and
//! off by default in v1.36, beta from v1.37). Placer does not have that score, so it
//! behaves as v1.36 with the gate off: a `shape` is rejected with upstream's message
//! (`unexpected field`), and none is defaulted. `bindTimeoutSeconds` (default 600) is
//! how long upstream's PreBind waits for the PV controller to finish the bindings;
//! Placer's PreBind hands the writes over and does not wait (see
//! `plugins::volume_binding`), so the timeout is validated and shown but bounds nothing.

use serde::{Deserialize, Serialize};

use super::{PluginArgs, UtilizationShapePointArgs};
use crate::config::SchedulerConfig;

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VolumeBindingArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Default 600 (`SetDefaults_VolumeBindingArgs`).
    #[serde(default)]
    pub bind_timeout_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<UtilizationShapePointArgs>>,
}

/// What the engine keeps of `VolumeBindingArgs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VolumeBindingConfig {
    pub bind_timeout_seconds: i64,
}

impl Default for VolumeBindingConfig {
    fn default() -> Self {
        VolumeBindingConfig { bind_timeout_seconds: 600 }
    }
}

/// Go's `%#v` of a `[]config.UtilizationShapePoint`, as `field.Invalid` prints it.
fn go_shape(shape: &[UtilizationShapePointArgs]) -> String {
    let points: Vec<String> = shape
        .iter()
        .map(|p| format!("config.UtilizationShapePoint{{Utilization:{}, Score:{}}}", p.utilization, p.score))
        .collect();
    format!("[]config.UtilizationShapePoint{{{}}}", points.join(", "))
}

impl PluginArgs for VolumeBindingArgs {
    const KIND: &'static str = "VolumeBindingArgs";

    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.api_version, &mut self.kind)
    }

    fn defaulted(mut self, _config: &SchedulerConfig) -> Self {
        self.bind_timeout_seconds.get_or_insert(VolumeBindingConfig::default().bind_timeout_seconds);
        self
    }

    /// `ValidateVolumeBindingArgs` with `StorageCapacityScoring` off (v1.36's default).
    fn validate(&self, _config: &SchedulerConfig, path: &str, errs: &mut Vec<String>) {
        let timeout = self.bind_timeout_seconds.unwrap_or(600);
        if timeout < 0 {
            errs.push(format!(
                "{path}.bindTimeoutSeconds: Invalid value: {timeout}: invalid BindTimeoutSeconds, should not be a negative value"
            ));
        }
        if let Some(shape) = &self.shape {
            errs.push(format!(
                "{path}.shape: Invalid value: {}: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring",
                go_shape(shape)
            ));
        }
    }

    fn apply(self, config: &mut SchedulerConfig) {
        config.volume_binding =
            VolumeBindingConfig { bind_timeout_seconds: self.bind_timeout_seconds.unwrap_or(600) };
    }

    fn effective(config: &SchedulerConfig) -> Self {
        VolumeBindingArgs {
            bind_timeout_seconds: Some(config.volume_binding.bind_timeout_seconds),
            ..VolumeBindingArgs::default()
        }
    }
}
