//! `[[certificate]]` (with `[defaults]` merged in): names, product, validation, install
//! paths and commands; and the checks across certificates.

use super::document::Origin;
use super::*;

impl Checker<'_> {
    pub(super) fn certificate(
        &mut self,
        index: usize,
        t: &DeTable<'_>,
        header: Range<usize>,
        defaults: Option<&DeTable<'_>>,
    ) -> Option<CertificateConfig> {
        let raw_name = t
            .iter()
            .find(|(k, _)| k.get_ref() == "name")
            .and_then(|(_, v)| v.get_ref().as_str())
            .filter(|n| validate_certificate_name(n).is_ok());
        let context = match raw_name {
            Some(n) => format!("certificate '{n}'"),
            None => format!("certificate #{}", index + 1),
        };
        let allowed = defs::certificate_names();
        self.unknown_keys(t, &context, &allowed, "[[certificate]]");
        let mut tables = vec![(t, false)];
        if let Some(d) = defaults {
            tables.push((d, true));
        }
        let s = Scope {
            context,
            header,
            tables,
        };

        let name = self.text(&s, "name");
        if let (Some(n), Some(f)) = (&name, s.get("name"))
            && let Err(m) = validate_certificate_name(n)
        {
            self.bad(&s, &f, m);
        }
        if s.get("name").is_none() {
            self.missing(&s, "name");
        }

        let domains = self.domains(&s);
        let issuer = self.issuer(&s);
        let acme = issuer.as_ref().and_then(Issuer::acme);
        // An issuer in error asks for nothing more (no Partner keys reported missing).
        let partner = matches!(issuer, Some(Issuer::Partner));
        let product = self.product(&s, partner);
        let dcv = self.dcv_spec(&s, domains.as_deref());
        if let (Some(ca), Some(dcv)) = (acme, &dcv) {
            self.acme_certificate(&s, ca, dcv);
        }
        let profile = self.profile(&s);
        let install = self.install_spec(&s);
        let order = self.order_spec(&s, product, partner);
        let mut order = order?;
        order.issuer = issuer?;
        order.profile = profile;
        Some(CertificateConfig {
            name: name?,
            domains: domains?,
            order,
            dcv: dcv?,
            install: install?,
        })
    }

    /// The product, the lifetime and the key type of the order.
    /// `partner`: the Partner API's order (a product is required).
    fn product(&mut self, s: &Scope<'_, '_>, partner: bool) -> (Option<u64>, u32, KeyType) {
        let product_id = self.number::<u64>(s, &defs::CERT_PRODUCT_ID);
        let product_id = match product_id {
            None if !partner => Some(0),
            other => other,
        };
        if partner && s.get("product_id").is_none() {
            self.missing(s, "product_id");
        }
        // Section "OrderItem": days "60 to 2200".
        let days = self.setting(s, &defs::CERT_DAYS);
        let key_type = self
            .choice(s, &defs::CERT_KEY_TYPE)
            .unwrap_or(KeyType::EcdsaP256);
        (product_id, days, key_type)
    }

    /// The rest of the order: key reuse, family, the order-item data.
    fn order_spec(
        &mut self,
        s: &Scope<'_, '_>,
        (product_id, days, key_type): (Option<u64>, u32, KeyType),
        partner: bool,
    ) -> Option<OrderSpec> {
        let reuse_key = self.flag(s, &defs::CERT_REUSE_KEY);
        let family = self.choice(s, &defs::CERT_FAMILY);
        if reuse_key
            && family == Some(Family::C)
            && let Some(f) = s.get("reuse_key")
        {
            self.bad(
                s,
                &f,
                "family C needs a new key for every reissue (document, Reissue rule 4); \
                 remove `reuse_key` or set it to false",
            );
        }

        // Order item data.
        let country = self.text(s, "country");
        if let (Some(c), Some(f)) = (&country, s.get("country"))
            && !(c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase()))
        {
            self.bad(
                s,
                &f,
                format!("{c:?} is not an ISO 3166-1 alpha-2 code such as \"DE\""),
            );
        }
        let region = self.text(s, "region");
        let city = self.text(s, "city");
        for key in ["country", "region", "city"] {
            if partner && s.get(key).is_none() {
                let msg = format!("missing required key `{key}` (set it here or in [defaults])");
                self.report(&s.header, &s.context, msg);
            }
        }
        let organization_name = self.text(s, "organization_name");
        let organizational_unit = self.text(s, "organizational_unit");
        let address_1 = self.text(s, "address_1");
        let address_2 = self.text(s, "address_2");
        let zip_code = self.text(s, "zip_code");
        // Limits: unique_value "at most 20 characters, letters and digits".
        let unique_value = self.text(s, "unique_value");
        if let (Some(u), Some(f)) = (&unique_value, s.get("unique_value"))
            && !(u.len() <= 20 && u.bytes().all(|b| b.is_ascii_alphanumeric()))
        {
            self.bad(s, &f, "must be at most 20 letters and digits");
        }
        let ssl_server_software_id = self.setting(s, &defs::CERT_SSL_SERVER_SOFTWARE_ID);
        let certificate_id = self.number(s, &defs::CERT_CERTIFICATE_ID);
        // An ACME CA's order carries no order-item data.
        let (country, region, city) = if partner {
            (country, region, city)
        } else {
            (
                Some(country.unwrap_or_default()),
                Some(region.unwrap_or_default()),
                Some(city.unwrap_or_default()),
            )
        };
        Some(OrderSpec {
            issuer: Issuer::Partner,
            profile: None,
            certificate_id,
            product_id: product_id?,
            days,
            key_type,
            reuse_key,
            family,
            country: country?,
            region: region?,
            city: city?,
            organization_name,
            organizational_unit,
            address_1,
            address_2,
            zip_code,
            unique_value,
            ssl_server_software_id,
        })
    }

    /// How domain control is validated, complete for the method.
    fn dcv_spec(&mut self, s: &Scope<'_, '_>, domains: Option<&[String]>) -> Option<DcvSpec> {
        let dcv = self.choice(s, &defs::CERT_DCV).unwrap_or(DcvMethod::Http);
        let webroot = self.webroot(s);
        let standalone = self.flag(s, &defs::CERT_STANDALONE);
        let listen = match self.text(s, "listen") {
            Some(v) => match v.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    let f = s.get("listen")?;
                    self.bad(
                        s,
                        &f,
                        format!("{v:?} is not an address:port such as \"0.0.0.0:80\""),
                    );
                    None
                }
            },
            None => None,
        };
        let dns_hook = self.command(s, "dns_hook");
        let dcv_email = self.text(s, "dcv_email");
        if let (Some(e), Some(f)) = (&dcv_email, s.get("dcv_email"))
            && let Err(m) = validate_email(e)
        {
            self.bad(s, &f, m);
        }

        let cname_target_domain = self.text(s, "cname_target_domain");
        if let (Some(d), Some(f)) = (&cname_target_domain, s.get("cname_target_domain"))
            && let Err(e) = validate_domain(d)
        {
            self.bad(s, &f, e);
        }

        let spec = DcvSpec {
            method: dcv,
            webroot,
            standalone,
            listen: listen.unwrap_or_else(|| {
                DEFAULT_LISTEN
                    .parse()
                    .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 80)))
            }),
            dns_hook,
            email: dcv_email,
            cname_target_domain,
        };
        self.dcv_complete(s, &spec, domains);
        Some(spec)
    }

    /// Where and how the certificate is installed.
    fn install_spec(&mut self, s: &Scope<'_, '_>) -> Option<InstallSpec> {
        let server = self
            .choice(s, &defs::CERT_SERVER)
            .unwrap_or(ServerKind::Nginx);

        // Install.
        let cert_path = self.path(s, "cert_path");
        let chain_path = self.path(s, "chain_path");
        let fullchain_path = self.path(s, "fullchain_path");
        let key_path = self.path(s, "key_path");
        let combined_path = self.path(s, "combined_path");
        if let (Some(k), Some(f)) = (&key_path, s.get("key_path")) {
            for (other, p) in [
                ("cert_path", &cert_path),
                ("chain_path", &chain_path),
                ("fullchain_path", &fullchain_path),
            ] {
                if p.as_ref() == Some(k) {
                    self.bad(
                        s,
                        &f,
                        format!(
                            "must differ from `{other}` (the private key would be overwritten)"
                        ),
                    );
                }
            }
        }
        if let (Some(c), Some(f)) = (&combined_path, s.get("combined_path")) {
            for (other, p) in [
                ("cert_path", &cert_path),
                ("chain_path", &chain_path),
                ("fullchain_path", &fullchain_path),
                ("key_path", &key_path),
            ] {
                if p.as_ref() == Some(c) {
                    self.bad(
                        s,
                        &f,
                        format!(
                            "must differ from `{other}` (the combined key and chain is a file \
                             of its own)"
                        ),
                    );
                }
            }
        }
        if server == ServerKind::None
            && key_path.is_none()
            && s.get("key_path").is_none()
            && s.get("combined_path").is_none()
            && let Some(f) = s.get("server")
        {
            self.bad(
                s,
                &f,
                "\"none\" has no default layout: set `key_path` and `fullchain_path` or \
                 `cert_path`, or `combined_path`",
            );
        }
        let owner = self.text(s, "owner");
        let group = self.text(s, "group");
        let mode = self.mode(s);
        let reload_command = self.command(s, "reload_command");
        let configtest_command = self.command(s, "configtest_command");
        let deploy_hook = self.command(s, "deploy_hook");
        let verify_address = match s.get("verify_address") {
            None => (server != ServerKind::None).then(|| DEFAULT_VERIFY_ADDRESS.to_owned()),
            Some(_) => match self.string(s, "verify_address") {
                Some(v) if v.is_empty() => None,
                Some(v) => {
                    if !valid_host_port(&v) {
                        let f = s.get("verify_address")?;
                        self.bad(
                            s,
                            &f,
                            format!("{v:?} is not host:port (\"\" disables the check)"),
                        );
                    }
                    Some(v)
                }
                None => None,
            },
        };
        let chain_trust = self.choice(s, &defs::CERT_CHAIN_TRUST).unwrap_or_default();
        Some(InstallSpec {
            server,
            cert_path,
            chain_path,
            fullchain_path,
            key_path,
            combined_path,
            owner,
            group,
            mode,
            reload_command,
            configtest_command,
            deploy_hook,
            verify_address,
            chain_trust,
            ca_file: None,
        })
    }

    /// `domains`: non-empty array of valid, distinct names (lower-cased).
    fn domains(&mut self, s: &Scope<'_, '_>) -> Option<Vec<String>> {
        let Some(f) = s.get("domains") else {
            self.missing(s, "domains");
            return None;
        };
        let DeValue::Array(items) = f.value.get_ref() else {
            let found = type_name(f.value.get_ref());
            self.bad(
                s,
                &f,
                format!("expected an array of domain names, found {found}"),
            );
            return None;
        };
        if items.is_empty() {
            self.bad(
                s,
                &f,
                "must list at least one domain (the first is the common name)",
            );
            return None;
        }
        let mut out: Vec<String> = Vec::new();
        let mut ok = true;
        for item in items.iter() {
            let Some(d) = item.get_ref().as_str() else {
                self.bad(
                    s,
                    &f,
                    format!("expected strings, found {}", type_name(item.get_ref())),
                );
                ok = false;
                continue;
            };
            let d = d.to_ascii_lowercase();
            let at = Field {
                key: f.key,
                key_span: item.span(),
                value: item,
                from_defaults: false,
            };
            if let Err(m) = validate_domain(&d) {
                self.bad(s, &at, m);
                ok = false;
            } else if out.contains(&d) {
                self.bad(s, &at, format!("{d:?} is listed twice"));
                ok = false;
            } else {
                out.push(d);
            }
        }
        ok.then_some(out)
    }

    /// `webroot`: an absolute path, or a table domain → absolute path.
    fn webroot(&mut self, s: &Scope<'_, '_>) -> Option<Webroot> {
        let f = s.get("webroot")?;
        match f.value.get_ref() {
            DeValue::String(v) => self.absolute(s, &f, v).map(Webroot::Single),
            DeValue::Table(t) => {
                let mut map = BTreeMap::new();
                for (k, v) in t.iter() {
                    let at = Field {
                        key: f.key,
                        key_span: k.span(),
                        value: v,
                        from_defaults: f.from_defaults,
                    };
                    let domain = k.get_ref().to_ascii_lowercase();
                    match v.get_ref().as_str() {
                        Some(p) => {
                            if let Some(p) = self.absolute(s, &at, p) {
                                map.insert(domain, p);
                            }
                        }
                        None => {
                            let found = type_name(v.get_ref());
                            self.bad(
                                s,
                                &at,
                                format!("{domain:?}: expected a path, found {found}"),
                            );
                        }
                    }
                }
                Some(Webroot::PerDomain(map))
            }
            other => {
                let found = type_name(other);
                self.bad(
                    s,
                    &f,
                    format!("expected a path or a table of domain = path, found {found}"),
                );
                None
            }
        }
    }

    /// `mode` of the key file: "0640" or 0o640; never accessible by others.
    fn mode(&mut self, s: &Scope<'_, '_>) -> Option<u32> {
        let f = s.get("mode")?;
        let value = match f.value.get_ref() {
            DeValue::String(v) if !v.is_empty() && v.len() <= 5 => u32::from_str_radix(v, 8).ok(),
            DeValue::Integer(i) if i.radix() == 8 => u32::from_str_radix(i.as_str(), 8).ok(),
            DeValue::Integer(_) => {
                self.bad(s, &f, "write the mode in octal: \"0640\" or 0o640");
                return None;
            }
            _ => None,
        };
        match value {
            Some(m) if m <= 0o7777 && m & 0o007 == 0 => Some(m),
            Some(m) if m <= 0o7777 => {
                self.bad(
                    s,
                    &f,
                    format!("{m:04o} gives others access to the private key"),
                );
                None
            }
            _ => {
                self.bad(s, &f, "expected an octal file mode such as \"0640\"");
                None
            }
        }
    }

    /// Names unique; no two certificates install to the same file.
    /// Names and install paths are each one certificate's, across the main file and every
    /// included file; a clash names both places.
    pub(super) fn across_certificates(
        &mut self,
        certs: &[(CertificateConfig, Origin)],
        main: &Path,
    ) {
        let place = |o: &Origin| {
            format!(
                "{} line {}",
                o.file.as_deref().unwrap_or(main).display(),
                o.line
            )
        };
        let mut clash = |c: &CertificateConfig, at: &Origin, msg: String| {
            self.problems.push(Problem {
                file: at.file.clone(),
                line: at.line,
                context: format!("certificate '{}'", c.name),
                message: msg,
            });
        };
        let mut seen: HashMap<&str, &Origin> = HashMap::with_capacity(certs.len());
        for (c, origin) in certs {
            if let Some(first) = seen.get(c.name.as_str()) {
                let msg = format!(
                    "`name`: {:?} is also defined at {}; a name belongs to one certificate",
                    c.name,
                    place(first)
                );
                clash(c, origin, msg);
            } else {
                seen.insert(&c.name, origin);
            }
        }
        // Keyed by the path's bytes (hashing a `Path` walks its components: a fifth of the
        // configuration check for a thousand certificates).
        let mut owners: HashMap<std::borrow::Cow<'_, [u8]>, (&str, &Origin)> =
            HashMap::with_capacity(certs.len() * 4);
        for (c, origin) in certs {
            for p in [
                &c.install.cert_path,
                &c.install.chain_path,
                &c.install.fullchain_path,
                &c.install.key_path,
                &c.install.combined_path,
            ]
            .into_iter()
            .flatten()
            {
                let key = path_key(p);
                match owners.get(&key) {
                    Some((other, at)) if *other != c.name => {
                        let msg = format!(
                            "install path {} is also used by certificate '{other}' ({})",
                            p.display(),
                            place(at)
                        );
                        clash(c, origin, msg);
                    }
                    Some(_) => {}
                    None => {
                        owners.insert(key, (&c.name, origin));
                    }
                }
            }
        }
    }
}

/// `p`'s bytes, equal for two paths exactly when the paths are equal as `Path`s: the bytes
/// themselves when they hold no empty or `.` component (`//`, `/./`, a trailing `/` or `/.`),
/// otherwise rebuilt from the components.
fn path_key(p: &Path) -> std::borrow::Cow<'_, [u8]> {
    use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
    let b = p.as_os_str().as_bytes();
    let plain = !b.windows(2).any(|w| w == b"//")
        && !b.windows(3).any(|w| w == b"/./")
        && !b.ends_with(b"/")
        && !b.ends_with(b"/.")
        && !b.starts_with(b"./");
    if plain || b.is_empty() {
        return std::borrow::Cow::Borrowed(b);
    }
    std::borrow::Cow::Owned(
        p.components()
            .collect::<PathBuf>()
            .into_os_string()
            .into_vec(),
    )
}

#[cfg(test)]
mod path_keys {
    use super::*;

    #[test]
    fn keys_are_equal_exactly_when_paths_are() {
        let paths = [
            "/etc/ssl/a.pem",
            "/etc//ssl/a.pem",
            "/etc/./ssl/a.pem",
            "/etc/ssl/a.pem/",
            "/etc/ssl/a.pem/.",
            "/etc/ssl/../ssl/a.pem",
            "/etc/ssl/b.pem",
            "etc/ssl/a.pem",
            "./etc/ssl/a.pem",
            "/",
            "//",
        ];
        for a in paths {
            for b in paths {
                let (pa, pb) = (Path::new(a), Path::new(b));
                assert_eq!(pa == pb, path_key(pa) == path_key(pb), "{a} vs {b}");
            }
        }
    }
}
