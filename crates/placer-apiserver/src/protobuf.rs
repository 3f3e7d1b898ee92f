//! Kubernetes protobuf request bodies, for the few objects recent kubectl versions send
//! that way (`kubectl create namespace`, `kubectl create priorityclass`, the evictions of
//! `kubectl drain`): the `k8s\0` envelope (`runtime.Unknown`) and the fields of those
//! messages, read into the JSON form. Answers are always JSON (clients accept it). Other
//! kinds sent as protobuf get 415 Unsupported Media Type.

use serde_json::{json, Map, Value};

/// Wire form of a field.
#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    Msg(&'static [Field]),
    /// `map<string, string>`
    StrMap,
    /// `repeated string`
    Strs,
}

#[derive(Debug, Clone, Copy)]
struct Field {
    num: u64,
    name: &'static str,
    ty: Ty,
}

const fn f(num: u64, name: &'static str, ty: Ty) -> Field {
    Field { num, name, ty }
}

const OBJECT_META: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "generateName", Ty::Str),
    f(3, "namespace", Ty::Str),
    f(11, "labels", Ty::StrMap),
    f(12, "annotations", Ty::StrMap),
    f(14, "finalizers", Ty::Strs),
];
const NAMESPACE_SPEC: &[Field] = &[f(1, "finalizers", Ty::Strs)];
const NAMESPACE: &[Field] = &[f(1, "metadata", Ty::Msg(OBJECT_META)), f(2, "spec", Ty::Msg(NAMESPACE_SPEC))];
const PRIORITY_CLASS: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "value", Ty::Int),
    f(3, "globalDefault", Ty::Bool),
    f(4, "description", Ty::Str),
    f(5, "preemptionPolicy", Ty::Str),
];
const EVICTION: &[Field] = &[f(1, "metadata", Ty::Msg(OBJECT_META))];
const TYPE_META: &[Field] = &[f(1, "apiVersion", Ty::Str), f(2, "kind", Ty::Str)];

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\x00";

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len()).ok_or("truncated field")?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            w => Err(format!("unsupported wire type {w}")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), String> {
        if self.pos + n > self.buf.len() {
            return Err("truncated field".into());
        }
        self.pos += n;
        Ok(())
    }
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "a string field is not UTF-8".to_string())
}

fn message(buf: &[u8], schema: &[Field]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let mut r = Reader { buf, pos: 0 };
    while r.pos < buf.len() {
        let key = r.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        let Some(field) = schema.iter().find(|x| x.num == num) else {
            r.skip(wire)?;
            continue;
        };
        match field.ty {
            Ty::Str => {
                out.insert(field.name.into(), json!(text(r.bytes()?)?));
            }
            Ty::Int => {
                // int32 / int64 as varint (negative int32 are sign-extended to 64 bits).
                out.insert(field.name.into(), json!(r.varint()? as i64));
            }
            Ty::Bool => {
                out.insert(field.name.into(), json!(r.varint()? != 0));
            }
            Ty::Msg(inner) => {
                out.insert(field.name.into(), Value::Object(message(r.bytes()?, inner)?));
            }
            Ty::Strs => {
                let s = text(r.bytes()?)?;
                let list = out.entry(field.name).or_insert_with(|| json!([]));
                if let Value::Array(a) = list {
                    a.push(json!(s));
                }
            }
            Ty::StrMap => {
                let entry = message(r.bytes()?, &[f(1, "k", Ty::Str), f(2, "v", Ty::Str)])?;
                let key = entry.get("k").and_then(Value::as_str).unwrap_or("").to_string();
                let value = entry.get("v").cloned().unwrap_or_else(|| json!(""));
                let map = out.entry(field.name).or_insert_with(|| json!({}));
                if let Value::Object(m) = map {
                    m.insert(key, value);
                }
            }
        }
    }
    Ok(out)
}

/// A protobuf body as JSON. `Err` says why it cannot be read (an unsupported kind
/// included).
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body.strip_prefix(MAGIC).ok_or("not a Kubernetes protobuf body (no k8s\\0 prefix)")?;
    // runtime.Unknown: 1 typeMeta, 2 raw.
    let mut r = Reader { buf: rest, pos: 0 };
    let (mut type_meta, mut raw) = (Map::new(), None);
    while r.pos < rest.len() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (1, 2) => type_meta = message(r.bytes()?, TYPE_META)?,
            (2, 2) => raw = Some(r.bytes()?),
            (_, wire) => r.skip(wire)?,
        }
    }
    let kind = type_meta.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    let schema = match kind.as_str() {
        "Namespace" => NAMESPACE,
        "PriorityClass" => PRIORITY_CLASS,
        "Eviction" => EVICTION,
        other => {
            return Err(format!(
                "protobuf bodies are read for Namespace, PriorityClass and Eviction only, not {other:?}: send JSON or YAML (kubectl create -f FILE, kubectl apply)"
            ))
        }
    };
    let mut obj = message(raw.unwrap_or_default(), schema)?;
    obj.insert("apiVersion".into(), type_meta.get("apiVersion").cloned().unwrap_or(Value::Null));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, wire: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((num << 3) | wire) as u8];
        if wire == 2 {
            out.push(payload.len() as u8);
        }
        out.extend_from_slice(payload);
        out
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let tm = [field(1, 2, api_version.as_bytes()), field(2, 2, kind.as_bytes())].concat();
        [MAGIC.to_vec(), field(1, 2, &tm), field(2, 2, raw), field(3, 2, b""), field(4, 2, b"")].concat()
    }

    #[test]
    fn a_namespace_and_a_priority_class_as_kubectl_sends_them() {
        let label = [field(1, 2, b"team"), field(2, 2, b"ml")].concat();
        let meta = [field(1, 2, b"demo"), field(11, 2, &label), field(15, 0, &[1])].concat();
        let ns = [field(1, 2, &meta), field(2, 2, b""), field(3, 2, b"")].concat();
        let v = decode(&envelope("v1", "Namespace", &ns)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo", "labels": {"team": "ml"}}, "spec": {}})
        );
        let meta = field(1, 2, b"high");
        let pc = [field(1, 2, &meta), field(2, 0, &[0xe8, 0x07]), field(3, 0, &[1]), field(5, 2, b"Never")]
            .concat();
        let v = decode(&envelope("scheduling.k8s.io/v1", "PriorityClass", &pc)).unwrap();
        assert_eq!(v["value"], 1000);
        assert_eq!(v["globalDefault"], true);
        assert_eq!(v["preemptionPolicy"], "Never");
        // A negative int32 arrives sign-extended to ten bytes.
        let pc =
            [field(1, 2, &meta), field(2, 0, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])]
                .concat();
        assert_eq!(decode(&envelope("scheduling.k8s.io/v1", "PriorityClass", &pc)).unwrap()["value"], -1);
    }

    #[test]
    fn other_kinds_and_garbage_are_refused() {
        assert!(decode(&envelope("batch/v1", "Job", b"")).unwrap_err().contains("not \"Job\""));
        assert!(decode(b"{}").is_err());
        assert!(decode(&[MAGIC, &[0x0a, 0x7f]].concat()).is_err(), "a truncated field");
    }
}
