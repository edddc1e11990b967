//! Finding the trace files of a folder study: a bounded, sorted walk that
//! sorts files into traces, normalised `.tsv` copies and other files.

use super::StudyError;
use std::path::{Path, PathBuf};

/// How deep [`discover`] descends into sub-folders.
pub const MAX_DIR_DEPTH: usize = 16;

/// The most files [`discover`] looks at.
pub const MAX_DIR_FILES: usize = 10_000;

/// File extensions [`discover`] skips without trying to parse: documents,
/// images, archives, code and metadata that may sit beside traces.
pub const NON_TRACE_EXTENSIONS: &[&str] = &[
    "md", "rst", "pdf", "html", "htm", "png", "jpg", "jpeg", "svg", "gif", "json", "toml", "yaml",
    "yml", "py", "sh", "zip", "gz", "xz", "bz2", "tar", "zst", "ini", "log",
];

/// What [`discover`] found under a folder, paths relative to it, sorted.
#[derive(Debug, Default)]
pub struct Found {
    /// Files to evaluate.
    pub traces: Vec<PathBuf>,
    /// `.tsv` copies left out because their original is evaluated.
    pub copies: Vec<PathBuf>,
    /// Files skipped by extension.
    pub other: Vec<PathBuf>,
}

/// Lists `dir` recursively (sorted, at most [`MAX_DIR_DEPTH`] deep and
/// [`MAX_DIR_FILES`] files, hidden entries and symlinked folders skipped)
/// and sorts files into traces, copies and other files.
///
/// # Errors
/// [`StudyError::Folder`] when a folder cannot be listed,
/// [`StudyError::TooManyFiles`] past the file bound.
pub fn discover(dir: &Path) -> Result<Found, StudyError> {
    let folder_err = |path: &Path, e: std::io::Error| StudyError::Folder {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|e| folder_err(&folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| folder_err(&folder, e))?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type().map_err(|e| folder_err(&folder, e))?;
            let path = entry.path();
            if kind.is_dir() {
                if depth < MAX_DIR_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else if path.is_file() {
                if files.len() == MAX_DIR_FILES {
                    return Err(StudyError::TooManyFiles {
                        path: dir.to_path_buf(),
                    });
                }
                let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
                files.push(rel);
            }
        }
    }
    files.sort();
    let mut found = Found::default();
    for rel in &files {
        let name = rel.to_string_lossy();
        let ext = rel
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if ext == "tsv" {
            let original = PathBuf::from(name.strip_suffix(".tsv").unwrap_or(&name));
            if files.binary_search(&original).is_ok() {
                found.copies.push(rel.clone());
                continue;
            }
        }
        if NON_TRACE_EXTENSIONS.contains(&ext.as_str()) {
            found.other.push(rel.clone());
        } else {
            found.traces.push(rel.clone());
        }
    }
    Ok(found)
}
