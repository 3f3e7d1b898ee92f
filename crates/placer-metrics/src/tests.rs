use super::*;

fn metrics() -> Metrics {
    Metrics::new("placer", Clock::Frozen)
}

#[test]
fn buckets_are_upstreams() {
    assert_eq!(LATENCY_BUCKETS.bounds().first(), Some(&0.001));
    assert_eq!(LATENCY_BUCKETS.bounds().len(), 15);
    assert!((LATENCY_BUCKETS.bounds()[14] - 16.384).abs() < 1e-9);
    assert_eq!(E2E_BUCKETS.bounds().len(), 20);
    assert_eq!(ATTEMPT_BUCKETS.bounds(), vec![1.0, 2.0, 4.0, 8.0, 16.0]);
    assert_eq!(PLUGIN_BUCKETS.bounds().len(), 20);
}

#[test]
fn every_family_has_help_and_type_once_it_has_a_sample() {
    let m = metrics();
    let text = m.render();
    // Families without labels are exposed from the start (as upstream's plain metrics).
    assert!(text.contains("scheduler_scheduling_algorithm_duration_seconds_count 0"), "{text}");
    assert!(text.contains("scheduler_preemption_attempts_total 0"), "{text}");
    let mut o = m.observer();
    for spec in SCHEDULER_FAMILIES {
        match spec.kind {
            FamilyKind::Counter => o.count(spec.name, &[("result", "x")], 1),
            FamilyKind::Gauge => o.gauge(spec.name, &[("queue", "active")], 1.0),
            FamilyKind::Histogram(_) => o.observe(spec.name, &[("result", "x")], 1.0),
        }
    }
    let text = m.render();
    for spec in SCHEDULER_FAMILIES {
        let reg = registered_name(spec.name, &spec.kind);
        assert!(text.contains(&format!("# HELP {reg} ")), "no HELP for {reg}:\n{text}");
        assert!(text.contains(&format!("# TYPE {reg} ")), "no TYPE for {reg}");
    }
    assert!(text.trim_end().ends_with("# EOF"));
    assert!(!text.contains("{}"), "no empty label sets:\n{text}");
}

#[test]
fn the_observer_adds_the_profile_where_upstream_has_it() {
    let m = metrics();
    let mut o = m.observer();
    o.count(PODGROUP_SCHEDULE_ATTEMPTS, &[("result", "scheduled")], 2);
    o.observe(PODGROUP_SCHEDULING_ATTEMPT_DURATION, &[("result", "scheduled")], 0.003);
    o.observe(PODGROUP_SCHEDULING_ALGORITHM_DURATION, &[], 0.002);
    o.count(PLACEMENT_EVALUATIONS, &[("result", "feasible")], 1);
    assert_eq!(
        m.sample("scheduler_podgroup_schedule_attempts_total{result=\"scheduled\",profile=\"placer\"}"),
        Some(2.0)
    );
    assert_eq!(
        m.sample("scheduler_podgroup_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"placer\"}"),
        Some(1.0)
    );
    assert_eq!(
        m.sample(
            "scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{le=\"0.004\",result=\"scheduled\",profile=\"placer\"}"
        ),
        Some(1.0),
    );
    assert_eq!(m.sample("scheduler_podgroup_scheduling_algorithm_duration_seconds_count"), Some(1.0));
    assert_eq!(
        m.sample("scheduler_placement_evaluations_total{result=\"feasible\",profile=\"placer\"}"),
        Some(1.0)
    );
}

#[test]
fn preemption_is_reported_as_upstream_splits_it() {
    let m = metrics();
    let mut o = m.observer();
    o.count(PREEMPTION_ATTEMPTS, &[("kind", "pod")], 1);
    o.count(PREEMPTION_ATTEMPTS, &[("kind", "podgroup")], 1);
    o.observe(PREEMPTION_VICTIMS, &[("kind", "pod")], 2.0);
    o.observe(PREEMPTION_VICTIMS, &[("kind", "podgroup")], 30.0);
    assert_eq!(m.sample("scheduler_preemption_attempts_total"), Some(2.0));
    assert_eq!(m.sample("scheduler_preemption_victims_count"), Some(1.0));
    assert_eq!(m.sample("scheduler_workload_preemption_victims_count"), Some(1.0));
}

#[test]
fn gauges_are_set_and_unknown_names_dropped() {
    let m = metrics();
    let mut o = m.observer();
    o.gauge(PENDING_PODS, &[("queue", "active")], 3.0);
    o.gauge(PENDING_PODS, &[("queue", "active")], 2.0);
    o.count("no_such_metric_total", &[], 1);
    assert_eq!(m.sample("scheduler_pending_pods{queue=\"active\"}"), Some(2.0));
    assert!(!m.render().contains("no_such_metric"));
}

#[test]
fn frozen_clocks_measure_zero_and_wall_clocks_measure() {
    let mut frozen = metrics().observer();
    let t = frozen.start_timer();
    assert_eq!(frozen.elapsed_seconds(t), 0.0);
    let mut wall = Metrics::new("p", Clock::Wall).observer();
    let t = wall.start_timer();
    assert!(wall.elapsed_seconds(t) >= 0.0);
    assert_eq!(wall.elapsed_seconds(t), 0.0, "a token is read once");
}

#[test]
fn homes_register_their_own_families_in_the_same_exposition() {
    let mut b = MetricsBuilder::new();
    let extra = CounterFamily::default();
    b.registry_mut().register("placer_api_requests", "API requests.", extra.clone());
    let m = b.build("placer", Clock::Frozen);
    extra.get_or_create(&vec![("verb", "bind".to_string())]).inc();
    let text = m.render();
    assert!(text.contains("# HELP placer_api_requests API requests."));
    assert!(text.contains("placer_api_requests_total{verb=\"bind\"} 1"));
    assert!(text.contains("# HELP scheduler_scheduling_algorithm_duration_seconds "));
}

#[test]
fn the_exposition_is_the_same_for_the_same_observations() {
    let render = || {
        let m = metrics();
        let mut o = m.observer();
        for q in ["active", "backoff", "unschedulable", "gated"] {
            for t in ["pod", "podgroup"] {
                o.gauge(PENDING_ENTITIES, &[("queue", q), ("type", t)], 1.0);
            }
        }
        for r in ["feasible", "infeasible"] {
            o.observe(PLACEMENT_EVALUATION_DURATION, &[("result", r)], 0.01);
        }
        m.render()
    };
    let first = render();
    for _ in 0..5 {
        assert_eq!(render(), first);
    }
    let active = first.find("scheduler_pending_entities{queue=\"active\",type=\"pod\"}").unwrap();
    let gated = first.find("scheduler_pending_entities{queue=\"gated\",type=\"pod\"}").unwrap();
    assert!(active < gated, "sorted by labels");
    // A histogram series keeps its lines together: sum, count, then the buckets in order.
    let feasible = &first[first.find("_sum{result=\"feasible\"").unwrap()..];
    let next = feasible.find("_sum{result=\"infeasible\"").unwrap();
    assert!(feasible[..next].contains("le=\"+Inf\",result=\"feasible\""), "{first}");
}
