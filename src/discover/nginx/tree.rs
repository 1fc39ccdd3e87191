//! The block tree of an `nginx -T` dump: the dump split into its files, each file's
//! directives with their blocks, and `include` followed through the dump's files (cycles
//! skipped, the directives it may produce bounded).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::lexer::{Token, tokens};
use crate::discover::{At, DiscoverError};

/// One directive: its name and arguments (quotes removed), where it is, and its block.
#[derive(Debug, Clone)]
pub(super) struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub at: At,
    pub block: Option<Vec<Directive>>,
}

/// Splits a dump into `(file, text, line of the text's first line in the dump)`.
fn files_of(dump: &str) -> Vec<(String, String, usize)> {
    let mut out: Vec<(String, String, usize)> = Vec::new();
    for (i, line) in dump.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = trimmed.strip_prefix("# configuration file ")
            && let Some(path) = rest.strip_suffix(':')
        {
            out.push((path.to_owned(), String::new(), i + 2));
            continue;
        }
        if let Some(last) = out.last_mut() {
            last.1.push_str(line);
        }
    }
    out
}

/// The main configuration file a dump names first (the `-c` file nginx was asked with).
pub(in crate::discover) fn main_file(dump: &str) -> Option<String> {
    files_of(dump).into_iter().next().map(|(path, _, _)| path)
}

/// The directives of one file.
fn parse_file(text: &str, file: &str) -> Result<Vec<Directive>, DiscoverError> {
    let toks = tokens(text, file)?;
    let mut pos = 0;
    let list = block(&toks, &mut pos, file, 0)?;
    if pos < toks.len() {
        return Err(DiscoverError::Parse {
            at: At {
                file: file.to_owned(),
                line: toks[pos].1,
            },
            message: "unexpected \"}\"".into(),
        });
    }
    Ok(list)
}

fn block(
    toks: &[(Token, usize)],
    pos: &mut usize,
    file: &str,
    depth: usize,
) -> Result<Vec<Directive>, DiscoverError> {
    let at = |line| At {
        file: file.to_owned(),
        line,
    };
    if depth > 64 {
        let line = toks.get(*pos).map_or(0, |t| t.1);
        return Err(DiscoverError::Parse {
            at: at(line),
            message: "blocks nested more than 64 deep".into(),
        });
    }
    let mut out = Vec::new();
    while let Some((tok, line)) = toks.get(*pos) {
        match tok {
            Token::Close => {
                if depth == 0 {
                    return Err(DiscoverError::Parse {
                        at: at(*line),
                        message: "unexpected \"}\"".into(),
                    });
                }
                return Ok(out);
            }
            Token::Open | Token::End => {
                return Err(DiscoverError::Parse {
                    at: at(*line),
                    message: format!(
                        "unexpected \"{}\"",
                        if *tok == Token::Open { "{" } else { ";" }
                    ),
                });
            }
            Token::Word(name) => {
                let start = *line;
                *pos += 1;
                let mut args = Vec::new();
                loop {
                    match toks.get(*pos) {
                        Some((Token::Word(w), _)) => {
                            args.push(w.clone());
                            *pos += 1;
                        }
                        Some((Token::End, _)) => {
                            *pos += 1;
                            out.push(Directive {
                                name: name.clone(),
                                args,
                                at: at(start),
                                block: None,
                            });
                            break;
                        }
                        Some((Token::Open, _)) => {
                            *pos += 1;
                            let children = block(toks, pos, file, depth + 1)?;
                            match toks.get(*pos) {
                                Some((Token::Close, _)) => *pos += 1,
                                _ => {
                                    return Err(DiscoverError::Parse {
                                        at: at(start),
                                        message: format!("the block of \"{name}\" is not closed"),
                                    });
                                }
                            }
                            out.push(Directive {
                                name: name.clone(),
                                args,
                                at: at(start),
                                block: Some(children),
                            });
                            break;
                        }
                        Some((Token::Close, _)) | None => {
                            return Err(DiscoverError::Parse {
                                at: at(start),
                                message: format!("directive \"{name}\" is not terminated by \";\""),
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A directive and everything in its block.
fn size(d: &Directive) -> usize {
    1 + d.block.as_deref().map_or(0, |b| b.iter().map(size).sum())
}

/// The files of a dump, each parsed; the first is nginx's main file.
pub(super) struct Parsed {
    pub main: String,
    /// The directives of each file.
    pub files: HashMap<String, Vec<Directive>>,
    /// The files in the order of the dump.
    pub paths: Vec<String>,
}

/// Every file of an `nginx -T` dump, parsed.
pub(super) fn parse_dump(dump: &str) -> Result<Parsed, DiscoverError> {
    let files = files_of(dump);
    let Some((main, _, _)) = files.first() else {
        return Err(DiscoverError::Parse {
            at: At {
                file: "(dump)".into(),
                line: 1,
            },
            message: "no \"# configuration file PATH:\" line: this is not the output of `nginx -T`"
                .into(),
        });
    };
    let mut parsed: HashMap<String, Vec<Directive>> = HashMap::new();
    for (path, text, _) in &files {
        let list = parse_file(text, path)?;
        parsed.insert(path.clone(), list);
    }
    Ok(Parsed {
        main: main.clone(),
        paths: files.iter().map(|(p, _, _)| p.clone()).collect(),
        files: parsed,
    })
}

/// Follows `include` through the files of a dump.
pub(super) struct Includes<'p> {
    parsed: &'p Parsed,
    /// Relative includes are read from the directory of the main file (nginx's prefix).
    prefix: PathBuf,
    /// Directives `include` may still produce: files that include each other (or one file
    /// included many times over) stop here instead of growing without bound.
    budget: usize,
    /// The files being expanded (an include of one of them is a cycle and skipped).
    stack: Vec<&'p str>,
    /// [`Self::matching`]'s answers.
    globs: HashMap<String, Vec<&'p str>>,
}

/// Directives (counting those in blocks) the includes of one dump may produce in all: far
/// above real configurations (1,000 sites are about 15,000).
const INCLUDE_BUDGET: usize = 500_000;

impl<'p> Includes<'p> {
    /// Includes of `parsed`, expanded from its main file.
    pub(super) fn new(parsed: &'p Parsed) -> Self {
        Self {
            parsed,
            prefix: Path::new(&parsed.main)
                .parent()
                .unwrap_or(Path::new("/"))
                .to_path_buf(),
            budget: INCLUDE_BUDGET,
            stack: vec![parsed.main.as_str()],
            globs: HashMap::new(),
        }
    }

    /// The directives of `list` with `include`s replaced by the files they name.
    pub(super) fn expand(&mut self, list: &[Directive], depth: usize) -> Vec<Directive> {
        let mut out = Vec::new();
        for d in list {
            if self.budget == 0 {
                break;
            }
            if d.name == "include" && d.block.is_none() {
                if depth >= 16 {
                    continue;
                }
                for pattern in &d.args {
                    for m in self.matching(pattern) {
                        if self.stack.contains(&m) {
                            continue;
                        }
                        if let Some(l) = self.parsed.files.get(m) {
                            self.stack.push(m);
                            let expanded = self.expand(l, depth + 1);
                            self.stack.pop();
                            out.extend(expanded);
                        }
                    }
                }
            } else {
                self.budget = self.budget.saturating_sub(size(d));
                out.push(d.clone());
            }
        }
        out
    }

    /// The files of the dump an `include` of `pattern` reads, in order; each pattern matched
    /// against the dump's files once (the same snippet is often included by every site).
    fn matching(&mut self, pattern: &str) -> Vec<&'p str> {
        if let Some(known) = self.globs.get(pattern) {
            return known.clone();
        }
        let full = self.prefix.join(pattern);
        let full = full.to_string_lossy();
        let mut matched: Vec<&'p str> = self
            .parsed
            .paths
            .iter()
            .map(String::as_str)
            .filter(|p| crate::fsutil::glob_matches(full.as_bytes(), p.as_bytes()))
            .collect();
        matched.sort_unstable();
        self.globs.insert(pattern.to_owned(), matched.clone());
        matched
    }

    /// [`Self::expand`], inside every block as well (`location`, `if`).
    pub(super) fn expand_all(&mut self, list: &[Directive], depth: usize) -> Vec<Directive> {
        let mut out = self.expand(list, depth);
        for d in &mut out {
            if let Some(children) = d.block.take() {
                d.block = Some(self.expand_all(&children, depth + 1));
            }
        }
        out
    }
}
