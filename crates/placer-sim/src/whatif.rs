//! What-if: `--set PATH=VALUE` overrides of a scenario's scheduler configuration.
//!
//! `PATH` is a dotted path below `scheduler` (`scheduler.featureGates.TASBalancedPlacement`,
//! `scheduler.profile.topologyLevels`, `scheduler.profile.pluginWeights.NodeResourcesFit`);
//! `VALUE` is YAML (`true`, `5`, `[block, rack]`, `MostAllocated`). The scheduler section
//! is rebuilt from the changed value with the scenario's own strict types, so an unknown
//! field or a wrong type is an error naming the path, and the whole scenario is validated
//! again (an unknown gate or plugin is rejected as it is in a file).

use serde_json::Value;

use crate::load::{LoadError, Problem};
use crate::scenario::{Scenario, SchedulerSpec};

/// One `--set`: the path segments below `scheduler` and the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// As given (`scheduler.featureGates.X=true`).
    pub text: String,
    pub path: Vec<String>,
    pub value: Value,
}

/// Parses `PATH=VALUE`.
pub fn parse_setting(text: &str) -> Result<Setting, String> {
    let (path, value) = text.split_once('=').ok_or_else(|| {
        format!("--set {text:?}: expected PATH=VALUE, e.g. scheduler.featureGates.TASBalancedPlacement=true")
    })?;
    let segments: Vec<String> = path.trim().split('.').map(str::to_string).collect();
    if segments.first().map(String::as_str) != Some("scheduler")
        || segments.len() < 2
        || segments.iter().any(String::is_empty)
    {
        return Err(format!(
            "--set {text:?}: the path must name a field below scheduler (scheduler.featureGates.NAME, scheduler.profile.FIELD, ...)"
        ));
    }
    let value: Value = if value.trim().is_empty() {
        Value::Null
    } else {
        serde_saphyr::from_str_with_options(value, crate::load::yaml_options())
            .map_err(|e| format!("--set {text:?}: the value is not YAML: {}", e.without_snippet()))?
    };
    Ok(Setting { text: text.to_string(), path: segments[1..].to_vec(), value })
}

/// Applies `settings` in order to the scenario's scheduler section and validates the
/// result as a whole.
pub fn apply_settings(scenario: &Scenario, settings: &[Setting]) -> Result<Scenario, LoadError> {
    let invalid = |field: String, message: String| LoadError::Invalid {
        file: scenario.file.clone(),
        problems: vec![Problem { line: 0, column: 0, at: "--set".into(), object: None, field, message }],
        expected_error: None,
    };
    let mut spec = serde_json::to_value(&scenario.scheduler)
        .map_err(|e| invalid("scheduler".into(), format!("internal error: {e}")))?;
    for s in settings {
        let mut at = &mut spec;
        for (i, seg) in s.path.iter().enumerate() {
            if at.is_null() {
                *at = Value::Object(Default::default());
            }
            let Some(map) = at.as_object_mut() else {
                return Err(invalid(
                    format!("scheduler.{}", s.path[..i].join(".")),
                    format!("{}: not a mapping, cannot set {seg} inside it", s.text),
                ));
            };
            at = map.entry(seg.clone()).or_insert(Value::Null);
        }
        *at = s.value.clone();
    }
    let scheduler: SchedulerSpec = serde_json::from_value(spec).map_err(|e| {
        let paths: Vec<&str> = settings.iter().map(|s| s.text.as_str()).collect();
        invalid("scheduler".into(), format!("{e} (after --set {})", paths.join(", --set ")))
    })?;
    let mut changed = scenario.clone();
    changed.scheduler = scheduler;
    let mut problems = Vec::new();
    crate::validate::validate(&changed, &mut problems);
    if let Err(message) = crate::run::scheduler_config(&changed) {
        problems.push(Problem {
            line: 0,
            column: 0,
            at: "--set".into(),
            object: None,
            field: "scheduler".into(),
            message,
        });
    }
    if problems.is_empty() {
        Ok(changed)
    } else {
        Err(LoadError::Invalid { file: scenario.file.clone(), problems, expected_error: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        crate::load_str("name: t\nscheduler: {profile: {topologyLevels: [rack]}}\n", "t.yaml").unwrap()
    }

    #[test]
    fn gates_and_levels_are_set() {
        let sets = [
            parse_setting("scheduler.featureGates.TASBalancedPlacement=true").unwrap(),
            parse_setting("scheduler.profile.topologyLevels=[block, rack]").unwrap(),
        ];
        let s = apply_settings(&scenario(), &sets).unwrap();
        assert_eq!(s.scheduler.feature_gates.get("TASBalancedPlacement"), Some(&true));
        assert_eq!(s.topology_levels(), ["block", "rack"]);
    }

    #[test]
    fn bad_paths_and_values_name_the_setting() {
        assert!(parse_setting("nope").unwrap_err().contains("PATH=VALUE"));
        assert!(parse_setting("cluster.nodes=1").unwrap_err().contains("below scheduler"));
        let err =
            apply_settings(&scenario(), &[parse_setting("scheduler.profile.topologyLevls=[a]").unwrap()])
                .unwrap_err()
                .to_string();
        assert!(err.contains("topologyLevls"), "{err}");
        let err =
            apply_settings(&scenario(), &[parse_setting("scheduler.featureGates.NoSuchGate=true").unwrap()])
                .unwrap_err()
                .to_string();
        assert!(err.contains("NoSuchGate"), "{err}");
    }
}
