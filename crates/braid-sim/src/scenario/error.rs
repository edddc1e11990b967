//! Scenario errors: one line, naming the file and (where known) the line.

use std::fmt;

/// What kind of problem a scenario has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScenarioErrorKind {
    /// The file could not be read.
    Io,
    /// Not valid TOML, or not the expected structure (missing or unknown key,
    /// wrong type).
    Syntax,
    /// A name that is not defined (node, link).
    Undefined,
    /// A name defined twice.
    Duplicate,
    /// A value that cannot be read (unknown unit, out of range).
    Value,
    /// A route that does not connect its flow's ends.
    Route,
    /// A trace file that is missing or invalid.
    Trace,
}

/// A scenario could not be loaded. Displays as
/// `<file>: line <n>: <message>` (or `<file>: <message>` without a line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The scenario file as given (or `<inline>`).
    pub file: String,
    /// 1-based line in the scenario file, where known.
    pub line: Option<usize>,
    /// What is wrong.
    pub kind: ScenarioErrorKind,
    /// A one-line description.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}: line {l}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Turns byte offsets into 1-based line numbers for one source text.
#[derive(Debug)]
pub(crate) struct Locator<'a> {
    pub file: String,
    pub text: &'a str,
}

impl Locator<'_> {
    pub fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    pub fn err(
        &self,
        span: Option<std::ops::Range<usize>>,
        kind: ScenarioErrorKind,
        message: impl Into<String>,
    ) -> ScenarioError {
        // Keep the message on one line whatever a lower layer said.
        let message: String = message.into();
        let message = message.lines().map(str::trim).collect::<Vec<_>>().join(" ");
        ScenarioError {
            file: self.file.clone(),
            line: span.map(|s| self.line_of(s.start)),
            kind,
            message,
        }
    }
}
