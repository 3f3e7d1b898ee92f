//! A walk over the nodes of a YAML text with their paths and positions.
//!
//! Serde-typed manifests keep no positions, so whatever needs to say *where* something is
//! walks the text again with the YAML parser: the line of a field a validation error
//! names, the object and field a parser error is inside, the quoted scalars that reached
//! a number field. The walk streams parser events and keeps only the current path.

use std::collections::HashMap;
use std::ops::ControlFlow;

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};

/// One step of a path: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// What a visited node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeKind<'a> {
    Scalar { value: &'a str, quoted: bool },
    Mapping,
    Sequence,
    Alias,
}

impl NodeKind<'_> {
    /// A plain `~`, `null`, `Null`, `NULL` or empty scalar.
    pub fn is_null(&self) -> bool {
        matches!(self, NodeKind::Scalar { value: "" | "~" | "null" | "Null" | "NULL", quoted: false })
    }

    /// How the node reads in a message: the scalar quoted, or what kind of node it is.
    pub fn describe(&self) -> String {
        match self {
            NodeKind::Scalar { .. } if self.is_null() => "null".to_string(),
            NodeKind::Scalar { value, .. } => placer_cluster::validation::echo(value),
            NodeKind::Mapping => "a mapping".to_string(),
            NodeKind::Sequence => "a list".to_string(),
            NodeKind::Alias => "an alias".to_string(),
        }
    }
}

/// A node met by [`walk`]: its 1-based position, what it is, and whether it is a mapping
/// key (keys are visited with the path of the entry they start).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'a> {
    pub line: u64,
    pub column: u64,
    pub kind: NodeKind<'a>,
    pub is_key: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MapState {
    ExpectKey,
    /// Inside a key that is itself a mapping or a list (a complex key).
    InComplexKey,
    ExpectValue,
}

enum Frame {
    Map(MapState),
    Seq { next: usize },
}

/// Calls `f` with the path and node of every node of the first document of `text`, in
/// document order, until `f` breaks or the text ends (or stops parsing).
pub(crate) fn walk(text: &str, mut f: impl FnMut(&[Seg], &Node<'_>) -> ControlFlow<()>) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut path: Vec<Seg> = Vec::new();
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { return };
        let (line, column) = (span.start.line() as u64, span.start.col() as u64 + 1);
        let kind = match &event {
            Event::DocumentEnd => return,
            Event::Scalar(v, style, ..) => {
                NodeKind::Scalar { value: v.as_ref(), quoted: !matches!(style, ScalarStyle::Plain) }
            }
            Event::SequenceStart(..) => NodeKind::Sequence,
            Event::MappingStart(..) => NodeKind::Mapping,
            Event::Alias(..) => NodeKind::Alias,
            Event::SequenceEnd | Event::MappingEnd => {
                frames.pop();
                finish(&mut frames, &mut path);
                continue;
            }
            _ => continue,
        };
        let container = matches!(kind, NodeKind::Mapping | NodeKind::Sequence);
        let mut is_key = false;
        match frames.last_mut() {
            Some(Frame::Map(state)) if *state == MapState::ExpectKey => {
                is_key = true;
                let key = match kind {
                    NodeKind::Scalar { value, .. } => value.to_string(),
                    _ => "?".to_string(),
                };
                path.push(Seg::Key(key));
                *state = if container { MapState::InComplexKey } else { MapState::ExpectValue };
            }
            Some(Frame::Map(_)) => {} // a value: its key's segment is on the path
            Some(Frame::Seq { next }) => path.push(Seg::Index(*next)),
            None => {}
        }
        if f(&path, &Node { line, column, kind, is_key }).is_break() {
            return;
        }
        match kind {
            NodeKind::Mapping => frames.push(Frame::Map(MapState::ExpectKey)),
            NodeKind::Sequence => frames.push(Frame::Seq { next: 0 }),
            _ if is_key => {}
            _ => finish(&mut frames, &mut path),
        }
    }
}

/// A node is complete: its parent moves to the next slot.
fn finish(frames: &mut [Frame], path: &mut Vec<Seg>) {
    match frames.last_mut() {
        Some(Frame::Map(state)) => match *state {
            MapState::InComplexKey => *state = MapState::ExpectValue,
            MapState::ExpectValue => {
                *state = MapState::ExpectKey;
                path.pop();
            }
            MapState::ExpectKey => {}
        },
        Some(Frame::Seq { next }) => {
            *next += 1;
            path.pop();
        }
        None => {}
    }
}

/// A path as written in messages: `submit[0].spec.containers[1].name`; keys that are not
/// plain words are bracketed (`metadata.labels[topology.kubernetes.io/zone]`).
pub(crate) fn render(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
            Seg::Key(k)
                if !k.is_empty()
                    && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Key(k) => s.push_str(&format!("[{k}]")),
        }
    }
    s
}

/// Parses a path as [`render`] and the API server write it (`a.b[0].c[key.with/dots]`).
/// A bracketed number is taken as an index.
pub(crate) fn parse(text: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut word = String::new();
    while let Some((_, c)) = chars.next() {
        match c {
            '.' => {
                if !word.is_empty() {
                    out.push(Seg::Key(std::mem::take(&mut word)));
                }
            }
            '[' => {
                if !word.is_empty() {
                    out.push(Seg::Key(std::mem::take(&mut word)));
                }
                let mut inner = String::new();
                for (_, c) in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    inner.push(c);
                }
                out.push(match inner.parse::<usize>() {
                    Ok(i) => Seg::Index(i),
                    Err(_) => Seg::Key(inner),
                });
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(Seg::Key(word));
    }
    out
}

/// `Index(i)` also matches a mapping key spelled `i` (a bracketed number in a message is
/// read as an index).
fn seg_matches(walked: &Seg, wanted: &Seg) -> bool {
    match (walked, wanted) {
        (Seg::Key(k), Seg::Index(i)) => k.parse::<usize>().ok() == Some(*i),
        _ => walked == wanted,
    }
}

/// For each wanted path, the position of its deepest part present in `text` (the key
/// of a mapping entry, or the item of a list): `(line, column, depth matched)`. One walk
/// for all of them.
pub(crate) fn locate(text: &str, wanted: &[Vec<Seg>]) -> Vec<Option<(u64, u64, usize)>> {
    let mut found: Vec<Option<(u64, u64, usize)>> = vec![None; wanted.len()];
    if wanted.is_empty() {
        return found;
    }
    // Wanted paths by their first segment, to skip the ones a subtree cannot match.
    let mut by_first: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, w) in wanted.iter().enumerate() {
        let first = match w.first() {
            Some(Seg::Key(k)) => k.clone(),
            Some(Seg::Index(i)) => i.to_string(),
            None => String::new(),
        };
        by_first.entry(first).or_default().push(i);
    }
    walk(text, |path, node| {
        let Some(first) = path.first() else { return ControlFlow::Continue(()) };
        let first = match first {
            Seg::Key(k) => k.clone(),
            Seg::Index(i) => i.to_string(),
        };
        for &i in by_first.get(&first).into_iter().flatten() {
            let w = &wanted[i];
            if path.len() > w.len() || !path.iter().zip(w).all(|(a, b)| seg_matches(a, b)) {
                continue;
            }
            let better = match found[i] {
                None => true,
                // The key of an entry comes before its value: keep the key's position.
                Some((_, _, depth)) => depth < path.len(),
            };
            if better {
                found[i] = Some((node.line, node.column, path.len()));
            }
        }
        ControlFlow::Continue(())
    });
    found
}

/// The path and node at `(line, column)`: the last node starting at or before it.
pub(crate) fn node_at(text: &str, line: u64, column: u64) -> Option<(Vec<Seg>, String, bool)> {
    let mut best: Option<(Vec<Seg>, String, bool)> = None;
    walk(text, |path, node| {
        if (node.line, node.column) > (line, column) {
            return ControlFlow::Break(());
        }
        best = Some((path.to_vec(), node.kind.describe(), node.is_key));
        ControlFlow::Continue(())
    });
    best
}

/// The scalar at `path`, if the text has one there.
pub(crate) fn scalars_at(text: &str, paths: &[Vec<Seg>]) -> Vec<Option<String>> {
    let mut out = vec![None; paths.len()];
    walk(text, |path, node| {
        if let (NodeKind::Scalar { value, .. }, false) = (node.kind, node.is_key) {
            for (i, p) in paths.iter().enumerate() {
                if p.as_slice() == path {
                    out[i] = Some(value.to_string());
                }
            }
        }
        ControlFlow::Continue(())
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visits(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        walk(text, |path, node| {
            let what = match node.kind {
                NodeKind::Scalar { value, quoted } => format!("{value}{}", if quoted { "(q)" } else { "" }),
                NodeKind::Mapping => "{".into(),
                NodeKind::Sequence => "[".into(),
                NodeKind::Alias => "*".into(),
            };
            let key = if node.is_key { " key" } else { "" };
            out.push(format!("{}:{} {} {what}{key}", node.line, node.column, render(path)));
            ControlFlow::Continue(())
        });
        out
    }

    #[test]
    fn paths_follow_keys_and_indexes() {
        let got = visits("a: 1\nb:\n  - {c: '2', d: [x]}\n  - y\ne/f: z\n");
        assert_eq!(
            got,
            [
                "1:1  {",
                "1:1 a a key",
                "1:4 a 1",
                "2:1 b b key",
                "3:3 b [",
                "3:5 b[0] {",
                "3:6 b[0].c c key",
                "3:9 b[0].c 2(q)",
                "3:14 b[0].d d key",
                "3:17 b[0].d [",
                "3:18 b[0].d[0] x",
                "4:5 b[1] y",
                "5:1 [e/f] e/f key",
                "5:6 [e/f] z",
            ]
        );
    }

    #[test]
    fn parse_reads_api_server_paths() {
        assert_eq!(
            parse("spec.containers[0].resources.requests[nvidia.com/gpu]"),
            vec![
                Seg::Key("spec".into()),
                Seg::Key("containers".into()),
                Seg::Index(0),
                Seg::Key("resources".into()),
                Seg::Key("requests".into()),
                Seg::Key("nvidia.com/gpu".into()),
            ]
        );
        assert_eq!(render(&parse("metadata.labels[a.b/c]")), "metadata.labels[a.b/c]");
    }

    #[test]
    fn locate_finds_the_deepest_present_part() {
        let text = "submit:\n  - kind: Pod\n    spec:\n      containers:\n        - name: c\n          resources: {requests: {cpu: '-1'}}\n";
        let got = locate(
            text,
            &[
                parse("submit[0].spec.containers[0].resources.requests[cpu]"),
                parse("submit[0].spec.containers[0].image"),
                parse("submit[3].spec"),
            ],
        );
        assert_eq!(got[0].map(|(l, c, _)| (l, c)), Some((6, 34)));
        assert_eq!(got[1].map(|(l, c, _)| (l, c)), Some((5, 11)), "the container item");
        assert_eq!(got[2].map(|(l, c, _)| (l, c)), Some((1, 1)), "only `submit` exists");
    }

    #[test]
    fn node_at_names_the_enclosing_path() {
        let text = "name: t\nsubmit:\n  - {kind: PodGroup, spec: {gang: {minCount: x}}}\n";
        let (path, what, _) = node_at(text, 3, 47).unwrap();
        assert_eq!(render(&path), "submit[0].spec.gang.minCount");
        assert_eq!(what, "\"x\"");
    }
}
