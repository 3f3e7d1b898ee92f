//! The subset of CEL that DRA device selectors use (DeviceClass `spec.selectors[].cel` and
//! request `selectors[].cel`), compiled once per object and evaluated per device.
//!
//! Supported: literals (int, string, bool), `device.driver`,
//! `device.attributes["domain"].name` / `device.attributes["domain"]["name"]`,
//! `device.capacity["domain"].name`, `==` `!=` `<` `<=` `>` `>=` on ints and strings
//! (`==` / `!=` also on bools, versions), `&&` `||` `!`, parentheses, `"name" in
//! device.attributes["domain"]`, `quantity("8Gi")` with `compareTo`, `isGreaterThan`,
//! `isLessThan`, `semver("1.2.3")` with the same three methods, the string methods
//! `startsWith`, `endsWith`, `contains`, and `size()`. Anything else is a compile error
//! that names what is not supported, rather than a guess. Like CEL, a missing map key is a
//! runtime error (`no such key: name`): selectors guard with `in`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use placer_api::k8s::api::resource::v1::{Device, DeviceAttribute};
use placer_api::quantity::parse_milli;

/// A compiled selector expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(Value),
    Device,
    Ident(String),
    Field(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call(Option<Box<Expr>>, String, Vec<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    In(Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A CEL value of the subset.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Str(String),
    /// A quantity in thousandths of its unit.
    Quantity(i64),
    Version(Vec<u64>),
    /// The device object.
    Device,
    /// `device.attributes` / `device.capacity`: domain -> (name -> value).
    Domains(BTreeMap<String, BTreeMap<String, Value>>),
    /// One domain's attributes or capacities.
    Map(BTreeMap<String, Value>),
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Str(_) => "string",
            Value::Quantity(_) => "Quantity",
            Value::Version(_) => "Semver",
            Value::Device => "device",
            Value::Domains(_) | Value::Map(_) => "map",
        }
    }
}

/// The device a selector is evaluated on, with the driver that published it.
pub struct DeviceEnv<'a> {
    pub driver: &'a str,
    pub device: &'a Device,
}

/// A selector that does not compile (or uses what this subset lacks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelError(pub String);

impl fmt::Display for CelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(m: impl Into<String>) -> Result<T, CelError> {
    Err(CelError(m.into()))
}

// ---------------------------------------------------------------------------------------
// Lexer and parser
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

fn lex(src: &str) -> Result<Vec<Tok>, CelError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if i < chars.len() && (chars[i] == '.' || chars[i] == 'e') {
                return err("floating-point literals are not supported");
            }
            let text: String = chars[start..i].iter().collect();
            let n =
                text.parse::<i64>().map_err(|_| CelError(format!("integer literal {text} out of range")))?;
            if i < chars.len() && chars[i] == 'u' {
                i += 1;
            }
            out.push(Tok::Int(n));
            continue;
        }
        if c == '"' || c == '\'' {
            let quote = c;
            i += 1;
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None => return err("unterminated string literal"),
                    Some(&ch) if ch == quote => {
                        i += 1;
                        break;
                    }
                    Some('\\') => {
                        let esc = chars.get(i + 1).copied();
                        s.push(match esc {
                            Some('n') => '\n',
                            Some('t') => '\t',
                            Some(ch @ ('\\' | '"' | '\'')) => ch,
                            _ => return err("unsupported escape sequence in string literal"),
                        });
                        i += 2;
                    }
                    Some(&ch) => {
                        s.push(ch);
                        i += 1;
                    }
                }
            }
            out.push(Tok::Str(s));
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let op = ["==", "!=", "<=", ">=", "&&", "||"].into_iter().find(|o| *o == two);
        if let Some(op) = op {
            out.push(Tok::Op(op));
            i += 2;
            continue;
        }
        let op = ["<", ">", "!", "-", "(", ")", "[", "]", ".", ",", "?", ":", "+", "*", "/", "%", "{", "}"]
            .into_iter()
            .find(|o| o.starts_with(c));
        match op {
            Some(op) => out.push(Tok::Op(op)),
            None => return err(format!("unexpected character {c:?}")),
        }
        i += 1;
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, op: &str) -> Result<(), CelError> {
        if self.eat(op) {
            Ok(())
        } else {
            err(format!("expected {op:?}"))
        }
    }
    fn or(&mut self) -> Result<Expr, CelError> {
        let mut l = self.and()?;
        while self.eat("||") {
            l = Expr::Or(Box::new(l), Box::new(self.and()?));
        }
        Ok(l)
    }
    fn and(&mut self) -> Result<Expr, CelError> {
        let mut l = self.rel()?;
        while self.eat("&&") {
            l = Expr::And(Box::new(l), Box::new(self.rel()?));
        }
        Ok(l)
    }
    fn rel(&mut self) -> Result<Expr, CelError> {
        let l = self.unary()?;
        let op = match self.peek() {
            Some(Tok::Op("==")) => CmpOp::Eq,
            Some(Tok::Op("!=")) => CmpOp::Ne,
            Some(Tok::Op("<")) => CmpOp::Lt,
            Some(Tok::Op("<=")) => CmpOp::Le,
            Some(Tok::Op(">")) => CmpOp::Gt,
            Some(Tok::Op(">=")) => CmpOp::Ge,
            Some(Tok::Ident(w)) if w == "in" => {
                self.pos += 1;
                let r = self.unary()?;
                return Ok(Expr::In(Box::new(l), Box::new(r)));
            }
            _ => return Ok(l),
        };
        self.pos += 1;
        let r = self.unary()?;
        Ok(Expr::Cmp(op, Box::new(l), Box::new(r)))
    }
    fn unary(&mut self) -> Result<Expr, CelError> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.postfix()
    }
    fn args(&mut self) -> Result<Vec<Expr>, CelError> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        loop {
            args.push(self.or()?);
            if self.eat(")") {
                return Ok(args);
            }
            self.expect(",")?;
        }
    }
    fn postfix(&mut self) -> Result<Expr, CelError> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let Some(Tok::Ident(name)) = self.peek().cloned() else {
                    return err("expected a name after '.'");
                };
                self.pos += 1;
                e = if self.eat("(") {
                    Expr::Call(Some(Box::new(e)), name, self.args()?)
                } else {
                    Expr::Field(Box::new(e), name)
                };
            } else if self.eat("[") {
                let i = self.or()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(i));
            } else {
                return Ok(e);
            }
        }
    }
    fn primary(&mut self) -> Result<Expr, CelError> {
        let Some(t) = self.peek().cloned() else { return err("unexpected end of expression") };
        self.pos += 1;
        match t {
            Tok::Int(n) => Ok(Expr::Lit(Value::Int(n))),
            Tok::Str(s) => Ok(Expr::Lit(Value::Str(s))),
            Tok::Ident(w) if w == "true" => Ok(Expr::Lit(Value::Bool(true))),
            Tok::Ident(w) if w == "false" => Ok(Expr::Lit(Value::Bool(false))),
            Tok::Ident(w) if w == "device" => Ok(Expr::Device),
            Tok::Ident(w) => {
                if self.eat("(") {
                    Ok(Expr::Call(None, w, self.args()?))
                } else {
                    Ok(Expr::Ident(w))
                }
            }
            Tok::Op("(") => {
                let e = self.or()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Op(op) => err(format!("operator {op:?} is not supported here")),
        }
    }
}

/// Compiles a selector; the result must be a boolean expression of the supported subset.
pub fn compile(src: &str) -> Result<Expr, CelError> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return err("empty expression");
    }
    let mut p = Parser { toks, pos: 0 };
    let e = p.or()?;
    if p.pos != p.toks.len() {
        return err(format!("unexpected {:?} after the expression", p.toks[p.pos]));
    }
    check(&e)?;
    Ok(e)
}

/// Rejects names and functions outside the subset at compile time.
fn check(e: &Expr) -> Result<(), CelError> {
    match e {
        Expr::Lit(_) | Expr::Device => Ok(()),
        Expr::Ident(name) => err(format!("undeclared reference to {name:?}")),
        Expr::Field(inner, name) => {
            if matches!(**inner, Expr::Device)
                && !matches!(name.as_str(), "driver" | "attributes" | "capacity" | "allowMultipleAllocations")
            {
                return err(format!("device has no field {name:?}"));
            }
            check(inner)
        }
        Expr::Index(a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Cmp(_, a, b) | Expr::In(a, b) => {
            check(a)?;
            check(b)
        }
        Expr::Not(a) | Expr::Neg(a) => check(a),
        Expr::Call(target, name, args) => {
            let known = matches!(
                (target.is_some(), name.as_str(), args.len()),
                (false, "quantity" | "semver" | "size", 1)
                    | (true, "compareTo" | "isGreaterThan" | "isLessThan", 1)
                    | (true, "startsWith" | "endsWith" | "contains", 1)
                    | (true, "size", 0)
            );
            if !known {
                return err(format!("function {name}() with {} argument(s) is not supported", args.len()));
            }
            if let Some(t) = target {
                check(t)?;
            }
            args.iter().try_for_each(check)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------

fn parse_version(s: &str) -> Result<Vec<u64>, CelError> {
    let core = s.split(['-', '+']).next().unwrap_or("");
    let parts: Result<Vec<u64>, _> = core.split('.').map(str::parse::<u64>).collect();
    match parts {
        Ok(p) if p.len() == 3 => Ok(p),
        _ => err(format!("invalid semver {s:?}")),
    }
}

fn attribute_value(a: &DeviceAttribute) -> Result<Value, CelError> {
    if let Some(b) = a.bool {
        return Ok(Value::Bool(b));
    }
    if let Some(i) = a.int {
        return Ok(Value::Int(i));
    }
    if let Some(s) = &a.string {
        return Ok(Value::Str(s.clone()));
    }
    if let Some(v) = &a.version {
        return Ok(Value::Version(parse_version(v)?));
    }
    err("attribute of an unsupported type (list attributes are not supported)")
}

/// Splits a qualified attribute name into domain and name; unqualified names belong to the
/// driver's domain.
pub fn split_name<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    match name.split_once('/') {
        Some((d, n)) => (d, n),
        None => (driver, name),
    }
}

fn domains_of_attributes(env: &DeviceEnv<'_>) -> Result<Value, CelError> {
    let mut out: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (name, a) in env.device.attributes.iter().flatten() {
        let (domain, id) = split_name(name, env.driver);
        // A value of an unsupported type is only an error where it is read.
        if let Ok(v) = attribute_value(a) {
            out.entry(domain.to_string()).or_default().insert(id.to_string(), v);
        }
    }
    Ok(Value::Domains(out))
}

fn domains_of_capacity(env: &DeviceEnv<'_>) -> Result<Value, CelError> {
    let mut out: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (name, c) in env.device.capacity.iter().flatten() {
        let (domain, id) = split_name(name, env.driver);
        let q = parse_milli(&c.value.0).map_err(|e| CelError(format!("capacity {name}: {e}")))?;
        out.entry(domain.to_string()).or_default().insert(id.to_string(), Value::Quantity(q));
    }
    Ok(Value::Domains(out))
}

fn lookup(container: Value, key: &str) -> Result<Value, CelError> {
    match container {
        // A domain the device has nothing in reads as an empty map, as upstream's lazy maps do.
        Value::Domains(mut m) => Ok(Value::Map(m.remove(key).unwrap_or_default())),
        Value::Map(mut m) => m.remove(key).ok_or_else(|| CelError(format!("no such key: {key}"))),
        other => err(format!("no such key: {key} (on a {})", other.type_name())),
    }
}

fn order(a: &Value, b: &Value) -> Result<Ordering, CelError> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Ok(x.cmp(y)),
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        (Value::Quantity(x), Value::Quantity(y)) => Ok(x.cmp(y)),
        (Value::Version(x), Value::Version(y)) => Ok(x.cmp(y)),
        _ => err(format!("no such overload: compare {} with {}", a.type_name(), b.type_name())),
    }
}

fn as_bool(v: Value) -> Result<bool, CelError> {
    match v {
        Value::Bool(b) => Ok(b),
        other => err(format!("no such overload: expected bool, got {}", other.type_name())),
    }
}

fn as_str(v: Value) -> Result<String, CelError> {
    match v {
        Value::Str(s) => Ok(s),
        other => err(format!("no such overload: expected string, got {}", other.type_name())),
    }
}

/// Evaluates a compiled selector on a device.
pub fn matches(e: &Expr, env: &DeviceEnv<'_>) -> Result<bool, CelError> {
    as_bool(eval(e, env)?)
}

fn eval(e: &Expr, env: &DeviceEnv<'_>) -> Result<Value, CelError> {
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Device => Value::Device,
        Expr::Ident(name) => return err(format!("undeclared reference to {name:?}")),
        Expr::Field(inner, name) => {
            let v = eval(inner, env)?;
            match (v, name.as_str()) {
                (Value::Device, "driver") => Value::Str(env.driver.to_string()),
                (Value::Device, "attributes") => domains_of_attributes(env)?,
                (Value::Device, "capacity") => domains_of_capacity(env)?,
                (Value::Device, "allowMultipleAllocations") => {
                    Value::Bool(env.device.allow_multiple_allocations.unwrap_or(false))
                }
                (v, name) => lookup(v, name)?,
            }
        }
        Expr::Index(inner, key) => {
            let v = eval(inner, env)?;
            let k = as_str(eval(key, env)?)?;
            lookup(v, &k)?
        }
        Expr::Not(a) => Value::Bool(!as_bool(eval(a, env)?)?),
        Expr::Neg(a) => match eval(a, env)? {
            Value::Int(i) => Value::Int(-i),
            other => return err(format!("no such overload: -{}", other.type_name())),
        },
        // CEL's commutative logic: an error on one side is absorbed when the other decides.
        Expr::And(a, b) => match (eval(a, env).and_then(as_bool), eval(b, env).and_then(as_bool)) {
            (Ok(false), _) | (_, Ok(false)) => Value::Bool(false),
            (Ok(true), Ok(true)) => Value::Bool(true),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        },
        Expr::Or(a, b) => match (eval(a, env).and_then(as_bool), eval(b, env).and_then(as_bool)) {
            (Ok(true), _) | (_, Ok(true)) => Value::Bool(true),
            (Ok(false), Ok(false)) => Value::Bool(false),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        },
        Expr::Cmp(op, a, b) => {
            let (a, b) = (eval(a, env)?, eval(b, env)?);
            let r = match op {
                CmpOp::Eq | CmpOp::Ne => {
                    if std::mem::discriminant(&a) != std::mem::discriminant(&b) {
                        return err(format!("no such overload: {} == {}", a.type_name(), b.type_name()));
                    }
                    if matches!(a, Value::Quantity(_)) {
                        return err("no such overload: Quantity == Quantity (use compareTo)");
                    }
                    (a == b) == (*op == CmpOp::Eq)
                }
                _ => {
                    if matches!(a, Value::Quantity(_) | Value::Version(_)) {
                        return err(format!("no such overload: {} {op:?} (use compareTo)", a.type_name()));
                    }
                    let o = order(&a, &b)?;
                    match op {
                        CmpOp::Lt => o.is_lt(),
                        CmpOp::Le => o.is_le(),
                        CmpOp::Gt => o.is_gt(),
                        _ => o.is_ge(),
                    }
                }
            };
            Value::Bool(r)
        }
        Expr::In(k, m) => {
            let k = as_str(eval(k, env)?)?;
            match eval(m, env)? {
                Value::Map(m) => Value::Bool(m.contains_key(&k)),
                Value::Domains(m) => Value::Bool(m.contains_key(&k)),
                other => return err(format!("no such overload: in {}", other.type_name())),
            }
        }
        Expr::Call(None, name, args) => {
            let arg = eval(&args[0], env)?;
            match name.as_str() {
                "quantity" => {
                    let s = as_str(arg)?;
                    Value::Quantity(parse_milli(&s).map_err(|e| CelError(format!("quantity({s:?}): {e}")))?)
                }
                "semver" => Value::Version(parse_version(&as_str(arg)?)?),
                _ => size(arg)?,
            }
        }
        Expr::Call(Some(target), name, args) => {
            let t = eval(target, env)?;
            if name == "size" {
                return size(t);
            }
            let arg = eval(&args[0], env)?;
            match name.as_str() {
                "compareTo" => Value::Int(match order(&t, &arg)? {
                    Ordering::Less => -1,
                    Ordering::Equal => 0,
                    Ordering::Greater => 1,
                }),
                "isGreaterThan" => Value::Bool(order(&t, &arg)?.is_gt()),
                "isLessThan" => Value::Bool(order(&t, &arg)?.is_lt()),
                other => {
                    let (s, a) = (as_str(t)?, as_str(arg)?);
                    Value::Bool(match other {
                        "startsWith" => s.starts_with(&a),
                        "endsWith" => s.ends_with(&a),
                        _ => s.contains(&a),
                    })
                }
            }
        }
    })
}

fn size(v: Value) -> Result<Value, CelError> {
    let n = match v {
        Value::Str(s) => s.chars().count(),
        Value::Map(m) => m.len(),
        Value::Domains(m) => m.len(),
        other => return err(format!("no such overload: size({})", other.type_name())),
    };
    Ok(Value::Int(n as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::resource::v1::DeviceCapacity;
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;

    fn gpu() -> Device {
        let mut attributes = BTreeMap::new();
        attributes.insert(
            "model".to_string(),
            DeviceAttribute { string: Some("A100".into()), ..Default::default() },
        );
        attributes.insert("index".to_string(), DeviceAttribute { int: Some(3), ..Default::default() });
        attributes.insert(
            "other.example.com/nvlink".to_string(),
            DeviceAttribute { bool: Some(true), ..Default::default() },
        );
        attributes.insert(
            "driverVersion".to_string(),
            DeviceAttribute { version: Some("1.2.3".into()), ..Default::default() },
        );
        let mut capacity = BTreeMap::new();
        capacity.insert(
            "memory".to_string(),
            DeviceCapacity { value: Quantity("80Gi".into()), ..Default::default() },
        );
        Device {
            name: "gpu-0".into(),
            attributes: Some(attributes),
            capacity: Some(capacity),
            ..Default::default()
        }
    }

    fn eval_on(src: &str) -> Result<bool, CelError> {
        let d = gpu();
        matches(&compile(src)?, &DeviceEnv { driver: "gpu.example.com", device: &d })
    }

    #[test]
    fn selectors_of_upstream_tests_evaluate() {
        for (src, want) in [
            (r#"device.driver == "gpu.example.com""#, true),
            (r#"device.driver == 'other'"#, false),
            (r#"device.attributes["gpu.example.com"].model == "A100""#, true),
            (
                r#"device.attributes["gpu.example.com"]["index"] >= 3 && device.attributes["gpu.example.com"].index < 4"#,
                true,
            ),
            (r#"device.attributes["other.example.com"].nvlink"#, true),
            (r#"!device.attributes["other.example.com"].nvlink || false"#, false),
            (r#""model" in device.attributes["gpu.example.com"]"#, true),
            (r#""missing" in device.attributes["nothing.example.com"]"#, false),
            (r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#, true),
            (r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("100Gi"))"#, false),
            (r#"device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.10.0"))"#, true),
            (r#"device.attributes["gpu.example.com"].model.startsWith("A1")"#, true),
            ("true", true),
        ] {
            assert_eq!(eval_on(src), Ok(want), "{src}");
        }
    }

    #[test]
    fn missing_keys_and_unsupported_syntax_are_errors_not_guesses() {
        assert_eq!(
            eval_on(r#"device.attributes["gpu.example.com"].missing == "x""#),
            Err(CelError("no such key: missing".into()))
        );
        // `false && error` is false, as in CEL.
        assert_eq!(eval_on(r#"false && device.attributes["gpu.example.com"].missing == "x""#), Ok(false));
        for src in [
            "device.attributes.exists(a, a == 1)",
            "device.nodeName == 'x'",
            "cluster == 1",
            "1.5 > 1",
            "device.driver == ",
            "",
            r#"device.capacity["gpu.example.com"].memory > quantity("1Gi")"#,
        ] {
            let r = compile(src).and_then(|e| matches(&e, &DeviceEnv { driver: "d", device: &gpu() }));
            assert!(r.is_err(), "{src} should be rejected, got {r:?}");
        }
    }
}
