//! The API machinery's name and label checks (`k8s.io/apimachinery/pkg/util/validation`),
//! with its messages: DNS labels and subdomains, qualified names (label keys), label values.
//! The store's validation and the engine's selectors both use them.

const DNS_LABEL_MAX: usize = 63;
const DNS_SUBDOMAIN_MAX: usize = 253;
const LABEL_VALUE_MAX: usize = 63;

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// RFC 1123 label: at most 63 lowercase letters, digits or '-', alphanumeric at both ends.
pub fn check_dns_label(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    if b.len() > DNS_LABEL_MAX {
        return Err(format!("must be no more than {DNS_LABEL_MAX} characters"));
    }
    let ok = !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && alnum(b[0])
        && alnum(b[b.len() - 1]);
    if ok {
        Ok(())
    } else {
        Err("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character".to_string())
    }
}

/// RFC 1123 subdomain: at most 253 characters, dot-separated lowercase labels.
pub fn check_dns_subdomain(s: &str) -> Result<(), String> {
    check_subdomain(s, false)
}

/// A subdomain, or (`prefix`) a `generateName` prefix, which may end with '-' or '.'.
pub fn check_subdomain(s: &str, prefix: bool) -> Result<(), String> {
    let b = s.as_bytes();
    if b.len() > DNS_SUBDOMAIN_MAX {
        return Err(format!("must be no more than {DNS_SUBDOMAIN_MAX} characters"));
    }
    let last_ok = |c: u8| alnum(c) || (prefix && (c == b'-' || c == b'.'));
    let ok = !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
        && alnum(b[0])
        && last_ok(b[b.len() - 1])
        && !s.contains("..")
        && !s.contains(".-")
        && !s.contains("-.");
    if ok {
        Ok(())
    } else {
        Err("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_string())
    }
}

fn name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= LABEL_VALUE_MAX
        && b.iter().all(|c| alnum(*c) || matches!(c, b'-' | b'_' | b'.'))
        && alnum(b[0])
        && alnum(b[b.len() - 1])
}

/// A qualified name (label key, annotation key, scheduling gate): `[prefix/]name`, the
/// prefix a DNS subdomain, the name at most 63 characters of `[A-Za-z0-9-_.]` with
/// alphanumeric ends.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Err("prefix part must be non-empty".to_string());
        }
        if let Err(e) = check_dns_subdomain(p) {
            return Err(format!("prefix part {e}"));
        }
    }
    if name.len() > LABEL_VALUE_MAX {
        return Err(format!("name part must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if name_part_ok(name) {
        Ok(())
    } else {
        Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc'), with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string())
    }
}

/// A label value: empty, or at most 63 characters of `[A-Za-z0-9-_.]` with alphanumeric ends.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.len() > LABEL_VALUE_MAX {
        return Err(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if value.is_empty() || name_part_ok(value) {
        Ok(())
    } else {
        Err("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".to_string())
    }
}
