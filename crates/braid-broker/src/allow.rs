//! The operator's allow-list of callback URLs.
//!
//! A broker posts to URLs its clients name, so without a check any user
//! could make it send requests into the operator's network. The list in
//! the configuration is the only way in: `[callbacks] allow = [...]`, each
//! pattern a URL prefix in which `*` stands for any run of characters
//! other than `/` (`"http://127.0.0.1:*"` allows any port on that host,
//! `"https://hooks.example.net/braid/"` anything below that path). With no
//! list, every callback is refused (400 naming `callback`).

/// The most patterns in `callbacks.allow`.
pub const MAX_PATTERNS: usize = 64;

/// The operator's allow-list of callback URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    patterns: Vec<String>,
}

/// A pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// Not an http:// or https:// prefix.
    #[error("callbacks.allow: {0:?} must start with http:// or https://")]
    Scheme(String),
    /// Too many patterns.
    #[error("callbacks.allow: at most {MAX_PATTERNS} patterns")]
    TooMany,
}

impl AllowList {
    /// The list of `patterns` (see the module doc).
    ///
    /// # Errors
    /// [`PatternError`].
    pub fn new(patterns: Vec<String>) -> Result<AllowList, PatternError> {
        if patterns.len() > MAX_PATTERNS {
            return Err(PatternError::TooMany);
        }
        for p in &patterns {
            let host = p
                .strip_prefix("http://")
                .or_else(|| p.strip_prefix("https://"));
            if host.is_none_or(str::is_empty) {
                return Err(PatternError::Scheme(p.clone()));
            }
        }
        Ok(AllowList { patterns })
    }

    /// Whether no callback is allowed.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `url` is allowed: some pattern matches a prefix of it that
    /// ends where the pattern ends a path segment (so
    /// `https://a.example` does not allow `https://a.example.evil.net/`).
    pub fn allows(&self, url: &str) -> bool {
        self.patterns
            .iter()
            .any(|p| matched_len(p.as_bytes(), url.as_bytes()).is_some_and(|n| boundary(p, url, n)))
    }
}

/// The length of the prefix of `url` that `pattern` matches (`*` takes
/// any run without `/`, as short as fits, trying every length), if any.
fn matched_len(pattern: &[u8], url: &[u8]) -> Option<usize> {
    match pattern.split_first() {
        None => Some(0),
        Some((b'*', rest)) => {
            let run = url.iter().take_while(|&&c| c != b'/').count();
            // Longest first, so "http://h:*" takes the whole port.
            (0..=run)
                .rev()
                .find_map(|k| matched_len(rest, &url[k..]).map(|n| n + k))
        }
        Some((c, rest)) => match url.split_first() {
            Some((u, url_rest)) if u.eq_ignore_ascii_case(c) => {
                matched_len(rest, url_rest).map(|n| n + 1)
            }
            _ => None,
        },
    }
}

/// A match of `n` bytes is whole when the pattern ends in `/` or the URL
/// goes on with a path, query or nothing.
fn boundary(pattern: &str, url: &str, n: usize) -> bool {
    pattern.ends_with('/')
        || url
            .as_bytes()
            .get(n)
            .is_none_or(|c| matches!(c, b'/' | b'?' | b'#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_matches_prefixes_and_wildcard_ports() {
        let list = AllowList::new(vec![
            "http://127.0.0.1:*".into(),
            "https://hooks.example.net/braid/".into(),
            "https://a.example".into(),
        ])
        .unwrap();
        assert!(list.allows("http://127.0.0.1:8080/hook"));
        assert!(list.allows("http://127.0.0.1:1"));
        assert!(!list.allows("http://127.0.0.2:8080/hook"));
        assert!(!list.allows("http://127.0.0.1.evil.net:80/"));
        assert!(list.allows("https://hooks.example.net/braid/x?y=1"));
        assert!(!list.allows("https://hooks.example.net/other"));
        assert!(list.allows("https://a.example/x"));
        assert!(list.allows("https://A.example"));
        assert!(!list.allows("https://a.example.evil.net/"));
        assert!(!list.allows("http://a.example/"));
        assert!(AllowList::default().is_empty());
        assert!(!AllowList::default().allows("http://127.0.0.1:1/"));
        assert!(AllowList::new(vec!["ftp://x".into()]).is_err());
        assert!(AllowList::new(vec!["https://".into()]).is_err());
    }
}
