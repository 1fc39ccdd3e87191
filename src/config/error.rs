//! What is wrong with a configuration: each problem with its line and section, the error
//! naming the file, and "did you mean" suggestions for misspelt keys.

use std::path::{Path, PathBuf};

/// One problem in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The included file (`[agent] include`) the line is in; `None`: the main file.
    pub file: Option<PathBuf>,
    /// 1-based line.
    pub line: usize,
    /// `[api]`, `certificate 'www'`, ...
    pub context: String,
    /// Names the key, e.g. "unknown key `webrot` (did you mean `webroot`?)".
    pub message: String,
}

impl Problem {
    pub(super) fn display(&self, path: &Path) -> String {
        format!(
            "{} line {}: {}: {}",
            self.file.as_deref().unwrap_or(path).display(),
            self.line,
            self.context,
            self.message
        )
    }
}

/// The configuration could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not read configuration file {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    /// Every problem found, in file order, one per line of the message.
    #[error("{}", problems.iter().map(|p| p.display(path)).collect::<Vec<_>>().join("\n"))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
}

/// Edit distance of two short keys (optimal string alignment: insertions, deletions,
/// substitutions and transpositions of neighbours each cost 1).
pub(super) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The closest known key, if close enough to be a typo.
pub(super) fn suggest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (key.chars().count() / 3).clamp(1, 3);
    let close = known
        .iter()
        .map(|k| (distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k);
    // A truncated value ("dns" for "dns-txt") is far in edits but clear in intent.
    close.or_else(|| {
        let mut prefixed = known
            .iter()
            .filter(|k| key.len() >= 3 && k.starts_with(key));
        match (prefixed.next(), prefixed.next()) {
            (Some(k), None) => Some(*k),
            _ => None,
        }
    })
}
