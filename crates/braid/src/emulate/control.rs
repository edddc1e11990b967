//! The control FIFO of a running emulator (`braid emulate --control`).

use std::path::{Path, PathBuf};

/// A control FIFO: created at a path, read without blocking, removed on
/// drop. Each line written to it is one [`apply_control`](super::model::apply_control) line.
#[derive(Debug)]
pub struct Control {
    path: PathBuf,
    file: std::fs::File,
    pending: Vec<u8>,
}

impl Control {
    /// Creates the FIFO at `path` (replacing a stale FIFO, never another
    /// kind of file) and opens it.
    ///
    /// # Errors
    /// The path exists and is no FIFO, or the FIFO cannot be made or opened.
    pub fn create(path: &Path) -> Result<Control, String> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_fifo() {
                return Err(format!(
                    "{}: exists and is not a FIFO; not touching it",
                    path.display()
                ));
            }
            std::fs::remove_file(path)
                .map_err(|e| format!("removing stale FIFO {}: {e}", path.display()))?;
        }
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{}: the path contains a NUL byte", path.display()))?;
        // SAFETY: c is a valid C string.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(format!(
                "creating FIFO {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        // Read-write so that the FIFO never reports end-of-file when a
        // writer closes it (Linux allows O_RDWR on a FIFO).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| format!("opening FIFO {}: {e}", path.display()))?;
        Ok(Control {
            path: path.to_path_buf(),
            file,
            pending: Vec::new(),
        })
    }

    /// Complete lines written since the last call (at most 64 KiB pending;
    /// blank lines and `#` comments left out).
    pub fn lines(&mut self) -> Vec<String> {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.file.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.pending.extend_from_slice(&buf[..n]);
            if self.pending.len() > 64 * 1024 {
                self.pending.clear();
            }
        }
        let mut out = Vec::new();
        while let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line).trim().to_string();
            if !text.is_empty() && !text.starts_with('#') {
                out.push(text);
            }
        }
        out
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
