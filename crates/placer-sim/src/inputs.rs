//! Where scenario files come from: paths, directories of them, and `-` for stdin.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::load::{LoadError, MAX_INPUT_BYTES};

/// The path that means standard input.
pub const STDIN: &str = "-";

/// True for the path `-`.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// The files behind `paths`, in order: a directory stands for every `*.yaml` / `*.yml`
/// file directly inside it, sorted by name; `-` (stdin) and files are kept as given.
/// A directory without scenario files is an error (naming it), as is an unreadable one.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for path in paths {
        if is_stdin(path) || !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let io = |source| LoadError::Io { file: path.clone(), source };
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .collect();
        if files.is_empty() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the directory holds no *.yaml or *.yml file",
            )));
        }
        files.sort();
        out.extend(files);
    }
    Ok(out)
}

/// The text of a file, or of stdin for `-`: at most [`MAX_INPUT_BYTES`], UTF-8.
pub fn read_input(path: &Path) -> Result<String, LoadError> {
    let io = |source| LoadError::Io { file: path.to_path_buf(), source };
    let limit = MAX_INPUT_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    if is_stdin(path) {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes).map_err(io)?;
    } else {
        std::fs::File::open(path).map_err(io)?.take(limit).read_to_end(&mut bytes).map_err(io)?;
    }
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(LoadError::TooLarge { file: path.to_path_buf(), limit: MAX_INPUT_BYTES });
    }
    String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the file is not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_expand_to_their_yaml_files_sorted() {
        let dir = std::env::temp_dir().join(format!("placer-inputs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub.yaml")).unwrap();
        for f in ["b.yml", "a.yaml", "notes.txt"] {
            std::fs::write(dir.join(f), "name: x\n").unwrap();
        }
        let got = expand_paths(&[dir.clone(), PathBuf::from("-")]).unwrap();
        assert_eq!(got, vec![dir.join("a.yaml"), dir.join("b.yml"), PathBuf::from("-")]);
        let empty = dir.join("sub.yaml");
        let err = expand_paths(&[empty]).unwrap_err().to_string();
        assert!(err.contains("no *.yaml or *.yml file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
