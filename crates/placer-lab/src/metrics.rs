//! What a replay measures, as pure functions of what it observed: resource use per node
//! over time, wait times, domains spanned, fragmentation.
//!
//! * **Utilisation** of a resource: allocated (requests of pods bound and not finished)
//!   over allocatable, integrated exactly over virtual time ([`Usage`]), averaged over the
//!   loaded period (time 0 to the last arrival) and over the whole run (to the last
//!   completion, or the horizon).
//! * **Wait** of a workload: from its arrival to the moment its `minCount` pods were
//!   first all bound. Percentiles by the nearest-rank method over the workloads that
//!   started.
//! * **Domains per gang**: distinct domains of each level the gang's pods were bound to
//!   when it started.
//! * **Fragmentation**, at every sample, of the trace's device (GPUs, or cpu when no
//!   arrival requests GPUs):
//!   - stranded in hosts: free devices on nodes that are partly used (some but not all of
//!     their devices allocated), as a share of all free devices;
//!   - stranded in racks: the same one level up (free devices in racks that are partly
//!     used);
//!   - median gangs placeable: how many more gangs shaped like the trace's median gang
//!     (its pods, per-pod requests and required level) the free capacity could still hold,
//!     counted domain by domain; and the share of free devices those gangs would use
//!     ("usable"), whose complement is the fragmentation rate in the spirit of Alibaba's
//!     FGD paper (free GPUs the typical task cannot use).

use serde::Serialize;

use crate::trace::{Arrival, Res};

/// Which resource fragmentation is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Device {
    Gpu,
    Cpu,
}

impl Device {
    pub fn of(r: &Res, d: Device) -> i64 {
        match d {
            Device::Gpu => r.gpu,
            Device::Cpu => r.cpu_milli,
        }
    }

    /// GPUs when any arrival requests one, else cpu.
    pub fn for_arrivals(arrivals: &[Arrival]) -> Device {
        if arrivals.iter().any(|a| a.res.gpu > 0) {
            Device::Gpu
        } else {
            Device::Cpu
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Device::Gpu => "GPU",
            Device::Cpu => "CPU",
        }
    }
}

/// Allocatable and allocated resources per node, with the time integral of the
/// cluster-wide allocation.
#[derive(Debug, Clone)]
pub struct Usage {
    pub alloc: Vec<Res>,
    pub used: Vec<Res>,
    pub total_alloc: Res,
    pub total_used: Res,
    last_ms: u64,
    /// Integral of `total_used` over time (resource x ms), per resource.
    integral: [f64; 4],
}

impl Usage {
    pub fn new(alloc: Vec<Res>) -> Usage {
        let mut total_alloc = Res::default();
        for a in &alloc {
            total_alloc.add(a);
        }
        let used = vec![Res::default(); alloc.len()];
        Usage { alloc, used, total_alloc, total_used: Res::default(), last_ms: 0, integral: [0.0; 4] }
    }

    /// Moves the integral forward to `t_ms` (earlier times are ignored).
    pub fn advance(&mut self, t_ms: u64) {
        if t_ms > self.last_ms {
            let dt = (t_ms - self.last_ms) as f64;
            let u = &self.total_used;
            for (acc, v) in self.integral.iter_mut().zip([u.cpu_milli, u.memory, u.gpu, u.pods]) {
                *acc += v as f64 * dt;
            }
            self.last_ms = t_ms;
        }
    }

    /// A pod with requests `r` starts holding node `node` at `t_ms`.
    pub fn take(&mut self, node: usize, r: &Res, t_ms: u64) {
        self.advance(t_ms);
        self.used[node].add(r);
        self.total_used.add(r);
    }

    /// The pod's requests are released at `t_ms`.
    pub fn release(&mut self, node: usize, r: &Res, t_ms: u64) {
        self.advance(t_ms);
        self.used[node].sub(r);
        self.total_used.sub(r);
    }

    /// Average utilisation (0..=1) of (cpu, memory, gpu, pods) over `[0, end_ms]`; a
    /// resource without allocatable gives 0.
    pub fn average(&mut self, end_ms: u64) -> [f64; 4] {
        self.advance(end_ms);
        let a = &self.total_alloc;
        let mut out = [0.0; 4];
        for (i, alloc) in [a.cpu_milli, a.memory, a.gpu, a.pods].into_iter().enumerate() {
            if alloc > 0 && end_ms > 0 {
                out[i] = self.integral[i] / (alloc as f64 * end_ms as f64);
            }
        }
        out
    }

    /// Current utilisation of one resource (0..=1).
    pub fn now(&self, d: Device) -> f64 {
        let alloc = Device::of(&self.total_alloc, d);
        if alloc > 0 {
            Device::of(&self.total_used, d) as f64 / alloc as f64
        } else {
            0.0
        }
    }
}

/// The shape fragmentation is measured against: the median gang of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GangShape {
    pub pods: u32,
    pub per_pod: Res,
    /// Level every pod must share (`None`: anywhere).
    pub level: Option<usize>,
}

impl GangShape {
    /// The gang at the median of (pods x per-pod device) among the trace's gangs, with
    /// its required level (or preferred, the level it would ideally get). `None` without
    /// gangs.
    pub fn median(arrivals: &[Arrival], d: Device) -> Option<GangShape> {
        let mut gangs: Vec<&Arrival> = arrivals.iter().filter(|a| a.is_gang()).collect();
        if gangs.is_empty() {
            return None;
        }
        gangs.sort_by_key(|a| (i64::from(a.pods) * Device::of(&a.res, d), a.pods));
        let m = gangs[(gangs.len() - 1) / 2];
        Some(GangShape { pods: m.pods, per_pod: m.res, level: m.topology.required.or(m.topology.preferred) })
    }
}

/// Fragmentation at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Fragmentation {
    /// Free devices in the cluster.
    pub free: i64,
    /// Free devices on partly used nodes.
    pub stranded_hosts: i64,
    /// Free devices in partly used domains of the level above the nodes.
    pub stranded_racks: i64,
    /// Median gangs the free capacity still holds.
    pub median_gangs: i64,
    /// Devices those gangs would take.
    pub median_gang_devices: i64,
}

impl Fragmentation {
    /// Measures `u` for device `d`. `domains[l][n]` is the domain (index) of node `n` at
    /// level `l`, coarsest first; the lowest level is taken as "the level above the
    /// nodes" when it is not per node. `shape`: the median gang.
    pub fn measure(
        u: &Usage,
        d: Device,
        domains: &[Vec<u32>],
        rack_level: Option<usize>,
        shape: Option<&GangShape>,
    ) -> Fragmentation {
        let mut f = Fragmentation::default();
        for (alloc, used) in u.alloc.iter().zip(&u.used) {
            let (a, x) = (Device::of(alloc, d), Device::of(used, d));
            let free = (a - x).max(0);
            f.free += free;
            if x > 0 && free > 0 {
                f.stranded_hosts += free;
            }
        }
        if let Some(l) = rack_level {
            let ids = &domains[l];
            let n = ids.iter().map(|&i| i as usize + 1).max().unwrap_or(0);
            let mut alloc = vec![0i64; n];
            let mut used = vec![0i64; n];
            for (i, &dom) in ids.iter().enumerate() {
                alloc[dom as usize] += Device::of(&u.alloc[i], d);
                used[dom as usize] += Device::of(&u.used[i], d);
            }
            f.stranded_racks =
                alloc.iter().zip(&used).filter(|(a, x)| **x > 0 && **a > **x).map(|(a, x)| a - x).sum();
        }
        if let Some(s) = shape {
            let per_node: Vec<i64> = u
                .alloc
                .iter()
                .zip(&u.used)
                .map(|(a, x)| {
                    let mut free = *a;
                    free.sub(x);
                    free.copies(&s.per_pod)
                })
                .collect();
            let pods = i64::from(s.pods.max(1));
            f.median_gangs = match s.level {
                None => per_node.iter().sum::<i64>() / pods,
                Some(l) => {
                    let ids = &domains[l];
                    let n = ids.iter().map(|&i| i as usize + 1).max().unwrap_or(0);
                    let mut fit = vec![0i64; n];
                    for (i, &dom) in ids.iter().enumerate() {
                        fit[dom as usize] += per_node[i];
                    }
                    fit.iter().map(|c| c / pods).sum()
                }
            };
            f.median_gang_devices = f.median_gangs * pods * Device::of(&s.per_pod, d);
        }
        f
    }

    /// Share of free devices on partly used nodes (0 with nothing free).
    pub fn stranded_hosts_share(&self) -> f64 {
        ratio(self.stranded_hosts, self.free)
    }

    /// Share of free devices in partly used racks.
    pub fn stranded_racks_share(&self) -> f64 {
        ratio(self.stranded_racks, self.free)
    }

    /// Share of free devices the median gangs cannot use (1 - usable / free).
    pub fn unusable_share(&self) -> f64 {
        if self.free <= 0 {
            0.0
        } else {
            1.0 - ratio(self.median_gang_devices.min(self.free), self.free)
        }
    }
}

fn ratio(a: i64, b: i64) -> f64 {
    if b <= 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Nearest-rank percentile of unsorted `values` (`None` when empty).
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    placer_bench::stats::percentile(&v, p)
}

/// Mean of `values` (`None` when empty).
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests;
