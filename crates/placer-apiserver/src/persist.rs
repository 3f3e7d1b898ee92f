//! The state file (`placer cluster --state FILE`): JSON lines, a snapshot of the store
//! first, then one line per change (a journal), written before the API answers the write
//! that made it. A process killed at any point restarts from the file with every
//! acknowledged write (the OS keeps what was written when a process dies; a machine crash
//! may lose the last lines: the file is not fsynced). The journal is folded into a new
//! snapshot (written aside, then renamed over the file) once it is long.
//!
//! ```text
//! {"placerClusterState":1,"snapshot":{"resourceVersion":..,"nowMs":..,"uidCounter":..,"nameCounter":..,"objects":[...]}}
//! {"rv":42,"type":"MODIFIED","object":{...},"counters":{...}}
//! ```

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use placer_cluster::embedded::{object_from_json, Counters, EmbeddedCluster, Snapshot};
use placer_cluster::{ClusterStore, WatchEvent, WatchEventKind};
use serde_json::{json, Value};

/// Format version written in the first line.
pub const FORMAT: u64 = 1;

/// A state file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Format { path: PathBuf, line: usize, message: String },
}

/// The open state file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: BufWriter<File>,
    /// Changes up to this resourceVersion are in the file.
    journaled_rv: u64,
    /// Change lines since the snapshot.
    lines: usize,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> PersistError + '_ {
    move |source| PersistError::Io { path: path.to_path_buf(), source }
}

fn kind_name(k: WatchEventKind) -> &'static str {
    match k {
        WatchEventKind::Added => "ADDED",
        WatchEventKind::Modified => "MODIFIED",
        WatchEventKind::Deleted => "DELETED",
    }
}

impl Journal {
    /// Writes `store` as a new state file at `path` (replacing any).
    pub fn create(path: &Path, store: &EmbeddedCluster) -> Result<Journal, PersistError> {
        write_snapshot(path, store)?;
        let file = OpenOptions::new().append(true).open(path).map_err(io_err(path))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file: BufWriter::new(file),
            journaled_rv: store.resource_version(),
            lines: 0,
        })
    }

    /// Reads the store from `path` (snapshot, then journal). A last line cut short by a
    /// kill is ignored; any other bad line is an error.
    pub fn load(path: &Path) -> Result<EmbeddedCluster, PersistError> {
        let file = File::open(path).map_err(io_err(path))?;
        let format_err =
            |line: usize, message: String| PersistError::Format { path: path.to_path_buf(), line, message };
        let lines: Vec<String> =
            BufReader::new(file).lines().collect::<Result<_, _>>().map_err(io_err(path))?;
        let first: Value = lines
            .first()
            .ok_or_else(|| format_err(1, "empty file".into()))
            .and_then(|l| serde_json::from_str(l).map_err(|e| format_err(1, e.to_string())))?;
        if first.get("placerClusterState").and_then(Value::as_u64) != Some(FORMAT) {
            return Err(format_err(1, format!("not a placer cluster state file (format {FORMAT})")));
        }
        let snapshot: Snapshot =
            serde_json::from_value(first.get("snapshot").cloned().unwrap_or(Value::Null))
                .map_err(|e| format_err(1, format!("snapshot: {e}")))?;
        let mut store = EmbeddedCluster::from_snapshot(snapshot).map_err(|e| format_err(1, e.to_string()))?;
        let count = lines.len();
        for (i, line) in lines.iter().enumerate().skip(1) {
            let parsed =
                serde_json::from_str::<Value>(line).map_err(|e| e.to_string()).and_then(|v| parse_change(&v));
            match parsed {
                Ok((event, counters)) => store.replay(&event, counters),
                Err(message) if i + 1 == count => {
                    tracing::warn!(file = %path.display(), line = i + 1, %message, "ignoring a last line cut short");
                }
                Err(message) => return Err(format_err(i + 1, message)),
            }
        }
        Ok(store)
    }

    /// Appends every change after the last one written, then flushes.
    pub fn append(&mut self, store: &EmbeddedCluster) -> Result<(), PersistError> {
        let events = match store.log_since(self.journaled_rv) {
            Ok(events) => events,
            Err(_) => {
                // Changes left the log before they were written (cannot happen: writes are
                // journaled before compaction). Fall back to a full snapshot.
                return self.rewrite(store);
            }
        };
        let counters = store.counters();
        let events: Vec<(WatchEvent, Counters)> = events.iter().map(|e| (e.clone(), counters)).collect();
        self.append_events(&events)
    }

    /// Appends `events` (each with the store's counters after it; those the file holds
    /// already are skipped) in one write, then flushes.
    pub fn append_events(&mut self, events: &[(WatchEvent, Counters)]) -> Result<(), PersistError> {
        let texts: Vec<String> = events.iter().map(|(e, _)| e.object.to_json().to_string()).collect();
        self.append_rendered(events, &texts)
    }

    /// [`Journal::append_events`] with each object's stored JSON given (`texts[i]` is
    /// `events[i]`'s object).
    pub fn append_rendered<T: AsRef<str>>(
        &mut self,
        events: &[(WatchEvent, Counters)],
        texts: &[T],
    ) -> Result<(), PersistError> {
        let mut buf = Vec::new();
        let mut last = self.journaled_rv;
        let mut lines = 0;
        for ((e, counters), text) in events.iter().zip(texts) {
            if e.resource_version <= self.journaled_rv {
                continue;
            }
            let counters = serde_json::to_string(counters).unwrap_or_else(|_| "null".into());
            // Writing into a Vec cannot fail.
            let _ = writeln!(
                buf,
                "{{\"rv\":{},\"type\":\"{}\",\"object\":{},\"counters\":{counters}}}",
                e.resource_version,
                kind_name(e.kind),
                text.as_ref()
            );
            last = e.resource_version;
            lines += 1;
        }
        if lines == 0 {
            return Ok(());
        }
        self.file.write_all(&buf).map_err(io_err(&self.path))?;
        self.file.flush().map_err(io_err(&self.path))?;
        self.lines += lines;
        self.journaled_rv = last;
        Ok(())
    }

    /// Number of change lines after the snapshot.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Folds the journal into a new snapshot.
    pub fn rewrite(&mut self, store: &EmbeddedCluster) -> Result<(), PersistError> {
        *self = Journal::create(&self.path, store)?;
        Ok(())
    }
}

fn parse_change(v: &Value) -> Result<(WatchEvent, Counters), String> {
    let rv = v.get("rv").and_then(Value::as_u64).ok_or("missing rv")?;
    let kind = match v.get("type").and_then(Value::as_str) {
        Some("ADDED") => WatchEventKind::Added,
        Some("MODIFIED") => WatchEventKind::Modified,
        Some("DELETED") => WatchEventKind::Deleted,
        other => return Err(format!("bad type {other:?}")),
    };
    let object = object_from_json(v.get("object").cloned().unwrap_or(Value::Null))?;
    let counters: Counters = serde_json::from_value(v.get("counters").cloned().unwrap_or(Value::Null))
        .map_err(|e| e.to_string())?;
    Ok((WatchEvent { resource_version: rv, kind, object }, counters))
}

/// Writes the snapshot line to `path.tmp` and renames it over `path`.
fn write_snapshot(path: &Path, store: &EmbeddedCluster) -> Result<(), PersistError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        let mut w = BufWriter::new(file);
        let line = json!({"placerClusterState": FORMAT, "snapshot": store.snapshot()});
        writeln!(w, "{line}").map_err(io_err(&tmp))?;
        w.flush().map_err(io_err(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::Pod;
    use placer_cluster::{Kind, Object, ObjectRef};

    /// A bare pod in `default` (also used by `state.rs`'s tests).
    pub(crate) fn pod(name: &str) -> Object {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("default".into());
        Object::Pod(p.into())
    }

    #[test]
    fn a_killed_process_restarts_with_every_journaled_write() {
        let dir = std::env::temp_dir().join(format!("placer-persist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.jsonl");
        let mut store = EmbeddedCluster::new();
        store.create(pod("a")).unwrap();
        let mut journal = Journal::create(&path, &store).unwrap();
        store.create(pod("b")).unwrap();
        store.delete(&ObjectRef::new(Kind::Pod, "default", "a")).unwrap();
        journal.append(&store).unwrap();
        assert_eq!(journal.lines(), 2);
        // A line cut short by a kill is ignored.
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"rv\":9,\"ty").unwrap();
        let restored = Journal::load(&path).unwrap();
        assert_eq!(restored.objects().collect::<Vec<_>>(), store.objects().collect::<Vec<_>>());
        assert_eq!(restored.counters(), store.counters());
        journal.rewrite(&store).unwrap();
        let again = Journal::load(&path).unwrap();
        assert_eq!(again.counters(), store.counters());
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
        std::fs::write(&path, "{\"x\":1}\n").unwrap();
        assert!(Journal::load(&path)
            .unwrap_err()
            .to_string()
            .ends_with(":1: not a placer cluster state file (format 1)"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
