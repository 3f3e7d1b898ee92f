use super::*;

const HEAD: &str = "name: t\ncluster:\n  generate:\n    levels: [topology.placer.dev/block, topology.placer.dev/rack, kubernetes.io/hostname]\n    \
                    fanout: [1, 2, 4]\n    allocatable: {cpu: \"8\", memory: 64Gi, pods: \"110\", nvidia.com/gpu: \"8\"}\n";

fn no_csv(_: &str) -> Result<(PathBuf, String), TraceError> {
    panic!("no CSV expected")
}

fn load(text: &str) -> Result<Trace, TraceError> {
    load_str(text, "t.yaml", no_csv)
}

fn with_csv(csv: &'static str) -> impl FnOnce(&str) -> Result<(PathBuf, String), TraceError> {
    move |name: &str| Ok((PathBuf::from(name), csv.to_string()))
}

fn problems(e: TraceError) -> Vec<String> {
    match e {
        TraceError::Invalid { problems, .. } => problems.iter().map(Problem::to_string).collect(),
        other => panic!("expected invalid, got {other}"),
    }
}

#[test]
fn yaml_arrivals_load_in_time_order_with_defaults() {
    let t = load(&format!(
        "{HEAD}sampleInterval: 10s\nhorizon: 2h\nscheduler:\n  featureGates: {{WorkloadAwarePreemption: true}}\narrivals:\n  \
         - {{name: late, at: 90s, pods: 4, requests: {{cpu: 500m, nvidia.com/gpu: 2}}, required: rack, runTime: 1h30m, priority: 5}}\n  \
         - {{at: 1s, kind: Pod, requests: {{cpu: \"1\"}}, runTime: 30s}}\n  \
         - {{at: 2s, kind: Job, pods: 4, requests: {{memory: 1Gi}}, preferred: topology.placer.dev/rack, slice: {{level: host, size: 2}}, runTime: 1.5s}}\n"
    ))
    .unwrap();
    assert_eq!(t.name, "t");
    assert_eq!((t.sample_interval_ms, t.horizon_ms), (10_000, Some(7_200_000)));
    assert_eq!(t.gates.get("WorkloadAwarePreemption"), Some(&true));
    let names: Vec<&str> = t.arrivals.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["w1", "w2", "late"], "sorted by time; unnamed arrivals are w<index>");
    let late = &t.arrivals[2];
    assert_eq!(
        (late.at_ms, late.pods, late.min_count, late.priority, late.run_ms),
        (90_000, 4, 4, 5, 5_400_000)
    );
    assert_eq!(late.res, Res { cpu_milli: 500, memory: 0, gpu: 2, pods: 1 });
    assert_eq!(late.topology, TopologyAsk { required: Some(1), ..TopologyAsk::default() });
    assert_eq!(late.class, "PodGroup x4 required-rack");
    let job = &t.arrivals[1];
    assert_eq!(job.kind, ArrivalKind::Job);
    assert_eq!(job.topology, TopologyAsk { preferred: Some(1), slice: Some((2, 2)), required: None });
    assert_eq!(job.run_ms, 1_500);
    assert!(job.is_gang() && !t.arrivals[0].is_gang());
}

#[test]
fn numbers_and_strings_read_alike() {
    let t = load(&format!(
        "{HEAD}arrivals:\n  - {{at: 0s, pods: \"3\", minCount: 2, requests: {{cpu: 2}}, runTime: 1s}}\n"
    ))
    .unwrap();
    assert_eq!((t.arrivals[0].pods, t.arrivals[0].min_count, t.arrivals[0].res.cpu_milli), (3, 2, 2000));
}

#[test]
fn bad_fields_name_file_line_and_field() {
    let text = format!(
        "{HEAD}arrivals:\n  - at: 0s\n    pods: many\n    requests: {{cpu: lots}}\n    runTime: 10x\n  \
         - {{at: 1s, requests: {{cpu: \"1\"}}, required: aisle, runTime: 1s}}\n  \
         - {{at: 1s, pods: 3, requests: {{cpu: \"1\"}}, slice: {{level: host, size: 2}}, runTime: 1s}}\n  \
         - {{at: 1s, kind: Pod, pods: 2, requests: {{cpu: \"1\"}}, runTime: 0s}}\n  \
         - {{at: 1s, requests: {{cpu: \"1\"}}}}\n"
    );
    let got = problems(load(&text).unwrap_err());
    assert_eq!(
        got,
        [
            "t.yaml:9: arrivals[0].pods: pods \"many\" is not a whole number",
            "t.yaml:10: arrivals[0].requests.cpu: request cpu=\"lots\": invalid quantity \"lots\": expected a number with an optional suffix (e.g. 500m, 2, 1.5Gi)",
            "t.yaml:11: arrivals[0].runTime: invalid duration \"10x\": unknown unit (expected e.g. 30s, 5m, 1h30m, 1.5s, 250ms)",
            "t.yaml:12: arrivals[1].required: unknown level \"aisle\": the cluster's levels are block, rack, hostname",
            "t.yaml:13: arrivals[2].slice.size: slice size 2 does not divide pods 3",
            "t.yaml:14: arrivals[3].pods: a Pod arrival has exactly 1 pod, not 2 (use PodGroup or Job for more)",
            "t.yaml:14: arrivals[3].runTime: runTime must be positive",
            "t.yaml:15: arrivals[4]: runTime is required",
        ]
    );
}

#[test]
fn structural_errors_carry_line_and_column() {
    let e = load(&format!("{HEAD}arrivals:\n  - {{at: 0s, runTim: 1s}}\n")).unwrap_err();
    let TraceError::Yaml { line, message, .. } = &e else { panic!("{e}") };
    assert_eq!(*line, 8, "the arrival's line (HEAD is 6 lines, `arrivals:` line 7)");
    assert!(message.contains("runTim"), "{message}");
    assert!(e.to_string().starts_with("t.yaml:8:"), "{e}");
}

#[test]
fn trace_level_problems() {
    let text = "name: t\ncluster:\n  generate:\n    levels: [rack, rack]\n    fanout: [2]\n    allocatable: {cpu: \"-1\"}\n\
                scheduler:\n  featureGates: {NoSuchGate: true}\nsampleInterval: soon\n";
    let got = problems(load(text).unwrap_err());
    assert_eq!(
        got,
        [
            "t.yaml:4: cluster.generate.fanout: 1 entries for 2 levels",
            "t.yaml:4: cluster.generate.levels: level \"rack\" is listed twice",
            "t.yaml:4: cluster.generate.allocatable.cpu: \"-1\" is negative",
            "t.yaml:4: cluster.generate.allocatable.pods: missing: give the pod slots of a node (e.g. \"110\")",
            "t.yaml: scheduler.featureGates.NoSuchGate: unknown feature gate \"NoSuchGate\" (known: GenericWorkload, GangScheduling, TopologyAwareWorkloadScheduling, WorkloadAwarePreemption, WorkloadWithJob, DRAWorkloadResourceClaims, DRAPartitionableDevices, DRAConsumableCapacity, DRADeviceBindingConditions, TopologyAwareWorkloadPreemption, TASProfileMixed, TASProfileBestFit, TASProfileLeastFreeCapacity, TASBalancedPlacement, TASMultiLayerTopology, TASRespectNodeAffinityPreferred, TASFailedNodeReplacement, TASFailedNodeReplacementFailFast, TASReplaceNodeOnNodeTaints, TASReplaceNodeOnPodTermination, TASReplaceNodeDueToNotReadyOverFixedTime)",
            "t.yaml:9: sampleInterval: invalid duration \"soon\": expected a number (expected e.g. 30s, 5m, 1h30m, 1.5s, 250ms)",
            "t.yaml: arrivals: the trace has no arrivals (arrivals or arrivalsCsv)",
        ]
    );
}

#[test]
fn duplicate_names_point_at_the_first() {
    let got = problems(
        load(&format!(
            "{HEAD}arrivals:\n  - {{name: a, at: 0s, requests: {{cpu: \"1\"}}, runTime: 1s}}\n  - {{name: a, at: 1s, requests: {{cpu: \"1\"}}, runTime: 1s}}\n  \
             - {{name: Bad_Name, at: 1s, requests: {{cpu: \"1\"}}, runTime: 1s}}\n"
        ))
        .unwrap_err(),
    );
    // HEAD is 6 lines, `arrivals:` line 7: the arrivals are on lines 8, 9 and 10.
    assert_eq!(got[0], "t.yaml:9: arrivals[1].name: duplicate name \"a\" (first on line 8)");
    assert!(got[1].starts_with("t.yaml:10: arrivals[2].name: invalid name \"Bad_Name\""), "{}", got[1]);
}

#[test]
fn csv_arrivals_load_like_yaml_ones() {
    let csv = "# arrivals\nname,at,kind,pods,cpu,gpu,requests,required,preferred,sliceLevel,sliceSize,priority,runTime,class\n\
               g1,0s,PodGroup,4,2,1,example.com/nic=1,rack,,,,10,5m,\"train, small\"\n\
               \n\
               p1,1s,Pod,,500m,,,,,,,,30s,\n\
               j1,2s,Job,4,1,,,,rack,hostname,2,,1m,\n";
    let t = load_str(&format!("{HEAD}arrivalsCsv: a.csv\n"), "t.yaml", with_csv(csv)).unwrap();
    assert_eq!(t.arrivals.len(), 3);
    let g = &t.arrivals[0];
    assert_eq!(
        (g.name.as_str(), g.pods, g.priority, g.run_ms, g.class.as_str()),
        ("g1", 4, 10, 300_000, "train, small")
    );
    assert_eq!(g.requests.keys().collect::<Vec<_>>(), ["cpu", "example.com/nic", "nvidia.com/gpu"]);
    assert_eq!(g.topology.required, Some(1));
    assert_eq!(
        t.arrivals[2].topology,
        TopologyAsk { preferred: Some(1), slice: Some((2, 2)), required: None }
    );
}

#[test]
fn csv_problems_name_the_csv_file_line_and_column() {
    let csv = "name,at,pods,cpu,runTime\nok,0s,1,1,1s\nbad,later,0,1,1s\n";
    let got =
        problems(load_str(&format!("{HEAD}arrivalsCsv: a.csv\n"), "t.yaml", with_csv(csv)).unwrap_err());
    assert_eq!(
        got,
        [
            "a.csv:3: column at: invalid duration \"later\": expected a number (expected e.g. 30s, 5m, 1h30m, 1.5s, 250ms)",
            "a.csv:3: column pods: pods 0 is out of range: expected 1 to 10000",
        ]
    );
    let bad_header = "at,pods,color,runTime\n";
    let got = problems(
        load_str(&format!("{HEAD}arrivalsCsv: a.csv\n"), "t.yaml", with_csv(bad_header)).unwrap_err(),
    );
    assert_eq!(got.len(), 1);
    assert!(got[0].starts_with("a.csv:1: column color: unknown column (known: name, at,"), "{}", got[0]);
    let ragged = "at,runTime\n0s\n";
    let got =
        problems(load_str(&format!("{HEAD}arrivalsCsv: a.csv\n"), "t.yaml", with_csv(ragged)).unwrap_err());
    assert_eq!(got, ["a.csv:2: 1 fields, the header has 2"]);
    let quote = "at,runTime\n\"0s,1s\n";
    let got =
        problems(load_str(&format!("{HEAD}arrivalsCsv: a.csv\n"), "t.yaml", with_csv(quote)).unwrap_err());
    assert_eq!(got, ["a.csv:2: unterminated quote"]);
    let no_runtime = "at,pods\n0s,1\n";
    let got = problems(
        load_str(&format!("{HEAD}arrivalsCsv: a.csv\n"), "t.yaml", with_csv(no_runtime)).unwrap_err(),
    );
    assert_eq!(got, ["a.csv:1: column runTime: missing from the header"]);
}

#[test]
fn csv_quotes_follow_rfc_4180() {
    assert_eq!(split_csv_line(r#"a,"b,c","d""e",,"#).unwrap(), ["a", "b,c", "d\"e", "", ""]);
    assert!(split_csv_line(r#"a"b"#).is_err());
}

#[test]
fn missing_csv_file_is_reported_at_the_field() {
    let got = problems(
        load_str(&format!("{HEAD}arrivalsCsv: nope.csv\n"), "t.yaml", |_| {
            Err(TraceError::Io {
                file: PathBuf::from("nope.csv"),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
            })
        })
        .unwrap_err(),
    );
    assert_eq!(got, ["t.yaml:7: arrivalsCsv: nope.csv: No such file or directory"]);
}

#[test]
fn written_traces_load_back_identical() {
    let t = load(&format!(
        "{HEAD}sampleInterval: 10s\narrivals:\n  \
         - {{name: a, at: 90s, pods: 4, minCount: 2, requests: {{cpu: 500m, nvidia.com/gpu: 2}}, required: rack, runTime: 1h30m, priority: 5}}\n  \
         - {{name: b, at: 1500ms, kind: Job, pods: 4, requests: {{memory: 1Gi}}, preferred: rack, slice: {{level: host, size: 2}}, runTime: 1s, class: x}}\n"
    ))
    .unwrap();
    let back = load(&to_yaml(&t)).unwrap();
    assert_eq!(back.arrivals, t.arrivals);
    assert_eq!(back.cluster, t.cluster);
    assert_eq!(back.sample_interval_ms, t.sample_interval_ms);
}

#[test]
fn durations_are_written_in_the_largest_exact_unit() {
    assert_eq!(fmt_duration(90_000), "90s");
    assert_eq!(fmt_duration(7_200_000), "2h");
    assert_eq!(fmt_duration(1_500), "1500ms");
    assert_eq!(fmt_duration(0), "0ms");
}

#[test]
fn levels_resolve_by_key_and_short_names() {
    let c = Cluster {
        spec: GenerateSpec {
            levels: vec!["cloud.provider.com/topology-rack".into(), "kubernetes.io/hostname".into()],
            fanout: vec![1, 1],
            allocatable: BTreeMap::new(),
            labels: BTreeMap::new(),
        },
    };
    for (name, want) in [
        ("cloud.provider.com/topology-rack", Some(0)),
        ("topology-rack", Some(0)),
        ("rack", Some(0)),
        ("host", Some(1)),
        ("hostname", Some(1)),
        ("block", None),
    ] {
        assert_eq!(c.level_index(name), want, "{name}");
    }
    assert_eq!(c.short_name(0), "rack");
}
