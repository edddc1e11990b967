//! Key files: the pre-shared key that `--key FILE` names, on disk.
//!
//! A key authenticates peers to each other (see
//! `braid_core::transport::auth` and docs/SECURITY.md): `braid keygen FILE`
//! writes one, the operator copies it to the peer over a secure channel,
//! and every command that talks to that peer is given `--key FILE`.
//!
//! # Format
//!
//! One line of text, versioned so that later formats can be told apart:
//!
//! ```text
//! braid-key-1 <64 lowercase hex digits: the 32 key bytes>
//! ```
//!
//! followed by a newline (optional when reading; surrounding whitespace is
//! ignored). Nothing else may be in the file. The same file serves every
//! transport that authenticates with it (IQ-RUDP now, the pipe's TCP later).
//!
//! # Permissions
//!
//! Like ssh with a private key, [`Key::read`] refuses a file that its group
//! or others may access in any way (any of the mode bits 0o077), and says
//! how to fix it; [`Key::write_new`] creates the file with mode 0600 and
//! never overwrites one that exists.
//!
//! Main types: [`Key`], [`KeyError`].

use braid_core::transport::Psk;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The first word of a key file of the current format.
pub const KEY_FORMAT: &str = "braid-key-1";
/// Longest key file read (a valid one is 77 bytes).
pub const MAX_KEY_FILE: u64 = 4096;
/// The file mode key files are created with.
pub const KEY_FILE_MODE: u32 = 0o600;

/// Why a key could not be made, read or written. Each text is one line
/// that names the file and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The operating system's random number generator failed.
    #[error("cannot read OS randomness for a new key: {0}")]
    Random(String),
    /// No file at the path.
    #[error("key file {} does not exist (create one with `braid keygen {}`)", .0.display(), .0.display())]
    Missing(PathBuf),
    /// The file exists and writing would overwrite it.
    #[error("key file {} already exists; not overwriting it (use --force to replace it)", .0.display())]
    Exists(PathBuf),
    /// Group or others may access the file.
    #[error("key file {} is accessible by group or others (mode {mode:03o}); run `chmod 600 {}`", path.display(), path.display())]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The contents are not a key of a known format.
    #[error("{} is not a braid key file: {why} (expected one line `{KEY_FORMAT} <64 hex digits>`, as `braid keygen` writes)", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: &'static str,
    },
    /// Another I/O error while doing what `context` says.
    #[error("{context} {}: {source}", path.display())]
    Io {
        /// What was being done ("reading key file").
        context: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A pre-shared key as kept in a key file. `Debug` prints no key bytes.
#[derive(Clone)]
pub struct Key(Psk);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A new key of 32 bytes from the operating system's random number
    /// generator.
    ///
    /// # Errors
    /// [`KeyError::Random`] if the OS generator fails.
    pub fn generate() -> Result<Key, KeyError> {
        use rand::TryRngCore;
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng
            .try_fill_bytes(&mut bytes)
            .map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(Key(Psk::from_bytes(bytes)))
    }

    /// A key from a [`Psk`] (tests, or keys kept elsewhere).
    pub fn from_psk(psk: Psk) -> Key {
        Key(psk)
    }

    /// The key, for `braid_core::transport::Config::psk`.
    pub fn psk(&self) -> &Psk {
        &self.0
    }

    /// The file contents: `braid-key-1 <hex>` and a newline.
    pub fn to_file_text(&self) -> String {
        let mut s = String::with_capacity(KEY_FORMAT.len() + 66);
        s.push_str(KEY_FORMAT);
        s.push(' ');
        for b in self.0.as_bytes() {
            s.push_str(&format!("{b:02x}"));
        }
        s.push('\n');
        s
    }

    /// Parses file contents (see the module docs); `path` names the file
    /// in errors.
    ///
    /// # Errors
    /// [`KeyError::Format`] saying what is wrong.
    pub fn parse(text: &str, path: &Path) -> Result<Key, KeyError> {
        let bad = |why| KeyError::Format {
            path: path.to_path_buf(),
            why,
        };
        let text = text.trim();
        if text.lines().count() != 1 {
            return Err(bad("not exactly one line"));
        }
        let mut words = text.split(' ');
        let (Some(tag), Some(hex), None) = (words.next(), words.next(), words.next()) else {
            return Err(bad("not two words separated by one space"));
        };
        if tag != KEY_FORMAT {
            return Err(if tag.starts_with("braid-key-") {
                bad("a key format version this braid does not know")
            } else {
                bad("it does not start with the format tag")
            });
        }
        if hex.len() != 64 {
            return Err(bad("the key is not 64 hex digits"));
        }
        let mut bytes = [0u8; 32];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let digit = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            let (Some(hi), Some(lo)) = (digit(pair[0]), digit(pair[1])) else {
                return Err(bad("the key has characters other than 0-9 and a-f"));
            };
            bytes[i] = hi << 4 | lo;
        }
        Ok(Key(Psk::from_bytes(bytes)))
    }

    /// Reads the key file at `path`, refusing one whose mode lets group or
    /// others access it.
    ///
    /// # Errors
    /// [`KeyError::Missing`], [`KeyError::Permissions`],
    /// [`KeyError::Format`], or [`KeyError::Io`].
    pub fn read(path: impl AsRef<Path>) -> Result<Key, KeyError> {
        let path = path.as_ref();
        let io = |context| {
            move |source: std::io::Error| KeyError::Io {
                context,
                path: path.to_path_buf(),
                source,
            }
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(KeyError::Missing(path.to_path_buf()))
            }
            Err(e) => return Err(io("cannot open key file")(e)),
        };
        // Check the file we opened, not the path again (no race).
        let meta = file.metadata().map_err(io("cannot stat key file"))?;
        if !meta.is_file() {
            return Err(KeyError::Format {
                path: path.to_path_buf(),
                why: "not a regular file",
            });
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Permissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let mut text = String::new();
        file.take(MAX_KEY_FILE)
            .read_to_string(&mut text)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => KeyError::Format {
                    path: path.to_path_buf(),
                    why: "not text",
                },
                _ => io("cannot read key file")(e),
            })?;
        Key::parse(&text, path)
    }

    /// Writes the key to a new file at `path` with mode 0600; an existing
    /// file is never overwritten.
    ///
    /// # Errors
    /// [`KeyError::Exists`] if there is a file, [`KeyError::Io`] otherwise.
    pub fn write_new(&self, path: impl AsRef<Path>) -> Result<(), KeyError> {
        let path = path.as_ref();
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(KEY_FILE_MODE)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => KeyError::Exists(path.to_path_buf()),
                _ => KeyError::Io {
                    context: "cannot create key file",
                    path: path.to_path_buf(),
                    source: e,
                },
            })?;
        let io = |source| KeyError::Io {
            context: "cannot write key file",
            path: path.to_path_buf(),
            source,
        };
        // The umask may only remove bits: 0600 stays 0600 or less; make it
        // exactly 0600 so the owner can read it back.
        f.set_permissions(std::fs::Permissions::from_mode(KEY_FILE_MODE))
            .map_err(io)?;
        f.write_all(self.to_file_text().as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)
    }

    /// Writes the key to `path` with mode 0600, replacing a file that is
    /// there (`braid keygen --force`): the key goes to a new file beside it
    /// first, which is then renamed over the old one, so a reader never
    /// sees half a key.
    ///
    /// # Errors
    /// [`KeyError::Io`].
    pub fn write_replacing(&self, path: impl AsRef<Path>) -> Result<(), KeyError> {
        let path = path.as_ref();
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".new-{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        // A leftover from a crashed run of this same process id.
        let _ = std::fs::remove_file(&tmp);
        self.write_new(&tmp)?;
        std::fs::rename(&tmp, path).map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            KeyError::Io {
                context: "cannot replace key file",
                path: path.to_path_buf(),
                source,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "braid-key-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn written_keys_read_back_and_are_private() {
        let d = dir();
        let p = d.join("k");
        let k = Key::generate().unwrap();
        k.write_new(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = Key::read(&p).unwrap();
        assert_eq!(back.psk().as_bytes(), k.psk().as_bytes());
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("braid-key-1 ") && text.ends_with('\n'));
        assert_eq!(text.len(), 12 + 64 + 1);
        // Never overwritten by write_new; replaced on request.
        let other = Key::generate().unwrap();
        assert!(matches!(other.write_new(&p), Err(KeyError::Exists(_))));
        assert_eq!(Key::read(&p).unwrap().psk().as_bytes(), k.psk().as_bytes());
        other.write_replacing(&p).unwrap();
        assert_eq!(
            Key::read(&p).unwrap().psk().as_bytes(),
            other.psk().as_bytes()
        );
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn readable_by_others_is_refused_with_the_fix() {
        let d = dir();
        let p = d.join("k");
        Key::generate().unwrap().write_new(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Key::read(&p).unwrap_err();
        assert!(matches!(e, KeyError::Permissions { mode: 0o644, .. }));
        let text = e.to_string();
        assert!(
            text.contains("chmod 600") && text.contains("mode 644"),
            "{text}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn missing_and_malformed_files_say_so() {
        let d = dir();
        let e = Key::read(d.join("nope")).unwrap_err();
        assert!(matches!(e, KeyError::Missing(_)));
        assert!(e.to_string().contains("braid keygen"));
        let good = "braid-key-1 ".to_string() + &"ab".repeat(32);
        assert!(Key::parse(&good, &d).is_ok());
        assert!(Key::parse(&format!("  {good}\n"), &d).is_ok());
        for bad in [
            String::new(),
            "braid-key-1".into(),
            "braid-key-2 ".to_string() + &"ab".repeat(32),
            "ssh-ed25519 ".to_string() + &"ab".repeat(32),
            "braid-key-1 ".to_string() + &"AB".repeat(32),
            "braid-key-1 ".to_string() + &"ab".repeat(31),
            "braid-key-1 ".to_string() + &"zz".repeat(32),
            format!("{good}\n{good}"),
            format!("{good} extra"),
        ] {
            let e = Key::parse(&bad, &d).unwrap_err();
            assert!(matches!(e, KeyError::Format { .. }), "{bad:?}");
            assert!(!e.to_string().contains('\n'));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn debug_prints_no_key_bytes() {
        let k = Key::from_psk(Psk::from_bytes([0xcd; 32]));
        assert_eq!(format!("{k:?}"), "Key(..)");
    }
}
