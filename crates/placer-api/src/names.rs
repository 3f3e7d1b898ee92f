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

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// apimachinery's `RegexError`: the message, examples and the regex, worded as Go's (the
/// examples end with `', '` and are joined by `" or "`).
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{re}')"));
    out
}

/// `IsDNS1123Subdomain`'s messages (each check that fails, in Go's order).
fn dns_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS_SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {DNS_SUBDOMAIN_MAX} characters"));
    }
    if !subdomain_chars_ok(s) {
        errs.push(regex_error(DNS_SUBDOMAIN_MSG, DNS_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// Whether `s` matches the subdomain regex, whatever its length.
fn subdomain_chars_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && !s.contains("..")
        && !s.contains(".-")
        && !s.contains("-.")
}

/// Whether `s` matches the qualified-name regex, whatever its length.
fn qualified_chars_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| alnum(*c) || matches!(c, b'-' | b'_' | b'.'))
        && alnum(b[0])
        && alnum(b[b.len() - 1])
}

/// Go's `IsQualifiedName` (label keys, annotation keys, scheduling gates): `[prefix/]name`,
/// the prefix a DNS subdomain, the name at most 63 characters of `[A-Za-z0-9-_.]` with
/// alphanumeric ends. Every message Go returns, in its order and words.
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(dns_subdomain_errors(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_VALUE_MAX {
        errs.push(format!("name part must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !qualified_chars_ok(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// A qualified name (label key, annotation key, scheduling gate), with the first of Go's
/// `IsQualifiedName` messages ([`qualified_name_errors`] has them all).
pub fn check_label_key(key: &str) -> Result<(), String> {
    match qualified_name_errors(key).into_iter().next() {
        None => Ok(()),
        Some(m) => Err(m),
    }
}

/// Go's `IsValidLabelValue`: empty, or at most 63 characters of `[A-Za-z0-9-_.]` with
/// alphanumeric ends. Every message Go returns, in its order and words.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !value.is_empty() && !qualified_chars_ok(value) {
        errs.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// A label value, with the first of Go's `IsValidLabelValue` messages
/// ([`label_value_errors`] has them all).
pub fn check_label_value(value: &str) -> Result<(), String> {
    match label_value_errors(value).into_iter().next() {
        None => Ok(()),
        Some(m) => Err(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME_PART_REGEX: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    /// apimachinery validation_test.go `TestIsQualifiedName` / `TestIsValidLabelValue`
    /// inputs, with the messages Go's functions return for them.
    #[test]
    fn qualified_names_are_worded_as_go_is_qualified_name() {
        for ok in [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "1234",
            "simple/simple",
            "now-with-dashes/simple",
            "now-with-dashes/now-with-dashes",
            "now.with.dots/simple",
            "now-with.dashes-and.dots/simple",
            "1-num.2-num/3-num",
            "1234/5678",
            "1.2.3.4/5678",
            "Uppercase_Is_OK_123",
            "example.com/Uppercase_Is_OK_123",
            "requests.storage-foo",
            &"a".repeat(63),
            &format!("{}/b", "a".repeat(253)),
        ] {
            assert_eq!(qualified_name_errors(ok), Vec::<String>::new(), "{ok}");
        }
        assert_eq!(qualified_name_errors("bad key!"), [NAME_PART_REGEX]);
        assert_eq!(qualified_name_errors("-starts-with-dash"), [NAME_PART_REGEX]);
        assert_eq!(qualified_name_errors(""), ["name part must be non-empty", NAME_PART_REGEX]);
        assert_eq!(qualified_name_errors("/simple"), ["prefix part must be non-empty"]);
        assert_eq!(qualified_name_errors("example.com/"), ["name part must be non-empty", NAME_PART_REGEX]);
        assert_eq!(qualified_name_errors(&"a".repeat(64)), ["name part must be no more than 63 characters"]);
        assert_eq!(
            qualified_name_errors("Example.com/name"),
            ["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
        assert_eq!(
            qualified_name_errors(&format!("{}/b", "a".repeat(254))),
            ["prefix part must be no more than 253 characters"]
        );
        assert_eq!(
            qualified_name_errors("a/b/c"),
            ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
        );
        assert_eq!(check_label_key("bad key!"), Err(NAME_PART_REGEX.to_string()));
    }

    #[test]
    fn label_values_are_worded_as_go_is_valid_label_value() {
        for ok in [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "end-with-num-1",
            "1234",
            "",
            "Uppercase_Is_OK_123",
            &"a".repeat(63),
        ] {
            assert_eq!(label_value_errors(ok), Vec::<String>::new(), "{ok}");
        }
        let regex = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        assert_eq!(label_value_errors("has space"), [regex]);
        assert_eq!(label_value_errors("nospecialchars%^=@"), [regex]);
        assert_eq!(label_value_errors(&"a".repeat(64)), ["must be no more than 63 characters"]);
        assert_eq!(
            label_value_errors(&format!("-{}", "a".repeat(64))),
            ["must be no more than 63 characters", regex]
        );
        assert_eq!(check_label_value("has space"), Err(regex.to_string()));
    }
}
