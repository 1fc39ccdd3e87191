//! The access rules (`allow`, `deny`) and `auth_basic` in force where the CA's request is
//! served, and whether they keep the CA out.

use super::location::describe;
use super::tree::Directive;

/// The access rules (`allow`, `deny`) and `auth_basic` in force at one level: a level that
/// sets any replaces those of the level around it.
#[derive(Debug, Clone, Default)]
pub(super) struct Guards {
    access: Vec<Directive>,
    /// The `location` that sets the access rules, when one does.
    access_in: Option<String>,
    auth: Option<Directive>,
}

impl Guards {
    /// These, overridden by what `list` sets (`location`: the block's, described).
    pub(super) fn within(&self, list: &[Directive], location: Option<&Directive>) -> Guards {
        let access: Vec<Directive> = list
            .iter()
            .filter(|d| d.block.is_none() && (d.name == "allow" || d.name == "deny"))
            .cloned()
            .collect();
        let auth = list
            .iter()
            .rev()
            .find(|d| d.block.is_none() && d.name == "auth_basic");
        let mut out = self.clone();
        if !access.is_empty() {
            out.access = access;
            out.access_in = location.map(describe);
        }
        if let Some(a) = auth {
            out.auth = Some(a.clone());
        }
        out
    }

    /// Why they keep the CA out, or `None`. Its address is unknown: the first rule that
    /// names `all` decides.
    pub(super) fn refusal(&self) -> Option<String> {
        let all = self
            .access
            .iter()
            .find(|d| d.args.first().is_some_and(|a| a == "all"));
        if let Some(d) = all
            && d.name == "deny"
        {
            return Some(match &self.access_in {
                Some(location) => format!("{location} refuses it (`deny all;` at {})", d.at),
                None => format!("`deny all;` at {} refuses it", d.at),
            });
        }
        if let Some(d) = &self.auth
            && d.args.first().is_some_and(|a| a != "off")
        {
            return Some(format!("`auth_basic` at {} asks for a password", d.at));
        }
        None
    }
}
