//! Resident memory of this process, from `/proc/self/status` (Linux). Elsewhere every
//! reading is `None` and reports print "n/a".

/// Reads a `kB` field (e.g. `VmHWM`) of `/proc/self/status`, in bytes.
fn status_field(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_field(&status, field)
}

/// The value of `field` in a `/proc/<pid>/status` text, in bytes (the file gives kB).
pub fn parse_status_field(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let kb: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        kb.checked_mul(1024)
    })
}

/// Peak resident set size (`VmHWM`) since the process started or since the last
/// successful [`reset_peak`].
pub fn peak_rss() -> Option<u64> {
    status_field("VmHWM")
}

/// Current resident set size (`VmRSS`).
pub fn current_rss() -> Option<u64> {
    status_field("VmRSS")
}

/// Resets the peak to the current resident size (writes `5` to `/proc/self/clear_refs`,
/// Linux 4.0+), so the next [`peak_rss`] covers only what runs from now on. Returns
/// whether it worked. Memory the allocator kept from earlier work still counts as
/// resident.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `bytes` as MiB with one decimal, or "n/a".
pub fn format_bytes(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
        None => "n/a".to_string(),
    }
}

/// `bytes` as KiB with one decimal (per-node and per-pod figures), or "n/a".
pub fn format_kib(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{:.1} KiB", b as f64 / 1024.0),
        None => "n/a".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_parse_in_bytes() {
        let text = "Name:\tplacer\nVmPeak:\t  200 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_status_field(text, "VmHWM"), Some(1234 * 1024));
        assert_eq!(parse_status_field(text, "VmRSS"), Some(1000 * 1024));
        assert_eq!(parse_status_field(text, "VmSwap"), None);
        assert_eq!(parse_status_field("VmHWM:\tlots kB\n", "VmHWM"), None);
    }

    #[test]
    fn bytes_format_as_mib_or_na() {
        assert_eq!(format_bytes(Some(3 * 1024 * 1024 / 2)), "1.5 MiB");
        assert_eq!(format_bytes(None), "n/a");
        assert_eq!(format_kib(Some(1536)), "1.5 KiB");
        assert_eq!(format_kib(None), "n/a");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_peak() {
        let peak = peak_rss().expect("VmHWM on Linux");
        let rss = current_rss().expect("VmRSS on Linux");
        assert!(peak >= rss / 2 && peak > 0);
    }
}
