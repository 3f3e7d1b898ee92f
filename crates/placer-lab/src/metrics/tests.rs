use super::*;
use crate::trace::{ArrivalKind, TopologyAsk};

fn gpu_node(gpus: i64) -> Res {
    Res { cpu_milli: 64_000, memory: 1 << 40, gpu: gpus, pods: 110 }
}

fn pod(gpus: i64) -> Res {
    Res { cpu_milli: 1_000, memory: 1 << 30, gpu: gpus, pods: 1 }
}

#[test]
fn utilisation_is_integrated_exactly_over_virtual_time() {
    let mut u = Usage::new(vec![gpu_node(8), gpu_node(8)]);
    u.take(0, &pod(8), 0); // half the GPUs from 0 to 100
    u.take(1, &pod(4), 50); // a quarter more from 50 to 100
    u.release(0, &pod(8), 100);
    u.release(1, &pod(4), 100);
    let avg = u.average(200);
    // GPU-ms: 8*100 + 4*50 = 1000 over 16 GPUs x 200 ms.
    assert!((avg[2] - 1000.0 / 3200.0).abs() < 1e-12, "{avg:?}");
    assert_eq!(u.now(Device::Gpu), 0.0);
    assert_eq!(u.total_used, Res::default());
}

#[test]
fn stranded_capacity_counts_free_devices_of_partly_used_hosts_and_racks() {
    // Racks r0 = {n0, n1}, r1 = {n2, n3}; 8 GPUs each.
    let mut u = Usage::new(vec![gpu_node(8); 4]);
    u.take(0, &pod(6), 0); // n0: 2 free, partly used
    u.take(1, &pod(8), 0); // n1: full
    let domains = vec![vec![0, 0, 1, 1], vec![0, 1, 2, 3]];
    let shape = GangShape { pods: 2, per_pod: pod(4), level: Some(0) };
    let f = Fragmentation::measure(&u, Device::Gpu, &domains, Some(0), Some(&shape));
    assert_eq!(f.free, 2 + 16);
    assert_eq!(f.stranded_hosts, 2);
    assert_eq!(f.stranded_racks, 2, "r0 is partly used, r1 is empty");
    // A median gang (2 x 4 GPUs in one rack): r1 holds 4 copies -> 2 gangs; r0 none.
    assert_eq!((f.median_gangs, f.median_gang_devices), (2, 16));
    assert!((f.unusable_share() - 2.0 / 18.0).abs() < 1e-12);
    assert!((f.stranded_hosts_share() - 2.0 / 18.0).abs() < 1e-12);
}

#[test]
fn median_gang_shape_and_percentiles() {
    let arrival = |pods: u32, gpus: i64| crate::trace::Arrival {
        name: format!("g{pods}x{gpus}"),
        at_ms: 0,
        kind: ArrivalKind::PodGroup,
        pods,
        min_count: pods,
        requests: Default::default(),
        res: pod(gpus),
        topology: TopologyAsk { required: Some(1), ..TopologyAsk::default() },
        priority: 0,
        run_ms: 1,
        class: String::new(),
    };
    let arrivals = vec![arrival(2, 8), arrival(8, 8), arrival(4, 2), arrival(1, 8)];
    let m = GangShape::median(&arrivals, Device::Gpu).unwrap();
    // Gangs by GPUs: 4x2 = 8, 2x8 = 16, 8x8 = 64 (the single pod is not a gang).
    assert_eq!((m.pods, m.per_pod.gpu, m.level), (2, 8, Some(1)));
    assert_eq!(Device::for_arrivals(&arrivals), Device::Gpu);
    assert_eq!(percentile(&[3.0, 1.0, 2.0, 4.0], 50.0), Some(2.0));
    assert_eq!(percentile(&[], 50.0), None);
    assert_eq!(mean(&[1.0, 2.0]), Some(1.5));
}
