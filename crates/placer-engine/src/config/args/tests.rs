//! kube-scheduler's `validation_pluginargs_test.go` and `defaults_test.go` cases, through
//! [`apply_plugin_config`] as both homes call it.

use super::*;
use crate::config::ScoringStrategy;

fn apply(entries: Value) -> Result<SchedulerConfig, Vec<String>> {
    apply_to(SchedulerConfig::default(), entries)
}

fn apply_to(mut c: SchedulerConfig, entries: Value) -> Result<SchedulerConfig, Vec<String>> {
    let entries: Vec<PluginConfigEntry> = serde_json::from_value(entries).expect("entries");
    apply_plugin_config(&mut c, &entries, "profiles[0].pluginConfig")
        .map(|()| c)
        .map_err(|errs| errs.iter().map(ToString::to_string).collect())
}

#[test]
fn requested_to_capacity_ratio_with_shape_and_weights() {
    let c = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": "cpu", "weight": 3}, {"name": "nvidia.com/gpu"}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    }}}]))
    .expect("valid");
    assert_eq!(
        c.node_resources_fit_strategy,
        ScoringStrategy::RequestedToCapacityRatio {
            resources: vec![("cpu".into(), 3), ("nvidia.com/gpu".into(), 1)],
            shape: vec![(0, 0), (100, 10)],
        }
    );
}

#[test]
fn defaults_fill_the_strategy_and_resources() {
    let c = apply(json!([{"name": "NodeResourcesFit", "args": {}}])).expect("valid");
    assert_eq!(c.node_resources_fit_strategy, ScoringStrategy::least_allocated());
    let c = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated",
        "resources": [{"name": "memory", "weight": 5}]}}}]))
    .expect("valid");
    assert_eq!(
        c.node_resources_fit_strategy,
        ScoringStrategy::MostAllocated { resources: vec![("memory".into(), 5)] }
    );
}

#[test]
fn upstream_validation_messages() {
    let errs = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random",
        "resources": [{"name": "cpu", "weight": 101}]}}}]))
    .unwrap_err();
    assert_eq!(
        errs,
        [
            "profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: \"Random\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"",
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]",
        ]
    );
    let errs = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}}]))
        .unwrap_err();
    assert_eq!(errs, ["profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio"]);
    let errs = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 11}, {"utilization": 50, "score": 2}, {"utilization": 101, "score": -1}]}}}}]))
    .unwrap_err();
    let p = "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape";
    assert_eq!(
        errs,
        [
            format!("{p}[1].utilization: Invalid value: 50: values must be sorted in increasing order"),
            format!("{p}[0].score: Invalid value: 11: not in valid range [0, 10]"),
            format!("{p}[2].utilization: Invalid value: 101: not in valid range [0, 100]"),
            format!("{p}[2].score: Invalid value: -1: not in valid range [0, 10]"),
        ]
    );
    let errs =
        apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "LeastAllocated",
        "requestedToCapacityRatio": {"shape": []}}}}]))
        .unwrap_err();
    assert_eq!(errs, ["profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"]);
    let errs = apply(
        json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": []}}}}]),
    )
    .unwrap_err();
    assert_eq!(errs, [format!("{p}: Required value: at least one point must be specified")]);
}

/// kube's `TestValidateNodeResourcesFitArgs` ignoredResources / ignoredResourceGroups.
#[test]
fn ignored_resources_and_groups() {
    let c = apply(json!([{"name": "NodeResourcesFit", "args": {
        "ignoredResources": ["example.com/foo"], "ignoredResourceGroups": ["example.com"]}}]))
    .expect("valid");
    assert_eq!(c.fit_ignored_resources, ["example.com/foo"]);
    assert_eq!(c.fit_ignored_resource_groups, ["example.com"]);
    let shown = show::<NodeResourcesFitArgs>(&c);
    assert_eq!(shown["ignoredResources"], json!(["example.com/foo"]));
    let errs = apply(json!([{"name": "NodeResourcesFit", "args": {
        "ignoredResources": ["foo.com/bar/baz"], "ignoredResourceGroups": ["example.com/aaa"]}}]))
    .unwrap_err();
    let p = "profiles[0].pluginConfig[0].args";
    // "example.com/aaa" is a valid qualified name: only the '/' error.
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with(&format!("{p}.ignoredResources[0]: Invalid value: \"foo.com/bar/baz\": ")),
        "{errs:?}"
    );
    assert_eq!(
        errs[1],
        format!("{p}.ignoredResourceGroups[0]: Invalid value: \"example.com/aaa\": resource group name can't contain '/'")
    );
}

/// kube's `TestValidateNodeResourcesBalancedAllocationArgs` and the defaulting.
#[test]
fn balanced_allocation_resources() {
    let c = apply(json!([{"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
        {"name": "cpu"}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu"}]}}]))
    .expect("valid");
    assert_eq!(
        c.balanced_allocation_resources,
        [("cpu".to_string(), 1), ("memory".to_string(), 1), ("nvidia.com/gpu".to_string(), 1)]
    );
    let c = apply(json!([{"name": "NodeResourcesBalancedAllocation", "args": {}}])).expect("valid");
    assert_eq!(c.balanced_allocation_resources, SchedulerConfig::default().balanced_allocation_resources);
    let errs = apply(json!([{"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
        {"name": "cpu", "weight": 2}, {"name": "cpu", "weight": 1}]}}]))
    .unwrap_err();
    assert_eq!(
        errs,
        [
            "profiles[0].pluginConfig[0].args.resources[0].weight: Invalid value: 2: must be 1",
            "profiles[0].pluginConfig[0].args.resources[1].name: Duplicate value: \"cpu\"",
        ]
    );
}

/// kube's `TestValidateNodeAffinityArgs`: valid added affinity is kept, a bad key or
/// operator is a field error naming the term.
#[test]
fn node_affinity_added_affinity() {
    let c = apply(json!([{"name": "NodeAffinity", "args": {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "label-1", "operator": "In", "values": ["label-1-val"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}}]
    }}}]))
    .expect("valid");
    assert!(c.node_affinity_added.is_some());
    assert_eq!(
        show::<NodeAffinityArgs>(&c)["addedAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
            ["weight"],
        1
    );
    let errs = apply(json!([{"name": "NodeAffinity", "args": {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "invalid key", "operator": "In", "values": ["label-1-val"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1", "node-2"]}]}}]
    }}}]))
    .unwrap_err();
    let p = "profiles[0].pluginConfig[0].args.addedAffinity";
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].starts_with(&format!(
        "{p}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: \"invalid key\": "
    )));
    // Upstream's paths name the preferred term's index (no `.preference`), and a field
    // requirement's values print as Go's `%#v`.
    assert_eq!(
        errs[1],
        format!(
            "{p}.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values: Invalid value: []string{{\"node-1\", \"node-2\"}}: must have one element"
        )
    );
}

/// component-helpers' `nodeaffinity` parse errors as `ValidateNodeAffinityArgs` reports
/// them: unsupported operators (label and field), `labels.NewRequirement`'s value rules,
/// invalid label values (path `values[i][key]`); empty terms and weight-0 preferred terms
/// are not parsed.
#[test]
fn node_affinity_messages_are_upstreams() {
    let errs = apply(json!([{"name": "NodeAffinity", "args": {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {},
            {"matchExpressions": [
                {"key": "a", "operator": "Foo"},
                {"key": "b", "operator": "In"},
                {"key": "c", "operator": "Exists", "values": ["x"]},
                {"key": "d", "operator": "Gt", "values": ["1", "two"]},
                {"key": "e", "operator": "In", "values": ["bad value"]}
            ],
             "matchFields": [{"key": "metadata.name", "operator": "Exists"}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "preference": {"matchExpressions": [{"key": "a", "operator": "Foo"}]}},
            {"weight": 2, "preference": {"matchFields": [{"key": "metadata.name", "operator": "NotIn"}]}}]
    }}}]))
    .unwrap_err();
    let r = "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]";
    let pr =
        "profiles[0].pluginConfig[0].args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[1]";
    assert_eq!(
        errs,
        [
            format!("{r}.matchExpressions[0].operator: Unsupported value: \"Foo\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\""),
            format!("{r}.matchExpressions[1].values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"),
            format!("{r}.matchExpressions[2].values: Invalid value: []string{{\"x\"}}: values set must be empty for exists and does not exist"),
            format!("{r}.matchExpressions[3].values: Invalid value: []string{{\"1\", \"two\"}}: for 'Gt', 'Lt' operators, exactly one value is required"),
            format!("{r}.matchExpressions[3].values[1]: Invalid value: \"two\": for 'Gt', 'Lt' operators, the value must be an integer"),
            format!("{r}.matchExpressions[4].values[0][e]: Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
            format!("{r}.matchFields[0].operator: Unsupported value: \"Exists\": supported values: \"In\", \"NotIn\""),
            format!("{pr}.matchFields[0].values: Invalid value: []string(nil): must have one element"),
        ]
    );
}

/// kube's `TestValidateInterPodAffinityArgs`.
#[test]
fn inter_pod_affinity_args() {
    let c = apply(json!([{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 0,
        "ignorePreferredTermsOfExistingPods": true}}]))
    .expect("valid");
    assert_eq!(
        c.inter_pod_affinity,
        InterPodAffinityConfig { hard_pod_affinity_weight: 0, ignore_preferred_terms_of_existing_pods: true }
    );
    let c = apply(json!([{"name": "InterPodAffinity", "args": {}}])).expect("valid");
    assert_eq!(c.inter_pod_affinity, InterPodAffinityConfig::default());
    for w in [-1, 101] {
        let errs =
            apply(json!([{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": w}}])).unwrap_err();
        assert_eq!(
            errs,
            [format!(
                "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: {w}: not in valid range [0, 100]"
            )]
        );
    }
    let errs =
        apply(json!([{"name": "InterPodAffinity", "args": {"kind": "NodeResourcesFitArgs"}}])).unwrap_err();
    assert_eq!(
        errs,
        ["profiles[0].pluginConfig[0].args.kind: Unsupported value: \"NodeResourcesFitArgs\": supported values: \"InterPodAffinityArgs\""]
    );
}

#[test]
fn shown_args_of_every_plugin_read_back_the_same() {
    let c = SchedulerConfig {
        balanced_allocation_resources: vec![("cpu".into(), 1), ("example.com/foo".into(), 1)],
        inter_pod_affinity: InterPodAffinityConfig {
            hard_pod_affinity_weight: 7,
            ignore_preferred_terms_of_existing_pods: true,
        },
        ..SchedulerConfig::default()
    };
    let mut back = SchedulerConfig::default();
    read::<NodeResourcesBalancedAllocationArgs>(
        &mut back,
        &show::<NodeResourcesBalancedAllocationArgs>(&c),
        "args",
    )
    .expect("valid");
    read::<InterPodAffinityArgs>(&mut back, &show::<InterPodAffinityArgs>(&c), "args").expect("valid");
    assert_eq!(back.balanced_allocation_resources, c.balanced_allocation_resources);
    assert_eq!(back.inter_pod_affinity, c.inter_pod_affinity);
}

#[test]
fn unknown_and_duplicate_plugins() {
    let errs = apply(json!([
        {"name": "NodeResourcesFit", "args": {}},
        {"name": "NodeResourcesFit", "args": {}},
        {"name": "Bogus", "args": {}},
        {"name": "NodeName", "args": {}}
    ]))
    .unwrap_err();
    assert_eq!(
        errs,
        [
            "profiles[0].pluginConfig[1]: Duplicate value: \"NodeResourcesFit\"",
            "profiles[0].pluginConfig[2].name: Invalid value: \"Bogus\": unknown plugin",
            "profiles[0].pluginConfig[3].name: Invalid value: \"NodeName\": plugin takes no arguments in Placer",
        ]
    );
}

#[test]
fn shown_args_read_back_the_same() {
    let c = SchedulerConfig {
        node_resources_fit_strategy: ScoringStrategy::RequestedToCapacityRatio {
            resources: vec![("cpu".into(), 2)],
            shape: vec![(0, 10), (100, 0)],
        },
        ..SchedulerConfig::default()
    };
    let shown = show::<NodeResourcesFitArgs>(&c);
    let mut back = SchedulerConfig::default();
    read::<NodeResourcesFitArgs>(&mut back, &shown, "args").expect("valid");
    assert_eq!(back.node_resources_fit_strategy, c.node_resources_fit_strategy);
}

/// kube's `TestValidatePodTopologySpreadArgs` and `SetDefaults_PodTopologySpreadArgs`.
#[test]
fn pod_topology_spread_args() {
    let c = apply(json!([{"name": "PodTopologySpread", "args": {}}])).expect("valid");
    assert_eq!(c.spread_defaulting, SpreadDefaulting::System);
    let c = apply(
        json!([{"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}]),
    )
    .expect("valid");
    let SpreadDefaulting::List(list) = &c.spread_defaulting else { panic!("{:?}", c.spread_defaulting) };
    assert_eq!((list.len(), list[1].max_skew, list[1].topology_key.as_str()), (2, 2, "zone"));
    let shown = show::<PodTopologySpreadArgs>(&c);
    assert_eq!(shown["defaultingType"], "List");
    assert_eq!(shown["defaultConstraints"][0]["topologyKey"], "node");
    let mut back = SchedulerConfig::default();
    read::<PodTopologySpreadArgs>(&mut back, &shown, "args").expect("valid");
    assert_eq!(back.spread_defaulting, c.spread_defaulting);
    // List with no constraints: valid (no defaults at all).
    let c = apply(json!([{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}])).expect("valid");
    assert_eq!(c.spread_defaulting, SpreadDefaulting::List(Vec::new()));

    let p = "profiles[0].pluginConfig[0].args";
    let errs = apply(json!([{"name": "PodTopologySpread", "args": {"defaultConstraints": [
        {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Unknown",
         "labelSelector": {"matchLabels": {"a": "b"}}},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": ""},
        {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 1, "topologyKey": "not a key", "whenUnsatisfiable": "ScheduleAnyway"}]}}]))
    .unwrap_err();
    assert_eq!(errs.len(), 8, "{errs:#?}");
    assert_eq!(
        errs[0],
        format!("{p}.defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty")
    );
    assert_eq!(
        errs[1],
        format!("{p}.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)")
    );
    assert_eq!(errs[2], format!("{p}.defaultConstraints[0].topologyKey: Required value: can not be empty"));
    assert_eq!(
        errs[3],
        format!("{p}.defaultConstraints[0].whenUnsatisfiable: Unsupported value: \"Unknown\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"")
    );
    assert_eq!(
        errs[4],
        format!("{p}.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod")
    );
    assert_eq!(
        errs[5],
        format!("{p}.defaultConstraints[1].whenUnsatisfiable: Required value: can not be empty")
    );
    assert_eq!(errs[6], format!("{p}.defaultConstraints[3]: Duplicate value: \"{{node, DoNotSchedule}}\""));
    assert!(errs[7].starts_with(&format!(
        "{p}.defaultConstraints[4].topologyKey: Invalid value: \"not a key\": name part "
    )));
    let errs =
        apply(json!([{"name": "PodTopologySpread", "args": {"defaultingType": "Other"}}])).unwrap_err();
    assert_eq!(
        errs,
        [format!("{p}.defaultingType: Unsupported value: \"Other\": supported values: \"System\", \"List\"")]
    );
}

/// kube's `TestValidateDefaultPreemptionArgs` and `SetDefaults_DefaultPreemptionArgs`.
#[test]
fn default_preemption_args() {
    let c = apply(json!([{"name": "DefaultPreemption", "args": {}}])).expect("valid");
    assert_eq!(c.preemption_candidates, PreemptionCandidates { min_percentage: 10, min_absolute: 100 });
    let c = apply(json!([{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 0,
        "minCandidateNodesAbsolute": 1}}]))
    .expect("valid");
    assert_eq!(c.preemption_candidates, PreemptionCandidates { min_percentage: 0, min_absolute: 1 });
    let shown = show::<DefaultPreemptionArgs>(&c);
    assert_eq!(
        (shown["minCandidateNodesPercentage"].clone(), shown["kind"].clone()),
        (json!(0), json!("DefaultPreemptionArgs"))
    );
    let p = "profiles[0].pluginConfig[0].args";
    let errs = apply(json!([{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": -1,
        "minCandidateNodesAbsolute": -1}}]))
    .unwrap_err();
    assert_eq!(
        errs,
        [
            format!("{p}.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]"),
            format!("{p}.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
        ]
    );
    let errs = apply(json!([{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 101}}]))
        .unwrap_err();
    assert_eq!(
        errs,
        [format!("{p}.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]")]
    );
    let errs = apply(json!([{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 0,
        "minCandidateNodesAbsolute": 0}}]))
    .unwrap_err();
    assert_eq!(
        errs,
        [
            format!("{p}.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
            format!("{p}.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"),
        ]
    );
}

/// kube's `TestCalculateNumCandidates` (default_preemption_test.go).
#[test]
fn number_of_preemption_candidates() {
    let n = |pct, abs, nodes| {
        PreemptionCandidates { min_percentage: pct, min_absolute: abs }.num_candidates(nodes)
    };
    assert_eq!(n(10, 100, 10), 10, "no minimum: all nodes");
    assert_eq!(n(40, 100, 1000), 400, "percentage above the absolute minimum");
    assert_eq!(n(5, 100, 1000), 100, "absolute minimum");
    assert_eq!(n(0, 3, 1000), 3);
    assert_eq!(n(10, 100, 0), 0);
}

/// kube's `TestValidateVolumeBindingArgs` with `StorageCapacityScoring` off (v1.36's
/// default) and `SetDefaults_VolumeBindingArgs`.
#[test]
fn volume_binding_args() {
    let c = apply(json!([{"name": "VolumeBinding", "args": {}}])).expect("valid");
    assert_eq!(c.volume_binding.bind_timeout_seconds, 600);
    let c = apply(json!([{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 0}}])).expect("valid");
    assert_eq!(c.volume_binding.bind_timeout_seconds, 0);
    let shown = show::<VolumeBindingArgs>(&c);
    assert_eq!(
        shown,
        json!({"apiVersion": ARGS_API_VERSION, "kind": "VolumeBindingArgs", "bindTimeoutSeconds": 0})
    );
    let p = "profiles[0].pluginConfig[0].args";
    let errs = apply(json!([{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": -10}}])).unwrap_err();
    assert_eq!(
        errs,
        [format!("{p}.bindTimeoutSeconds: Invalid value: -10: invalid BindTimeoutSeconds, should not be a negative value")]
    );
    let errs = apply(json!([{"name": "VolumeBinding", "args": {"shape": [
        {"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}]))
    .unwrap_err();
    assert_eq!(
        errs,
        [format!("{p}.shape: Invalid value: []config.UtilizationShapePoint{{config.UtilizationShapePoint{{Utilization:0, Score:0}}, config.UtilizationShapePoint{{Utilization:100, Score:10}}}}: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring")]
    );
}

/// Every problem names its plugin; `Display` is `field: message`.
#[test]
fn errors_name_the_plugin() {
    let entries: Vec<PluginConfigEntry> = serde_json::from_value(json!([
        {"name": "InterPodAffinity", "args": {}},
        {"name": "DefaultPreemption", "args": {"minCandidateNodesAbsolute": -1}}
    ]))
    .expect("entries");
    let errs = apply_plugin_config(&mut SchedulerConfig::default(), &entries, "pluginConfig").unwrap_err();
    assert_eq!(
        errs,
        [ArgsError {
            plugin: "DefaultPreemption".into(),
            field: "pluginConfig[1].args.minCandidateNodesAbsolute".into(),
            message: "Invalid value: -1: not in valid range [0, inf)".into(),
        }]
    );
}
