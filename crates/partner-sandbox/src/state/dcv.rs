//! Domain control validation: what each method expects (file content and path, CNAME and
//! TXT records), the check schedule, the DNS zone and EMAIL approvals, and the DCV endpoints
//! (DCV emails, DCV status, change DCV, resend DCV).

use serde_json::{Map, Value, json};

use super::DnsRecord;
use super::State;
use super::answers::{action, error};
use super::catalogue::{Family, PROVIDER_D};
use super::model::{Cert, DNS_TXT_ALIASES, DomainDcv, Method};
use super::names;
use super::params::Fields;
use crate::wire::{ApiRequest, ApiResponse, DcvCheck};

/// First check of a domain, after the request reaches the CA.
pub(super) const FIRST_CHECK_DELAY: i64 = 30;
/// Retry interval for the first `FAST_ATTEMPTS` failed checks.
pub(super) const RETRY: i64 = 60;
pub(super) const FAST_ATTEMPTS: u32 = 10;
/// Retry interval afterwards.
pub(super) const SLOW_RETRY: i64 = 300;
/// A file check handed out and never reported is handed out again after this long.
pub(super) const IN_FLIGHT_TIMEOUT: i64 = 60;
/// Family S reports the method (`dcv_method`, `api: true`) this long after the request
/// reached the CA ("null ... e.g. first minutes after the order").
pub(super) const S_REPORT_DELAY: i64 = 60;

/// Content of the CSR-hash file: SHA-256 of the CSR DER (upper-case hex), the family's CA
/// domain, the unique value; lines separated by LF, no trailing newline.
pub(super) fn file_content(cert: &Cert) -> String {
    format!(
        "{}\n{}\n{}",
        cert.csr.sha256_hex,
        cert.family().ca_domain(),
        cert.unique_value
    )
}

/// `/.well-known/pki-validation/<MD5 of the CSR DER, upper-case hex>.txt`.
pub(super) fn file_path(cert: &Cert) -> String {
    format!("/.well-known/pki-validation/{}.txt", cert.csr.md5_hex)
}

/// CNAME_CSR_HASH record name: `_<md5 lower hex>.<domain without *.>`.
pub(super) fn cname_name(cert: &Cert, domain: &str) -> String {
    format!(
        "_{}.{}",
        cert.csr.md5_hex.to_ascii_lowercase(),
        names::base_domain(domain)
    )
}

/// CNAME_CSR_HASH record value: the SHA-256 split in two 32-character labels, (family S) the
/// unique value, then the family's CA domain; lower case.
pub(super) fn cname_value(cert: &Cert) -> String {
    let sha = cert.csr.sha256_hex.to_ascii_lowercase();
    let (a, b) = sha.split_at(32);
    if cert.family() == Family::S {
        format!(
            "{a}.{b}.{}.{}",
            cert.unique_value.to_ascii_lowercase(),
            cert.family().ca_domain()
        )
    } else {
        format!("{a}.{b}.{}", cert.family().ca_domain())
    }
}

/// `dcv_content` of the list and details: the file for file methods, the TXT value for
/// DNS_TXT_TOKEN, null otherwise.
pub(super) fn dcv_content(cert: &Cert) -> Option<String> {
    let main = cert.domains.first()?;
    match main.method {
        Method::Http | Method::Https => Some(file_content(cert)),
        Method::DnsTxt => cert.txt_value_for(main),
        Method::Email | Method::Cname => None,
    }
}

/// The fetched body passes when, after turning CRLF into LF, removing trailing whitespace
/// of every line and trailing empty lines, it equals the expected content exactly.
pub(super) fn content_matches(body: &[u8], expected: &str) -> bool {
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    let mut lines: Vec<&str> = text.split('\n').map(str::trim_end).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines == expected.split('\n').collect::<Vec<_>>()
}

fn retry_after(attempts: u32) -> i64 {
    if attempts < FAST_ATTEMPTS {
        RETRY
    } else {
        SLOW_RETRY
    }
}

/// Starts (or restarts) the checks of every unvalidated domain from `t`.
pub(super) fn schedule_checks(cert: &mut Cert, t: i64, instant: bool) {
    let first = if instant { t } else { t + FIRST_CHECK_DELAY };
    for d in cert.domains.iter_mut().filter(|d| !d.valid) {
        d.next_check = Some(first);
        d.in_flight_since = None;
    }
}

fn dns_value_eq(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.trim().trim_end_matches('.').to_ascii_lowercase();
    norm(a) == norm(b)
}

impl State {
    // ---- the validator's side ----

    pub(super) fn take_due_checks(&mut self, now: i64) -> Vec<DcvCheck> {
        let instant = self.instant;
        let mut out = Vec::new();
        for cert in self
            .certs
            .values_mut()
            .filter(|c| c.dcv_active() && !c.forced_hold)
        {
            let path = file_path(cert);
            let id = cert.id;
            for d in cert.domains.iter_mut() {
                let due = instant || d.next_check.is_some_and(|t| t <= now);
                let in_flight = d
                    .in_flight_since
                    .is_some_and(|t| now < t + IN_FLIGHT_TIMEOUT);
                if d.valid || !d.method.is_file() || !due || in_flight {
                    continue;
                }
                out.push(DcvCheck {
                    certificate_id: id,
                    domain: d.domain.clone(),
                    https: d.method == Method::Https,
                    path: path.clone(),
                });
                d.in_flight_since = Some(now);
                d.next_check = Some(now + retry_after(d.attempts + 1));
            }
        }
        out
    }

    pub(super) fn record_fetch(
        &mut self,
        check: &DcvCheck,
        fetched: Result<Vec<u8>, String>,
        now: i64,
    ) {
        let instant = self.instant;
        let Some(cert) = self.find_mut(check.certificate_id) else {
            return;
        };
        // A check handed out before a reissue or method change is stale.
        if !cert.dcv_active() || check.path != file_path(cert) {
            return;
        }
        let expected = file_content(cert);
        let Some(d) = cert.domain_mut(&check.domain) else {
            return;
        };
        if d.valid || !d.method.is_file() || (d.method == Method::Https) != check.https {
            return;
        }
        d.in_flight_since = None;
        d.attempts += 1;
        match fetched {
            Ok(body) if content_matches(&body, &expected) => {
                d.valid = true;
                d.validated_at = Some(now);
                d.next_check = None;
                d.last_result = Some("file content matches".to_string());
            }
            Ok(body) => {
                d.last_result = Some(format!(
                    "unexpected file content ({} bytes): {:?}",
                    body.len(),
                    String::from_utf8_lossy(&body[..body.len().min(200)])
                ));
                d.next_check = Some(if instant {
                    now
                } else {
                    now + retry_after(d.attempts)
                });
            }
            Err(why) => {
                d.last_result = Some(format!("fetch failed: {why}"));
                d.next_check = Some(if instant {
                    now
                } else {
                    now + retry_after(d.attempts)
                });
            }
        }
    }

    /// DNS checks (CNAME_CSR_HASH, DNS_TXT_TOKEN) of one certificate that are due.
    pub(super) fn check_dns(&mut self, id: u64, now: i64) {
        let instant = self.instant;
        let Some(cert) = self.certs.get(&id) else {
            return;
        };
        let mut results = Vec::new();
        for (i, d) in cert.domains.iter().enumerate() {
            let due = instant || d.next_check.is_some_and(|t| t <= now);
            if d.valid || !due || !matches!(d.method, Method::Cname | Method::DnsTxt) {
                continue;
            }
            results.push((i, self.dns_satisfied(cert, d)));
        }
        let cert = self.cert_mut(id);
        for (i, ok) in results {
            let d = &mut cert.domains[i];
            d.attempts += 1;
            if ok {
                d.valid = true;
                d.validated_at = Some(now);
                d.next_check = None;
                d.last_result = Some("DNS record found".to_string());
            } else {
                d.last_result = Some("DNS record not found".to_string());
                d.next_check = Some(if instant {
                    now
                } else {
                    now + retry_after(d.attempts)
                });
            }
        }
    }

    /// Family S looks for the TXT record at `_pki-validation.<domain>` and at every parent
    /// domain; families D and C at `_pki-validation.<domain>` only.
    fn dns_satisfied(&self, cert: &Cert, d: &DomainDcv) -> bool {
        match d.method {
            Method::Cname => {
                let name = cname_name(cert, &d.domain);
                let value = cname_value(cert);
                self.dns.iter().any(|r| {
                    r.rtype.eq_ignore_ascii_case("CNAME")
                        && dns_value_eq(&r.name, &name)
                        && dns_value_eq(&r.value, &value)
                })
            }
            Method::DnsTxt => {
                let Some(value) = cert.txt_value_for(d) else {
                    return false;
                };
                let owners: Vec<String> = if cert.family() == Family::S {
                    names::email_domains(&d.domain)
                } else {
                    vec![names::base_domain(&d.domain).to_string()]
                };
                owners.iter().any(|owner| {
                    let name = format!("_pki-validation.{owner}");
                    self.dns.iter().any(|r| {
                        r.rtype.eq_ignore_ascii_case("TXT")
                            && dns_value_eq(&r.name, &name)
                            && r.value == value
                    })
                })
            }
            _ => false,
        }
    }

    /// Adds a record; a CNAME replaces any CNAME of the same name, TXT records accumulate.
    pub(super) fn put_dns_record(&mut self, record: DnsRecord) {
        let record = DnsRecord {
            name: record
                .name
                .trim()
                .trim_end_matches('.')
                .to_ascii_lowercase(),
            rtype: record.rtype.trim().to_ascii_uppercase(),
            value: record.value,
        };
        if record.rtype == "CNAME" {
            self.dns
                .retain(|r| !(r.rtype == "CNAME" && r.name == record.name));
        }
        if !self.dns.contains(&record) {
            self.dns.push(record);
        }
    }

    pub(super) fn delete_dns_records(&mut self, name: &str, rtype: &str) {
        let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
        self.dns
            .retain(|r| !(r.name == name && r.rtype.eq_ignore_ascii_case(rtype)));
    }

    pub(super) fn approve(&mut self, id: u64, domain: Option<&str>) -> Result<(), String> {
        let now = self.last_now;
        let cert = self
            .find_mut(id)
            .ok_or_else(|| format!("no certificate {id}"))?;
        if !cert.dcv_active() {
            return Err(format!(
                "certificate {id} is not being validated at the CA (state {})",
                cert.display_state()
            ));
        }
        let mut approved = 0;
        for d in cert.domains.iter_mut() {
            let wanted = domain.is_none_or(|w| w.eq_ignore_ascii_case(&d.domain));
            if wanted && d.method == Method::Email {
                d.valid = true;
                d.validated_at = Some(now);
                d.last_result = Some("approved by email".to_string());
                approved += 1;
            }
        }
        match (approved, domain) {
            (0, Some(w)) => Err(format!(
                "certificate {id} has no domain {w} validated by EMAIL"
            )),
            (0, None) => Err(format!("certificate {id} has no domain validated by EMAIL")),
            _ => Ok(()),
        }
    }

    // ---- endpoints ----

    /// Endpoint 6.
    pub(super) fn dcv_emails(&self, req: &ApiRequest) -> ApiResponse {
        let fields = match Fields::from_body(req) {
            Ok(f) => f,
            Err(resp) => return *resp,
        };
        let Some(domain) = fields.non_blank("domain_name") else {
            return error(400, "domain_name is missing");
        };
        match fields.text("provider") {
            None | Some(PROVIDER_D) => {}
            Some(_) => return error(400, "provider does not have a valid value"),
        }
        let domain = domain.to_ascii_lowercase();
        if let Some(problem) = names::order_name_problem(&domain) {
            return error(400, &format!("domain_name {domain} {problem}"));
        }
        ApiResponse::json(200, names::dcv_emails_value(&domain))
    }

    /// Endpoint 8.
    pub(super) fn dcv_status(&self, id: u64, now: i64) -> ApiResponse {
        let cert = self.cert(id);
        if !cert.in_progress() {
            let state = cert.status_state().as_str();
            return ApiResponse::json(
                422,
                json!({
                    "success": false,
                    "error": format!("DCV status is only available while the certificate is in progress; its status is {state}"),
                    "certificate_status": state,
                    "dcv_available": false,
                }),
            );
        }
        let family = cert.family();
        let reported = cert.at_ca
            && (family != Family::S
                || self.instant
                || cert.at_ca_since.is_some_and(|t| now >= t + S_REPORT_DELAY));
        let mut dcv = Map::new();
        for d in &cert.domains {
            let mut emails = names::dcv_emails_value(&d.domain);
            if d.method == Method::DnsTxt {
                emails["random_value"] = json!(cert.txt_value_for(d));
            }
            let method = match (family, d.method) {
                (Family::C, _) => Value::Null,
                (_, Method::Email) => json!(d.email),
                (_, m) => json!(m.label()),
            };
            let status = if d.valid {
                "validated"
            } else if reported {
                "pending"
            } else {
                "not_sent"
            };
            let mut entry = json!({
                "sent": reported,
                "valid": d.valid,
                "api": reported,
                "method": method,
                "status": status,
                "emails": emails,
            });
            if family == Family::S {
                entry["dcv_method"] = if reported {
                    json!(d.method.code())
                } else {
                    Value::Null
                };
                entry["unique_value"] = json!(cert.unique_value);
                if d.method != Method::Email {
                    entry["hashes"] = json!({
                        "md5": cert.csr.md5_hex,
                        "sha1": cert.csr.sha256_hex,
                    });
                }
            }
            dcv.insert(d.domain.clone(), entry);
        }
        let mut body = json!({ "dcv": dcv });
        if family == Family::S {
            body["unique_value"] = json!(cert.unique_value);
        }
        ApiResponse::json(200, body)
    }

    /// Endpoint 9: always 200; `success` only when the change reached the CA.
    pub(super) fn change_dcv(&mut self, id: u64, req: &ApiRequest, now: i64) -> ApiResponse {
        const FAIL: &str = "Failed changing DCV email: ";
        let fields = match Fields::from_body(req) {
            Ok(f) => f,
            Err(resp) => return *resp,
        };
        let Some(value) = fields.non_blank("email").map(str::to_string) else {
            return error(400, "email is missing");
        };
        let instant = self.instant;
        let cert = self.cert(id);
        let family = cert.family();
        if let Some(r) = cert.replacement_id {
            return action(
                false,
                &format!("{FAIL}the certificate was replaced by certificate {r}"),
            );
        }
        let stored_only = !cert.at_ca
            && cert.pending_cancel_at.is_none()
            && (cert.base == super::model::Base::New
                || (cert.reissue_requested_at.is_some() && cert.in_progress()));
        if !cert.in_progress() && !stored_only {
            return action(
                false,
                &format!(
                    "{FAIL}the certificate is not in progress (status {})",
                    cert.display_state()
                ),
            );
        }
        let domain = match fields.non_blank("domain") {
            Some(d) => d.to_ascii_lowercase(),
            None if cert.domains.len() > 1 => {
                return action(
                    false,
                    &format!("{FAIL}domain is required for a multi-domain certificate"),
                );
            }
            None => cert.common_name.clone(),
        };
        let Some(current) = cert.domains.iter().find(|d| d.domain == domain) else {
            return action(
                false,
                &format!("{FAIL}{domain} is not a domain of this certificate"),
            );
        };
        let choice = match Method::parse(&value) {
            Some(m @ (Method::Http | Method::Cname)) => (m, None),
            Some(Method::Https) if family == Family::S => (Method::Https, None),
            Some(Method::Https) => {
                return action(
                    false,
                    &format!("{FAIL}HTTPS_CSR_HASH is available for family S only"),
                );
            }
            Some(Method::DnsTxt) | Some(Method::Email) => {
                return action(false, &format!("{FAIL}{value} cannot be set by change DCV"));
            }
            None if DNS_TXT_ALIASES.contains(&value.as_str()) => {
                return action(false, &format!("{FAIL}{value} cannot be set by change DCV"));
            }
            None => match super::orders::email_field_choice(&value, &domain, family) {
                Ok(choice) => choice,
                Err(why) => return action(false, &format!("{FAIL}{why}")),
            },
        };
        if names::is_wildcard(&domain) && choice.0.is_file() {
            return action(
                false,
                &format!("{FAIL}{value} cannot be used for the wildcard name {domain}"),
            );
        }
        let unchanged = current.method == choice.0 && current.email == choice.1;
        let cert = self.cert_mut(id);
        cert.updated_at = now;
        if let Some(d) = cert.domain_mut(&domain) {
            if !unchanged {
                d.method = choice.0;
                d.email = choice.1;
                d.valid = false;
                d.validated_at = None;
                d.random_value = None;
            }
            d.attempts = 0;
            d.in_flight_since = None;
            d.next_check = Some(if instant {
                now
            } else {
                now + FIRST_CHECK_DELAY
            });
        }
        if stored_only {
            return action(false, "DCV email has been changed");
        }
        if unchanged {
            action(true, "DCV email has been re-sent/ Alt DCV retried")
        } else {
            action(true, "DCV email has been changed and resent")
        }
    }

    /// Endpoint 10.
    pub(super) fn resend_dcv(&mut self, id: u64, now: i64) -> ApiResponse {
        let cert = self.cert_mut(id);
        if !cert.in_progress() || cert.replacement_id.is_some() {
            let state = cert.display_state();
            return action(
                false,
                &format!(
                    "Failed resend DCV email: the certificate is not in progress (status {state})"
                ),
            );
        }
        cert.updated_at = now;
        if cert.at_ca {
            for d in cert.domains.iter_mut().filter(|d| !d.valid) {
                d.next_check = Some(now);
                d.in_flight_since = None;
                d.attempts = 0;
            }
        }
        action(true, "DCV email has been re-sent/ Alt DCV retried")
    }
}
