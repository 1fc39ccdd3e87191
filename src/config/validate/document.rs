//! The whole document: its top-level sections in order (`[api]`, `[agent]`, `[fleet]`, `[revocation]`,
//! `[defaults]`, the `[[certificate]]` tables), the included files (read, or kept from an
//! earlier run by the cache) and the checks across all certificates.

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::super::defs;
use super::super::error::Problem;
use super::super::types::{
    AgentConfig, CertificateConfig, Config, PreflightConfig, RevocationConfig,
};
use super::super::{cache, include};
use super::{Checker, breaks_of, split, type_name};

impl Checker<'_> {
    pub(in crate::config) fn document(&mut self, path: &Path) -> Option<Config> {
        if self.text.len() >= self.split_from
            && let Some(parts) = split::parts(self.text)
        {
            let mark = (self.problems.len(), self.warnings.len());
            self.head_breaks = Some(breaks_of(&parts.head));
            let read = self.document_of(path, Some(&parts));
            self.base = None;
            self.head_breaks = None;
            match read {
                Ok(config) => return config,
                Err(Whole) => {
                    self.problems.truncate(mark.0);
                    self.warnings.truncate(mark.1);
                }
            }
        }
        self.document_of(path, None).unwrap_or(None)
    }

    /// The document, read whole or in `parts` ([`split`]); `Err` when the parts do not read
    /// as the whole would.
    pub(super) fn document_of(
        &mut self,
        path: &Path,
        parts: Option<&split::Parts>,
    ) -> Result<Option<Config>, Whole> {
        let root = match DeTable::parse(parts.map_or(self.text, |p| p.head.as_str())) {
            Ok(root) => root,
            Err(_) if parts.is_some() => return Err(Whole),
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let msg = format!("invalid TOML: {}", e.message().trim());
                self.report(&span, "syntax", msg);
                return Ok(None);
            }
        };
        let root = root.get_ref();
        if parts.is_some() && root.iter().any(|(k, _)| k.get_ref() == "certificate") {
            return Err(Whole);
        }
        self.unknown_keys(root, "top level", defs::TOP_LEVEL, "top level");

        let section = |name: &str| root.iter().find(|(k, _)| k.get_ref() == name);
        let table_of = |c: &mut Self, name: &str| -> Option<(&DeTable<'_>, Range<usize>)> {
            let (k, v) = section(name)?;
            match v.get_ref() {
                DeValue::Table(t) => Some((t, v.span())),
                other => {
                    let msg = format!(
                        "`{name}` must be a table ([{name}]), found {}",
                        type_name(other)
                    );
                    c.report(&k.span(), "top level", msg);
                    None
                }
            }
        };
        let api = table_of(self, "api");
        let agent = table_of(self, "agent");
        let fleet = table_of(self, "fleet");
        let revocation = match table_of(self, "revocation") {
            Some((t, header)) => self.revocation(t, header),
            None => Some(RevocationConfig::default()),
        };
        let preflight = table_of(self, "preflight").map(|(t, header)| self.preflight(t, header));
        let acme_table = table_of(self, "acme").map(|(t, _)| t);
        let acme = self.acme_section(acme_table);
        let defaults = table_of(self, "defaults");
        let validation = match table_of(self, "validation") {
            Some((t, header)) => self.validation(t, header),
            // Absent: every key takes its declared default.
            None => self.validation(&DeTable::default(), 0..0),
        };

        let api_missing = api.is_none() && section("api").is_none();
        let api = api.and_then(|(t, header)| self.api(t, header));
        let empty = DeTable::default();
        let (agent_table, agent_header) = agent.unwrap_or((&empty, 0..0));
        let agent = self.agent(agent_table, agent_header);
        let fleet = match fleet {
            Some((t, header)) => self.fleet(t, header).map(Some),
            None => Some(None),
        };

        if let Some((t, _)) = defaults {
            self.defaults(t);
        }
        let defaults_table = defaults.map(|(t, _)| t);

        let mut certificates = match parts {
            None => self.certificates_of(root, defaults_table),
            Some(p) => self.certificates_in_parts(p, defaults_table)?,
        };
        let mut included = Included::default();
        if self.includes
            && let Some(a) = &agent
            && !a.include.is_empty()
        {
            included = self.included(path, a, agent_table, defaults_table, &mut certificates);
        }
        if !included.from_cache {
            self.across_and_keep(path, agent.as_ref(), &certificates, &included);
        }
        let Included {
            fragments, stamps, ..
        } = included;
        let api = self.issuers_across(&certificates, api, api_missing);
        let certificates = with_ca_file(certificates, api.as_ref());
        // Read from files (every included file with its stamp): what the due summary is
        // made for.
        let source_digest = (self.includes && stamps.len() == fragments.len())
            .then(|| {
                cache::source_digest(
                    path,
                    self.text,
                    stamps.iter().map(|(p, s)| (p.as_path(), s)),
                )
            })
            .flatten();

        let (Some(agent), Some(api), Some(fleet), Some(validation), Some(revocation)) =
            (agent, api, fleet, validation, revocation)
        else {
            return Ok(None);
        };
        let Some(preflight) = preflight.unwrap_or_else(|| Some(PreflightConfig::default())) else {
            return Ok(None);
        };
        Ok(Some(Config {
            path: path.to_path_buf(),
            api,
            agent,
            fleet,
            validation,
            revocation,
            preflight,
            acme,
            certificates,
            fragments,
            source_digest,
            warnings: Vec::new(),
        }))
    }

    /// `[acme.NAME]` tables (none without the section); their names are what `issuer` takes.
    fn acme_section(
        &mut self,
        table: Option<&DeTable<'_>>,
    ) -> std::collections::BTreeMap<String, crate::config::AcmeCa> {
        let acme = table.map(|t| self.acme_cas(t)).unwrap_or_default();
        self.acme_names = acme.keys().cloned().collect();
        acme
    }

    /// `[api]` is required unless every certificate comes from an ACME CA (then it stands
    /// unused: the Partner API is never called). The `[api]` to use.
    fn issuers_across(
        &mut self,
        certificates: &[(CertificateConfig, Origin)],
        api: Option<crate::config::ApiConfig>,
        api_missing: bool,
    ) -> Option<crate::config::ApiConfig> {
        let partner = certificates
            .iter()
            .find(|(c, _)| c.order.issuer.is_partner());
        if api_missing && (partner.is_some() || self.acme_names.is_empty()) {
            let why = match partner {
                Some((c, _)) => format!(
                    " (certificate '{}' comes from the Partner API; ACME certificates name                      their CA with `issuer`)",
                    c.name
                ),
                None => String::new(),
            };
            self.report(
                &(0..0),
                "top level",
                format!("missing required section [api]{why}"),
            );
        }
        match api {
            None if api_missing => Some(crate::config::ApiConfig::unused()),
            other => other,
        }
    }

    /// The keys of `[defaults]`: shared keys only.
    fn defaults(&mut self, t: &DeTable<'_>) {
        for (k, _) in t.iter() {
            if defs::per_certificate(k.get_ref()) {
                let msg = format!(
                    "`{}` cannot be set in [defaults]; set it in each [[certificate]]",
                    k.get_ref()
                );
                self.report(&k.span(), "[defaults]", msg);
            }
        }
        self.unknown_keys(t, "[defaults]", &defs::certificate_names(), "[defaults]");
    }

    /// The files `[agent] include` names and their certificates, added to `certificates`:
    /// kept from an earlier run when nothing changed since, otherwise read and checked.
    fn included(
        &mut self,
        path: &Path,
        a: &AgentConfig,
        agent_table: &DeTable<'_>,
        defaults: Option<&DeTable<'_>>,
        certificates: &mut Vec<(CertificateConfig, Origin)>,
    ) -> Included {
        let mut out = Included::default();
        let span = agent_table
            .iter()
            .find(|(k, _)| k.get_ref() == "include")
            .map_or(0..0, |(k, _)| k.span());
        let base = path.parent().unwrap_or(Path::new("/"));
        for pattern in &a.include {
            match include::expand(pattern, base) {
                Ok(include::Expanded::Files(files)) => out.fragments.extend(files),
                Ok(include::Expanded::NoDirectory(dir)) => self.warnings.push(Problem {
                    file: Some(path.to_path_buf()),
                    line: self.line(&span),
                    context: "[agent]".into(),
                    message: format!(
                        "`include`: the directory {} of {pattern:?} does not exist; no file is                          included from it (`cert-agent discover --write {}` makes it)",
                        dir.display(),
                        dir.display()
                    ),
                }),
                Err(e) => self.report(&span, "[agent]", format!("`include`: {e}")),
            }
        }
        out.fragments.dedup();
        // Unchanged since a run that found them valid: the kept certificates (the checks
        // across certificates held for the same main file and the same included files).
        let kept = self
            .problems
            .is_empty()
            .then(|| cache::lookup(&a.state_dir, path, self.text, &out.fragments, self.programs));
        if let Some(Some(hit)) = kept {
            for (file, stamp) in out.fragments.iter().zip(&hit.stamps) {
                self.writable_by_others(file, stamp.mode());
            }
            out.stamps = out.fragments.iter().cloned().zip(hit.stamps).collect();
            certificates.extend(hit.certificates.into_iter().map(|c| (c, Origin::KEPT)));
            out.from_cache = true;
        } else {
            let mut dir = include::Dir::default();
            for file in &out.fragments {
                if let Some(stamp) = self.fragment(&mut dir, file, &span, defaults, certificates) {
                    out.stamps.push((file.clone(), stamp));
                }
            }
        }
        out
    }

    /// The `[[certificate]]` tables of a document, each with where its name is.
    fn certificates_of(
        &mut self,
        root: &DeTable<'_>,
        defaults: Option<&DeTable<'_>>,
    ) -> Vec<(CertificateConfig, Origin)> {
        let mut out = Vec::new();
        let Some((k, v)) = root.iter().find(|(k, _)| k.get_ref() == "certificate") else {
            return out;
        };
        match v.get_ref() {
            DeValue::Array(items) if items.iter().all(|i| i.get_ref().is_table()) => {
                self.certificates_in(items, 0, defaults, &mut out);
            }
            _ => {
                self.report(
                    &k.span(),
                    "top level",
                    "`certificate` must be written as [[certificate]] tables",
                );
            }
        }
        out
    }

    /// The checks across `certificates`; when they pass and every included file was read,
    /// the certificates kept for the next read ([`cache`]).
    fn across_and_keep(
        &mut self,
        path: &Path,
        agent: Option<&AgentConfig>,
        certificates: &[(CertificateConfig, Origin)],
        included: &Included,
    ) {
        self.across_certificates(certificates, path);
        if self.problems.is_empty()
            && included.stamps.len() == included.fragments.len()
            && !included.fragments.is_empty()
            && let Some(a) = agent
        {
            let kept: Vec<(&CertificateConfig, Option<&Path>)> = certificates
                .iter()
                .map(|(c, o)| (c, o.file.as_deref()))
                .collect();
            cache::store(&a.state_dir, path, self.text, &included.stamps, &kept);
        }
    }

    /// The certificate tables `items`, the first of them the document's `first`th.
    fn certificates_in(
        &mut self,
        items: &[Spanned<DeValue<'_>>],
        first: usize,
        defaults: Option<&DeTable<'_>>,
        out: &mut Vec<(CertificateConfig, Origin)>,
    ) {
        for (i, item) in items.iter().enumerate() {
            if let DeValue::Table(t) = item.get_ref()
                && let Some(c) = self.certificate(first + i, t, item.span(), defaults)
            {
                let span = t
                    .iter()
                    .find(|(k, _)| k.get_ref() == "name")
                    .map_or(item.span(), |(k, _)| k.span());
                let origin = Origin {
                    file: self.file.clone(),
                    line: self.line(&span),
                };
                out.push((c, origin));
            }
        }
    }

    /// The certificate tables of a document read in parts, one part at a time (each part's
    /// spanned document dropped before the next is read); `Err` when a part does not read or
    /// holds anything but certificate tables.
    fn certificates_in_parts(
        &mut self,
        parts: &split::Parts,
        defaults: Option<&DeTable<'_>>,
    ) -> Result<Vec<(CertificateConfig, Origin)>, Whole> {
        let text = self.text;
        let mut out = Vec::new();
        let mut first = 0;
        for range in &parts.tables {
            let part = text.get(range.clone()).ok_or(Whole)?;
            let root = DeTable::parse(part).map_err(|_| Whole)?;
            let mut keys = root.get_ref().iter();
            let items = match (keys.next(), keys.next()) {
                (Some((k, v)), None) if k.get_ref() == "certificate" => match v.get_ref() {
                    DeValue::Array(items) if items.iter().all(|i| i.get_ref().is_table()) => items,
                    _ => return Err(Whole),
                },
                _ => return Err(Whole),
            };
            self.base = Some(range.start);
            self.certificates_in(items, first, defaults, &mut out);
            self.base = None;
            first += items.len();
        }
        Ok(out)
    }

    /// Reads an included file: `[[certificate]]` tables only, `[defaults]` of the main file
    /// applied, every problem naming the included file and its line.
    fn fragment(
        &mut self,
        dir: &mut include::Dir,
        file: &Path,
        include_span: &Range<usize>,
        defaults: Option<&DeTable<'_>>,
        certificates: &mut Vec<(CertificateConfig, Origin)>,
    ) -> Option<include::Stamp> {
        let (text, stamp) = match dir.read(file) {
            Ok((t, stamp)) => {
                self.writable_by_others(file, stamp.mode());
                (t, stamp)
            }
            Err(e) => {
                let msg = format!(
                    "`include`: could not read {}: {}",
                    file.display(),
                    crate::fsutil::io_text(&e)
                );
                self.report(include_span, "[agent]", msg);
                return None;
            }
        };
        let mut sub = Checker {
            text: &text,
            problems: Vec::new(),
            warnings: Vec::new(),
            programs: self.programs,
            includes: false,
            file: Some(file.to_path_buf()),
            main_breaks: Some(self.head_breaks.as_deref().unwrap_or(&self.breaks)),
            breaks: breaks_of(&text),
            base: None,
            head_breaks: None,
            split_from: usize::MAX,
            checked: std::mem::take(&mut self.checked),
            acme_names: self.acme_names.clone(),
        };
        match DeTable::parse(&text) {
            Ok(root) => {
                let root = root.get_ref();
                for (k, _) in root.iter() {
                    if k.get_ref() != "certificate" {
                        let msg = format!(
                            "`{}`: an included file holds only [[certificate]] tables; set it \
                             in the main configuration file",
                            k.get_ref()
                        );
                        sub.report(&k.span(), "top level", msg);
                    }
                }
                certificates.extend(sub.certificates_of(root, defaults));
            }
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let msg = format!("invalid TOML: {}", e.message().trim());
                sub.report(&span, "syntax", msg);
            }
        }
        self.problems.append(&mut sub.problems);
        self.warnings.append(&mut sub.warnings);
        self.checked = sub.checked;
        Some(stamp)
    }

    /// Warns about an included file anyone may write to.
    fn writable_by_others(&mut self, file: &Path, mode: u32) {
        if mode & 0o002 != 0 {
            self.warnings.push(Problem {
                file: Some(file.to_path_buf()),
                line: 1,
                context: "include".into(),
                message: format!(
                    "writable by others (mode {:04o}); anyone could add a certificate or a \
                     command to it: chmod o-w it",
                    mode & 0o7777
                ),
            });
        }
    }
}

/// A document read in parts does not read as the whole would: it is read whole.
pub(super) struct Whole;

/// The included files of a document.
#[derive(Default)]
struct Included {
    /// The files `[agent] include` names, in order.
    fragments: Vec<PathBuf>,
    /// The stamps of the files read, or of the kept ones as checked now.
    stamps: Vec<(PathBuf, include::Stamp)>,
    /// Their certificates were kept from an earlier run.
    from_cache: bool,
}

/// Where a certificate is defined: its file (`None`: the main file) and the line of its name.
pub(super) struct Origin {
    pub(super) file: Option<PathBuf>,
    pub(super) line: usize,
}

impl Origin {
    /// A certificate kept from an earlier run (no checks across certificates are made again).
    const KEPT: Origin = Origin {
        file: None,
        line: 0,
    };
}

/// The certificates, each told `api.ca_file` (the CA file its `chain_trust` names).
fn with_ca_file(
    certificates: Vec<(CertificateConfig, Origin)>,
    api: Option<&crate::config::ApiConfig>,
) -> Vec<CertificateConfig> {
    let ca_file = api.and_then(|a| a.ca_file.clone());
    certificates
        .into_iter()
        .map(|(mut c, _)| {
            c.install.ca_file.clone_from(&ca_file);
            c
        })
        .collect()
}
