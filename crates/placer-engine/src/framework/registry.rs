//! Plugins by name and extension point, and the profiles built from them.
//!
//! A [`Registry`] lists every plugin Placer has (filled once, in
//! `crate::plugins::registry`), each with a factory, its extension point and whether the
//! default profile enables it. [`Registry::pod_framework`] and
//! [`Registry::placement_framework`] build a profile as kube-scheduler does from
//! KubeSchedulerConfiguration's `plugins`: at each point, the defaults in registration
//! order, minus the names in `disabled` (`*`: every default) of the point or of
//! `multiPoint`, plus the plugins `enabled` there (after the defaults; a default named
//! again only takes the new weight). Score weights also follow
//! [`SchedulerConfig::plugin_weights`]; weight 0 leaves a score plugin out.

use std::fmt;

use super::placement::{PlacementFeasible, PlacementFramework, PlacementGenerate, PlacementScore};
use super::pod::{FilterPlugin, Framework, PermitPlugin, PreBindPlugin, ReservePlugin, ScorePlugin};
use crate::config::{ExtensionPoint, SchedulerConfig};

/// A factory: the plugin for a configuration, or `None` when the configuration leaves it
/// out (e.g. its feature gate is off).
type Make<T> = fn(&SchedulerConfig) -> Option<T>;

/// A plugin factory at one extension point.
#[derive(Clone, Copy)]
// Reserve / Permit / PreBind: the rooms of the next resource kinds (devices, volumes);
// only tests register such plugins until the first one lands.
#[cfg_attr(not(test), allow(dead_code))]
enum Factory {
    Filter(Make<Box<dyn FilterPlugin>>),
    /// With the default weight.
    Score(Make<Box<dyn ScorePlugin>>, i64),
    Reserve(Make<Box<dyn ReservePlugin>>),
    Permit(Make<Box<dyn PermitPlugin>>),
    PreBind(Make<Box<dyn PreBindPlugin>>),
    PlacementGenerate(Make<Box<dyn PlacementGenerate>>),
    PlacementFeasible(Make<Box<dyn PlacementFeasible>>),
    /// With the default weight.
    PlacementScore(Make<Box<dyn PlacementScore>>, i64),
}

impl Factory {
    fn point(&self) -> ExtensionPoint {
        match self {
            Factory::Filter(_) => ExtensionPoint::Filter,
            Factory::Score(..) => ExtensionPoint::Score,
            Factory::Reserve(_) => ExtensionPoint::Reserve,
            Factory::Permit(_) => ExtensionPoint::Permit,
            Factory::PreBind(_) => ExtensionPoint::PreBind,
            Factory::PlacementGenerate(_) => ExtensionPoint::PlacementGenerate,
            Factory::PlacementFeasible(_) => ExtensionPoint::PlacementFeasible,
            Factory::PlacementScore(..) => ExtensionPoint::PlacementScore,
        }
    }
}

#[derive(Clone, Copy)]
struct Entry {
    name: &'static str,
    factory: Factory,
    by_default: bool,
}

/// Reads a plugin's `pluginConfig` arguments (at a field path) into the configuration;
/// errors are field errors, each starting with its path.
pub type ArgsReader = fn(&mut SchedulerConfig, &serde_json::Value, &str) -> Result<(), Vec<String>>;
/// Shows a plugin's effective arguments as `pluginConfig` would write them.
pub type ArgsShower = fn(&SchedulerConfig) -> serde_json::Value;

/// Every plugin by name and extension point (see the module docs).
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    /// Plugins that take `pluginConfig` arguments.
    args: Vec<(&'static str, ArgsReader, ArgsShower)>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| (e.factory.point().key(), e.name, e.by_default)))
            .finish()
    }
}

/// The plugins one extension point runs (by its `plugins` key), in order, with the weight
/// of score plugins.
pub type PointPlugins = (&'static str, Vec<(&'static str, Option<i64>)>);

/// One profile as [`Registry::effective_profiles`] shows it; serializes as a
/// KubeSchedulerConfiguration profile (`schedulerName`, `plugins.<point>.enabled`,
/// `pluginConfig`), keys in that order.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveProfile {
    pub scheduler_name: String,
    /// Extension point key and the plugins it runs, in order, with the weight of score
    /// plugins.
    pub plugins: Vec<PointPlugins>,
    /// Plugin name and its effective arguments.
    pub plugin_config: Vec<(&'static str, serde_json::Value)>,
}

impl serde::Serialize for EffectiveProfile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Points<'a>(&'a [PointPlugins]);
        impl serde::Serialize for Points<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (point, plugins) in self.0 {
                    let enabled: Vec<serde_json::Value> = plugins
                        .iter()
                        .map(|(name, w)| match w {
                            Some(w) => serde_json::json!({"name": name, "weight": w}),
                            None => serde_json::json!({"name": name}),
                        })
                        .collect();
                    m.serialize_entry(point, &serde_json::json!({"enabled": enabled}))?;
                }
                m.end()
            }
        }
        let args: Vec<serde_json::Value> = self
            .plugin_config
            .iter()
            .map(|(name, args)| serde_json::json!({"name": name, "args": args}))
            .collect();
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("schedulerName", &self.scheduler_name)?;
        m.serialize_entry("plugins", &Points(&self.plugins))?;
        m.serialize_entry("pluginConfig", &args)?;
        m.end()
    }
}

/// A profile names a plugin the registry does not have at that extension point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugins.{point}: unknown plugin {name:?} (known here: {known})")]
pub struct UnknownPlugin {
    pub point: &'static str,
    pub name: String,
    pub known: String,
}

#[cfg_attr(not(test), allow(dead_code))]
impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    fn add(&mut self, name: &'static str, factory: Factory, by_default: bool) -> &mut Self {
        self.entries.push(Entry { name, factory, by_default });
        self
    }

    /// Registers a filter plugin, enabled by default.
    pub fn filter(&mut self, name: &'static str, make: Make<Box<dyn FilterPlugin>>) -> &mut Self {
        self.add(name, Factory::Filter(make), true)
    }
    /// Registers a score plugin with its default weight, enabled by default.
    pub fn score(&mut self, name: &'static str, weight: i64, make: Make<Box<dyn ScorePlugin>>) -> &mut Self {
        self.add(name, Factory::Score(make, weight), true)
    }
    /// Registers a Reserve plugin, enabled by default.
    pub fn reserve(&mut self, name: &'static str, make: Make<Box<dyn ReservePlugin>>) -> &mut Self {
        self.add(name, Factory::Reserve(make), true)
    }
    /// Registers a Permit plugin, enabled by default.
    pub fn permit(&mut self, name: &'static str, make: Make<Box<dyn PermitPlugin>>) -> &mut Self {
        self.add(name, Factory::Permit(make), true)
    }
    /// Registers a PreBind plugin, enabled by default.
    pub fn pre_bind(&mut self, name: &'static str, make: Make<Box<dyn PreBindPlugin>>) -> &mut Self {
        self.add(name, Factory::PreBind(make), true)
    }
    /// Registers a PlacementGenerate plugin, enabled by default.
    pub fn placement_generate(
        &mut self,
        name: &'static str,
        make: Make<Box<dyn PlacementGenerate>>,
    ) -> &mut Self {
        self.add(name, Factory::PlacementGenerate(make), true)
    }
    /// Registers a PlacementFeasible plugin, enabled by default.
    pub fn placement_feasible(
        &mut self,
        name: &'static str,
        make: Make<Box<dyn PlacementFeasible>>,
    ) -> &mut Self {
        self.add(name, Factory::PlacementFeasible(make), true)
    }
    /// Registers a PlacementScore plugin with its default weight, enabled by default.
    pub fn placement_score(
        &mut self,
        name: &'static str,
        weight: i64,
        make: Make<Box<dyn PlacementScore>>,
    ) -> &mut Self {
        self.add(name, Factory::PlacementScore(make, weight), true)
    }
    /// Makes the plugin registered last available by name only (not in the default
    /// profile: a profile's `enabled` turns it on).
    pub fn off_by_default(&mut self) -> &mut Self {
        if let Some(e) = self.entries.last_mut() {
            e.by_default = false;
        }
        self
    }

    /// Declares that plugin `name` takes `pluginConfig` arguments of type `T` (read,
    /// defaulted and validated by `config::args::read`, shown by `config::args::show`).
    /// A name with no factory here is a plugin at a point the registry does not model
    /// (DefaultPreemption, at PostFilter): it is always in the profile.
    pub fn args<T: crate::config::args::PluginArgs>(&mut self, name: &'static str) -> &mut Self {
        let read: ArgsReader = crate::config::args::read::<T>;
        let show: ArgsShower = crate::config::args::show::<T>;
        self.args.push((name, read, show));
        self
    }

    /// The argument reader of plugin `name`, if it takes arguments.
    pub fn args_reader(&self, name: &str) -> Option<ArgsReader> {
        self.args.iter().find(|(n, ..)| *n == name).map(|(_, read, _)| *read)
    }

    /// Whether a plugin of that name is registered (at any point).
    pub fn has(&self, name: &str) -> bool {
        self.entries.iter().any(|e| e.name == name)
    }

    /// The effective profile of `config` as KubeSchedulerConfiguration profiles (one per
    /// scheduler name, all alike): the plugins each extension point runs, in order (score
    /// points with their weights), and the arguments of every plugin in it that takes
    /// some (`pluginConfig`).
    pub fn effective_profiles(&self, config: &SchedulerConfig) -> Vec<EffectiveProfile> {
        let mut points: Vec<PointPlugins> = Vec::new();
        let mut in_profile: Vec<&'static str> = Vec::new();
        for &point in &ExtensionPoint::ALL[1..] {
            let mut enabled = Vec::new();
            for (e, weight) in self.selected(config, point) {
                let runs = match e.factory {
                    Factory::Filter(make) => make(config).map(|_| None),
                    Factory::Reserve(make) => make(config).map(|_| None),
                    Factory::Permit(make) => make(config).map(|_| None),
                    Factory::PreBind(make) => make(config).map(|_| None),
                    Factory::PlacementGenerate(make) => make(config).map(|_| None),
                    Factory::PlacementFeasible(make) => make(config).map(|_| None),
                    Factory::Score(make, default) => {
                        let w = config.weight(e.name, weight.unwrap_or(default));
                        make(config).filter(|_| w != 0).map(|_| Some(w))
                    }
                    Factory::PlacementScore(make, default) => {
                        let w = config.weight(e.name, weight.unwrap_or(default));
                        make(config).filter(|_| w != 0).map(|_| Some(w))
                    }
                };
                if let Some(w) = runs {
                    enabled.push((e.name, w));
                    if !in_profile.contains(&e.name) {
                        in_profile.push(e.name);
                    }
                }
            }
            if !enabled.is_empty() {
                points.push((point.key(), enabled));
            }
        }
        // In name order, as kube-scheduler appends the defaulted arguments.
        let mut plugin_config: Vec<(&'static str, serde_json::Value)> = self
            .args
            .iter()
            .filter(|(name, ..)| in_profile.contains(name) || !self.has(name))
            .map(|(name, _, show)| (*name, show(config)))
            .collect();
        plugin_config.sort_by_key(|(name, _)| *name);
        config
            .scheduler_names
            .iter()
            .map(|name| EffectiveProfile {
                scheduler_name: name.clone(),
                plugins: points.clone(),
                plugin_config: plugin_config.clone(),
            })
            .collect()
    }

    /// Checks that every plugin a profile enables or disables exists at its point.
    pub fn check(&self, config: &SchedulerConfig) -> Result<(), UnknownPlugin> {
        for (&point, set) in &config.plugins.points {
            let names =
                set.enabled.iter().map(|p| p.name.as_str()).chain(set.disabled.iter().map(String::as_str));
            for name in names {
                if name == "*" {
                    continue;
                }
                let known: Vec<&str> = self
                    .entries
                    .iter()
                    .filter(|e| point == ExtensionPoint::MultiPoint || e.factory.point() == point)
                    .map(|e| e.name)
                    .collect();
                if !known.contains(&name) {
                    let mut list = known.clone();
                    list.dedup();
                    return Err(UnknownPlugin {
                        point: point.key(),
                        name: name.to_string(),
                        known: list.join(", "),
                    });
                }
            }
        }
        Ok(())
    }

    /// The entries of `point` a profile runs, in order, with their weights (score points).
    /// Unknown names in the profile are skipped ([`Registry::check`] reports them).
    fn selected(&self, config: &SchedulerConfig, point: ExtensionPoint) -> Vec<(Entry, Option<i64>)> {
        let sets = [config.plugins.at(point), config.plugins.at(ExtensionPoint::MultiPoint)];
        let disabled =
            |name: &str| sets.iter().flatten().any(|s| s.disabled.iter().any(|d| d == "*" || d == name));
        let mut out: Vec<(Entry, Option<i64>)> = self
            .entries
            .iter()
            .filter(|e| e.factory.point() == point && e.by_default && !disabled(e.name))
            .map(|e| (*e, None))
            .collect();
        for set in sets.iter().flatten() {
            for p in &set.enabled {
                if let Some(slot) = out.iter_mut().find(|(e, _)| e.name == p.name) {
                    slot.1 = p.weight.or(slot.1);
                    continue;
                }
                if let Some(e) = self.entries.iter().find(|e| e.factory.point() == point && e.name == p.name)
                {
                    out.push((*e, p.weight));
                }
            }
        }
        out
    }

    /// The pod-level framework of the profile in `config`.
    pub fn pod_framework(&self, config: &SchedulerConfig) -> Framework {
        let mut fw = Framework::empty();
        fw.percentage_of_nodes_to_score = config.percentage_of_nodes_to_score;
        for point in [
            ExtensionPoint::Filter,
            ExtensionPoint::Score,
            ExtensionPoint::Reserve,
            ExtensionPoint::Permit,
            ExtensionPoint::PreBind,
        ] {
            for (e, weight) in self.selected(config, point) {
                match e.factory {
                    Factory::Filter(make) => fw.filters.extend(make(config)),
                    Factory::Score(make, default) => {
                        let w = config.weight(e.name, weight.unwrap_or(default));
                        if let Some(p) = make(config).filter(|_| w != 0) {
                            fw.scores.push((p, w));
                        }
                    }
                    Factory::Reserve(make) => fw.reserve.extend(make(config)),
                    Factory::Permit(make) => fw.permit.extend(make(config)),
                    Factory::PreBind(make) => fw.pre_bind.extend(make(config)),
                    _ => {}
                }
            }
        }
        fw
    }

    /// The placement-level framework of the profile in `config`.
    pub fn placement_framework(&self, config: &SchedulerConfig) -> PlacementFramework {
        let mut pf = PlacementFramework::empty(config);
        for point in [
            ExtensionPoint::PlacementGenerate,
            ExtensionPoint::PlacementFeasible,
            ExtensionPoint::PlacementScore,
        ] {
            for (e, weight) in self.selected(config, point) {
                match e.factory {
                    Factory::PlacementGenerate(make) => pf.generators.extend(make(config)),
                    Factory::PlacementFeasible(make) => pf.feasible.extend(make(config)),
                    Factory::PlacementScore(make, default) => {
                        let w = config.weight(e.name, weight.unwrap_or(default));
                        if let Some(p) = make(config).filter(|_| w != 0) {
                            pf.scorers.push((p, w));
                        }
                    }
                    _ => {}
                }
            }
        }
        pf
    }
}
