//! Hostile bundles end to end: for every broken per-server bundle the sandbox can send, the
//! run fails with a clear error and nothing is installed or written anywhere.

use crate::support;

use std::path::Path;

use partner_sandbox::bundle::HostileKind;
use partner_sandbox::{Fault, FaultKind};
use support::env::TestEnv;

/// One hostile variant: placeholders at the install paths stay byte-identical, no file
/// appears or changes anywhere under the test directory (the agent's working directory is
/// two levels below it, so `../` names would land inside), and nothing is written to `/etc`.
fn hostile(kind: HostileKind) {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-hostile.test"]);
    let placeholder = env.write_placeholder(&spec);
    let files = spec.files.clone();
    env.certs.push(spec);
    env.sandbox
        .inject(Fault::new(FaultKind::HostileBundle { hostile: kind }));
    let before = env.tree();

    let out = env.renew();
    out.expect_code(1);
    let outcome = out.outcome("www");
    assert_eq!(outcome["outcome"], "failed", "{}", out.describe());
    let error = outcome["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("rejected") && error.contains("nothing was installed"),
        "{kind:?}: the error says the bundle was refused: {error}"
    );
    assert!(
        env.calls()
            .iter()
            .any(|c| c.path.ends_with("/download_bundle") && c.fault.is_some()),
        "the hostile bundle was served"
    );

    for p in files.all() {
        assert_eq!(
            std::fs::read(&p).ok().as_ref(),
            placeholder.get(&p),
            "{kind:?}: {} is unchanged",
            p.display()
        );
    }
    let after = env.tree();
    let changed: Vec<_> = after
        .iter()
        .filter(|(p, b)| before.get(*p) != Some(*b))
        .map(|(p, _)| p.clone())
        .collect();
    assert!(
        changed.is_empty(),
        "{kind:?}: files written or changed: {changed:?}"
    );
    for p in ["/etc/evil.crt", "/evil.crt", "/evil"] {
        assert!(!Path::new(p).exists(), "{kind:?}: {p} was written");
    }
    let leftover: Vec<_> = std::fs::read_dir(files.key.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !files.all().contains(p))
        .collect();
    assert!(
        leftover.is_empty(),
        "{kind:?}: temporary files left beside the install paths: {leftover:?}"
    );
    assert_eq!(env.billed(), 1);
}

macro_rules! hostile_tests {
    ($($name:ident => $kind:ident),* $(,)?) => {$(
        /// Guards the bundle checks against this broken bundle: refused, nothing installed.
        #[test]
        fn $name() {
            hostile(HostileKind::$kind);
        }
    )*
    /// Every variant the sandbox knows has a test here.
    #[test]
    fn every_hostile_kind_is_covered() {
        let covered = [$(HostileKind::$kind),*];
        for kind in HostileKind::ALL {
            assert!(covered.contains(&kind), "{kind:?} has no test");
        }
    }
    };
}

hostile_tests! {
    dot_dot_entry_names => DotDot,
    absolute_entry_name => Absolute,
    symlink_entry => Symlink,
    oversized_entry => Oversized,
    truncated_zip => Truncated,
    leaf_for_another_key => WrongKey,
    leaf_for_another_domain => OtherDomain,
    expired_leaf => Expired,
    chain_of_another_authority => ForeignCa,
    chain_without_its_intermediate => NoIntermediate,
}

/// Guards recovery after a rejected bundle: the order and the local key are kept, so the next
/// run (forced past the failure backoff; the CA's bundle now genuine) installs without a new
/// order.
#[test]
fn next_run_after_a_rejected_bundle_installs_without_new_order() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["again.e2e-hostile.test"]);
    let files = spec.files.clone();
    env.certs.push(spec);
    env.sandbox.inject(Fault::new(FaultKind::HostileBundle {
        hostile: HostileKind::WrongKey,
    }));
    env.renew().expect_code(1);
    assert!(!files.key.exists(), "nothing installed");
    let out = env.renew_force();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    let leaf = support::env::Leaf::from_pem_file(files.cert.as_ref().unwrap());
    assert_eq!(leaf.serial, serial);
    assert_eq!(leaf.spki, support::env::key_spki(&files.key));
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);
}

/// Guards the root check of `chain_trust`: the chain of another authority (the sandbox's names,
/// other keys) that the default refuses (`chain_of_another_authority`) is linked and for the
/// right key and names — with `chain_trust = "none"` it is installed, so only the root check
/// tells it apart.
#[test]
fn a_chain_of_another_authority_is_refused_by_its_root_alone() {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", &["foreign.e2e-hostile.test"]);
    spec.extra.push_str("chain_trust = \"none\"\n");
    env.certs.push(spec);
    env.sandbox.inject(Fault::new(FaultKind::HostileBundle {
        hostile: HostileKind::ForeignCa,
    }));
    let out = env.renew();
    out.expect_code(0);
    assert_eq!(
        out.outcome("www")["outcome"],
        "installed",
        "{}",
        out.describe()
    );
}
