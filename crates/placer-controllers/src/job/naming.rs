//! Names of the Workload and PodGroup the Job controller creates (seed 001 "Naming
//! Conventions"; exact v1.36 rules in SEMANTICS §14).
//!
//! Names are for humans only: discovery never relies on them (see [`super::gang`]).
//!
//! * `hash32` is FNV-1a 32 bit.
//! * The hash text is the decimal value of the hash with every character mapped through
//!   [`safe_encode`] (the `SafeEncodeString` alphabet of apimachinery), so it holds no
//!   vowels and never spells words; it is at most 10 characters long.
//! * Workload: `<job-name>-<hash>`, the Job name cut to fit 253 characters.
//! * PodGroup: `<workload>-<template>-<hash>`, both parts cut by the fair-share rule of
//!   [`pod_group_name`].

/// Longest name of a DNS-1123 subdomain (Workload and PodGroup names).
pub const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;

/// Longest DNS-1123 label (pod hostnames, generateName prefixes of indexed pods).
pub const DNS1123_LABEL_MAX_LEN: usize = 63;

/// The alphabet of apimachinery's `SafeEncodeString`: no vowels, no look-alikes.
const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// FNV-1a, 32 bit, over the concatenation of `parts` (no separator).
pub fn fnv1a32(parts: &[&[u8]]) -> u32 {
    let mut hash = FNV32_OFFSET;
    for part in parts {
        for &b in *part {
            hash ^= u32::from(b);
            hash = hash.wrapping_mul(FNV32_PRIME);
        }
    }
    hash
}

/// apimachinery `rand.SafeEncodeString`: each byte `c` becomes `ALPHABET[c % 27]`.
/// Decimal digits map as `0123456789` -> `456789bcdf`.
pub fn safe_encode(s: &str) -> String {
    s.bytes().map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()])).collect()
}

/// The hash text of a 32-bit hash: decimal digits, safe-encoded.
pub fn hash_text(hash: u32) -> String {
    safe_encode(&hash.to_string())
}

/// The bytes upstream hashes for the Workload name: `DeepHashObject(job.UID)` prints the
/// UID with go-spew's `%#v` (`Indent " "`, `SortKeys`, `DisableMethods`, `SpewKeys`). For a
/// value of the string type `types.UID` spew writes the type in parentheses followed by
/// the raw, unquoted string: `(types.UID)<uid>`.
///
/// This was derived from reading go-spew's `format.go` (no Go toolchain here to check it
/// against a live controller); if the derivation were wrong, only the hash part of the
/// name would differ, and names are never used for discovery.
pub fn workload_hash_input(job_uid: &str) -> String {
    format!("(types.UID){job_uid}")
}

/// Name of the Workload for a Job: `<job-name>-<hash(uid)>`, the Job name cut so the whole
/// name fits 253 characters.
pub fn workload_name(job_name: &str, job_uid: &str) -> String {
    let hash = hash_text(fnv1a32(&[workload_hash_input(job_uid).as_bytes()]));
    let max_prefix = DNS1123_SUBDOMAIN_MAX_LEN - hash.len() - 1;
    format!("{}-{hash}", truncate(job_name, max_prefix))
}

/// Name of the single PodGroup template of a Job's Workload: `<job-name>-pgt-0`.
pub fn pod_group_template_name(job_name: &str) -> String {
    format!("{job_name}-pgt-0")
}

/// Name of the PodGroup made from a Workload template:
/// `<workload>-<template>-<hash(workload bytes ++ template bytes)>`.
///
/// With `A = 253 - len(hash) - 2` characters for both names: when they do not fit, and the
/// Workload name fits in half of `A`, the template name is cut to the rest; else if the
/// template name fits in half, the Workload name is cut to the rest; else the Workload name
/// gets `A - A/2` characters and the template name `A/2`.
pub fn pod_group_name(workload_name: &str, template_name: &str) -> String {
    let hash = hash_text(fnv1a32(&[workload_name.as_bytes(), template_name.as_bytes()]));
    let available = DNS1123_SUBDOMAIN_MAX_LEN - hash.len() - 2;
    let (mut wl, mut tpl) = (workload_name, template_name);
    if wl.len() + tpl.len() > available {
        let half = available / 2;
        if wl.len() <= half {
            tpl = truncate(tpl, available - wl.len());
        } else if tpl.len() <= half {
            wl = truncate(wl, available - tpl.len());
        } else {
            wl = truncate(wl, available - half);
            tpl = truncate(tpl, half);
        }
    }
    format!("{wl}-{tpl}-{hash}")
}

/// `generateName` of an Indexed Job's pod: `<job>-<index>-`, the Job name cut so the prefix
/// stays a DNS label (63 characters), as upstream's `podGenerateNameWithIndex`.
pub fn indexed_pod_generate_name(job_name: &str, index: i32) -> String {
    let suffix = format!("-{index}-");
    let prefix = format!("{job_name}{suffix}");
    if prefix.len() > DNS1123_LABEL_MAX_LEN {
        format!("{}{suffix}", truncate(job_name, DNS1123_LABEL_MAX_LEN.saturating_sub(suffix.len())))
    } else {
        prefix
    }
}

/// `generateName` of a NonIndexed Job's pod: `<job>-`.
pub fn pod_generate_name(job_name: &str) -> String {
    format!("{job_name}-")
}

/// Hostname of an Indexed Job's pod: `<job>-<index>`, cut to a DNS label.
pub fn indexed_pod_hostname(job_name: &str, index: i32) -> String {
    let host = format!("{job_name}-{index}");
    truncate(&host, DNS1123_LABEL_MAX_LEN).trim_end_matches('-').to_string()
}

/// The first `max` bytes of `s`, never splitting a character (Kubernetes names are ASCII,
/// so this is a plain byte cut for every valid name).
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a32_matches_the_reference_vectors() {
        // Test vectors of the FNV reference (draft-eastlake-fnv).
        assert_eq!(fnv1a32(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv1a32(&[b"a"]), 0xe40c_292c);
        assert_eq!(fnv1a32(&[b"foobar"]), 0xbf9c_f968);
        // Parts are hashed as one stream, without separator.
        assert_eq!(fnv1a32(&[b"foo", b"bar"]), fnv1a32(&[b"foobar"]));
    }

    #[test]
    fn safe_encode_maps_digits_through_the_apimachinery_alphabet() {
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
        assert_eq!(hash_text(0), "4");
        assert_eq!(hash_text(u32::MAX), "86f8fbc6f9"); // 4294967295
    }

    #[test]
    fn workload_name_is_job_name_dash_hash_of_the_spew_printed_uid() {
        let name = workload_name("train", "uid-123");
        let expected_hash = hash_text(fnv1a32(&[b"(types.UID)uid-123"]));
        assert_eq!(name, format!("train-{expected_hash}"));
        assert!(expected_hash.len() <= 10);
        assert!(expected_hash.bytes().all(|b| SAFE_ALPHABET.contains(&b)));
    }

    #[test]
    fn workload_name_is_deterministic_and_depends_on_the_uid() {
        assert_eq!(workload_name("my-job", "uid-123"), workload_name("my-job", "uid-123"));
        assert_ne!(workload_name("my-job", "uid-123"), workload_name("my-job", "different-uid"));
    }

    #[test]
    fn long_job_names_are_cut_to_fit_253() {
        let long = "a".repeat(300);
        let name = workload_name(&long, "uid-long");
        let hash = hash_text(fnv1a32(&[b"(types.UID)uid-long"]));
        assert_eq!(name, format!("{}-{hash}", "a".repeat(252 - hash.len())));
        assert_eq!(name.len(), 253);
    }

    #[test]
    fn template_name_is_job_name_pgt_0() {
        assert_eq!(pod_group_template_name("my-training-job"), "my-training-job-pgt-0");
        assert_eq!(pod_group_template_name("small-job"), "small-job-pgt-0");
    }

    #[test]
    fn pod_group_name_hashes_workload_then_template_bytes() {
        let name = pod_group_name("my-workload", "my-template");
        let hash = hash_text(fnv1a32(&[b"my-workloadmy-template"]));
        assert_eq!(name, format!("my-workload-my-template-{hash}"));
        assert_ne!(name, pod_group_name("my-workload", "other-template"));
    }

    #[test]
    fn pod_group_name_keeps_a_short_workload_name_whole() {
        let name = pod_group_name("wl", &"t".repeat(250));
        assert!(name.starts_with("wl-ttt"));
        assert_eq!(name.len(), 253);
    }

    #[test]
    fn pod_group_name_keeps_a_short_template_name_whole() {
        let name = pod_group_name(&"w".repeat(250), "tpl");
        let hash = hash_text(fnv1a32(&["w".repeat(250).as_bytes(), b"tpl"]));
        assert!(name.ends_with(&format!("-tpl-{hash}")));
        assert_eq!(name.len(), 253);
    }

    #[test]
    fn pod_group_name_splits_evenly_when_both_are_long() {
        let name = pod_group_name(&"w".repeat(200), &"t".repeat(200));
        let hash = hash_text(fnv1a32(&["w".repeat(200).as_bytes(), "t".repeat(200).as_bytes()]));
        let available = 253 - hash.len() - 2;
        let half = available / 2;
        assert_eq!(name, format!("{}-{}-{hash}", "w".repeat(available - half), "t".repeat(half)));
        assert_eq!(name.len(), 253);
    }

    #[test]
    fn indexed_pod_names_carry_the_index() {
        assert_eq!(indexed_pod_generate_name("train", 3), "train-3-");
        assert_eq!(indexed_pod_hostname("train", 3), "train-3");
        let long = "j".repeat(80);
        let g = indexed_pod_generate_name(&long, 12);
        assert_eq!(g.len(), 63);
        assert!(g.ends_with("-12-"));
        assert_eq!(pod_generate_name("train"), "train-");
    }
}
