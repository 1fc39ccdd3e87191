//! Fleet coordination against a real three-member etcd cluster on loopback: one host leads at
//! a time; a leader whose lease ended cannot write (fencing) and is told who leads; a leader
//! that stops renewing (a killed host) is replaced within the lease; one member down keeps
//! the quorum and the work going; two down stop every write with a clear error, and the
//! fleet resumes when they return. Lists are read whole across answers; a part of every
//! host's keys is read without the rest.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use cert_agent::testing::fleet::{
    Expect, Fleet, FleetError, FleetOptions, FleetWatch, LeadEvent, Written,
};
use support::etcd::{self, EtcdCluster};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn options(cluster: &EtcdCluster, host: &str, prefix: &str) -> FleetOptions {
    let mut o = FleetOptions::new(cluster.endpoints(), host);
    o.prefix = prefix.to_owned();
    o.lease_ttl = Duration::from_secs(3);
    o.request_timeout = Duration::from_secs(2);
    o
}

#[test]
fn one_host_leads_and_a_deposed_leader_cannot_write() {
    if !etcd::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), 3);
    runtime().block_on(async {
        let a = Fleet::connect(&options(&cluster, "web1", "/t1/"))
            .await
            .unwrap();
        let b = Fleet::connect(&options(&cluster, "web2", "/t1/"))
            .await
            .unwrap();
        let lead = a.try_lead().await.unwrap().expect("web1 leads");
        assert!(lead.is_held());
        assert!(
            b.try_lead().await.unwrap().is_none(),
            "one leader at a time"
        );
        assert_eq!(b.leader().await.unwrap().as_deref(), Some("web1"));

        // Fenced writes with expectations.
        let first = lead
            .put("certs/www/intent", b"1".to_vec(), Expect::Absent)
            .await
            .unwrap();
        let Written::Done(rev) = first else {
            panic!("{first:?}")
        };
        assert_eq!(
            lead.put("certs/www/intent", b"2".to_vec(), Expect::Absent)
                .await
                .unwrap(),
            Written::Conflict(Some(b"1".to_vec()))
        );
        assert!(matches!(
            lead.put("certs/www/intent", b"3".to_vec(), Expect::Revision(rev))
                .await
                .unwrap(),
            Written::Done(_)
        ));
        assert_eq!(
            b.get("certs/www/intent").await.unwrap().unwrap().0,
            b"3".to_vec()
        );

        // The lease ends behind the leader's back (as when etcd expires it after a pause);
        // another host takes the lead, and every write of the old leader is refused.
        let mut raw = etcd_client::Client::connect(cluster.endpoints(), None)
            .await
            .unwrap();
        let leases = raw.leases().await.unwrap();
        for l in leases.leases() {
            raw.lease_revoke(l.id()).await.unwrap();
        }
        let lead_b = b.try_lead().await.unwrap().expect("web2 takes the lead");
        let err = lead
            .put("certs/www/intent", b"4".to_vec(), Expect::Any)
            .await
            .unwrap_err();
        match &err {
            FleetError::NotLeader { host, now } => {
                assert_eq!(host, "web1");
                assert_eq!(now.as_deref(), Some("web2"));
            }
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains("web2 leads now"), "{err}");
        assert!(!lead.is_held(), "a refused write ends the lead locally");
        assert_eq!(
            b.get("certs/www/intent").await.unwrap().unwrap().0,
            b"3".to_vec()
        );
        assert!(lead_b.revision() > lead.revision());
        lead_b.resign().await;
        assert_eq!(a.leader().await.unwrap(), None, "resigning frees the lead");
    });
}

#[test]
fn a_leader_that_stops_renewing_is_replaced_within_its_lease() {
    if !etcd::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), 3);
    runtime().block_on(async {
        let a = Fleet::connect(&options(&cluster, "web1", "/t2/"))
            .await
            .unwrap();
        let b = Fleet::connect(&options(&cluster, "web2", "/t2/"))
            .await
            .unwrap();
        let lead = a.try_lead().await.unwrap().expect("web1 leads");
        // Renewal keeps the lead well past the TTL (the time passing is what is checked).
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(lead.is_held(), "renewed");
        assert!(b.try_lead().await.unwrap().is_none());
        assert!(lead.time_left() <= Duration::from_secs(3));

        // The leader stops renewing, as a killed host does.
        drop(lead);
        let stopped = Instant::now();
        let lead_b = loop {
            if let Some(l) = b.try_lead().await.unwrap() {
                break l;
            }
            assert!(
                stopped.elapsed() < Duration::from_secs(10),
                "no takeover within 10 s of a 3 s lease"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let took = stopped.elapsed();
        // The lease (3 s) plus etcd's expiry check and this loop's 100 ms; more on a loaded
        // machine.
        assert!(took <= Duration::from_secs(8), "takeover after {took:?}");
        assert!(lead_b.is_held());
        eprintln!("takeover {} ms after the leader stopped", took.as_millis());
    });
}

/// The next lead event the watch reports (other changes skipped); panics after 15 s.
async fn next_lead_event(watch: &mut FleetWatch) -> LeadEvent {
    tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let changes = watch.changed().await.unwrap();
            if let Some(e) = changes.lead.into_iter().next() {
                return e;
            }
        }
    })
    .await
    .expect("a lead event within 15 s")
}

#[test]
fn the_watch_tells_a_lead_given_up_from_one_whose_lease_ended() {
    if !etcd::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), 3);
    runtime().block_on(async {
        let a = Fleet::connect(&options(&cluster, "web1", "/t5/"))
            .await
            .unwrap();
        let b = Fleet::connect(&options(&cluster, "web2", "/t5/"))
            .await
            .unwrap();
        let mut watch = b.watch().await.unwrap();

        // Given up: the deletion comes with `resigned` at its revision.
        let lead = a.try_lead().await.unwrap().expect("web1 leads");
        assert_eq!(
            next_lead_event(&mut watch).await,
            LeadEvent::Taken {
                host: "web1".into()
            }
        );
        lead.resign().await;
        let LeadEvent::Ended { revision } = next_lead_event(&mut watch).await else {
            panic!("the lead ends")
        };
        assert!(b.resigned_at(revision).await.unwrap(), "given up");

        // Dropped, as by a killed host: the lease ends, nothing marks it.
        let lead = a.try_lead().await.unwrap().expect("web1 leads again");
        assert!(matches!(
            next_lead_event(&mut watch).await,
            LeadEvent::Taken { .. }
        ));
        drop(lead);
        let LeadEvent::Ended { revision } = next_lead_event(&mut watch).await else {
            panic!("the lease ends")
        };
        assert!(
            !b.resigned_at(revision).await.unwrap(),
            "ended with its lease"
        );
        // A forged marker written later does not match the deletion's revision.
        let mut raw = etcd_client::Client::connect(cluster.endpoints(), None)
            .await
            .unwrap();
        raw.put("/t5/resigned", "web1", None).await.unwrap();
        assert!(!b.resigned_at(revision).await.unwrap());
    });
}

#[test]
fn the_fleet_works_on_with_one_member_down_and_stops_writing_without_a_quorum() {
    const LEASE: Duration = Duration::from_secs(6);
    if !etcd::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = EtcdCluster::start(dir.path(), 3);
    let rt = runtime();
    let a = rt
        .block_on(Fleet::connect(&FleetOptions {
            // Longer than the other tests: an etcd leader election after a member stops
            // takes a second or two on a loaded machine, and the lead must outlast it.
            lease_ttl: LEASE,
            ..options(&cluster, "web1", "/t3/")
        }))
        .unwrap();
    let lead = rt.block_on(a.try_lead()).unwrap().expect("web1 leads");
    let put =
        |v: &str| rt.block_on(lead.put("certs/www/current", v.as_bytes().to_vec(), Expect::Any));
    assert!(put("1").is_ok());

    // One member of three down: the quorum holds and writes go on (a request may first meet
    // the dead member; the client moves on to the others).
    cluster.stop(2);
    let mut last = None;
    let ok = (0..20).any(|_| match put("2") {
        Ok(_) => true,
        Err(e) => {
            last = Some(e.to_string());
            std::thread::sleep(Duration::from_millis(250));
            false
        }
    });
    assert!(
        ok,
        "writes continue with two members of three: {last:?}\n{}",
        cluster.logs()
    );
    // Longer than a lease: the time passing is what is checked.
    std::thread::sleep(LEASE + Duration::from_secs(1));
    assert!(lead.is_held(), "the lead is kept");

    // Two down: no quorum. Writes fail with a clear error, within the request limit.
    cluster.stop(1);
    let started = Instant::now();
    let err = put("3").unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(8), "{err}");
    let text = err.to_string();
    assert!(
        matches!(
            err,
            FleetError::Unavailable { .. } | FleetError::NotLeader { .. }
        ),
        "{text}"
    );
    if let FleetError::Unavailable { .. } = err {
        assert!(
            text.contains("cannot be reached or has no quorum") && text.contains("places no order"),
            "{text}"
        );
    }
    // The leader cannot renew its lease either: it stops acting within the lease.
    support::wait::until_with(
        LEASE + Duration::from_secs(1),
        "the leader to give its lead up without a quorum",
        || !lead.is_held(),
        || cluster.logs(),
    );

    // The members return: a host leads again and writes go on.
    cluster.restart(1);
    cluster.restart(2);
    let again = (0..50).find_map(|_| {
        let l = rt.block_on(a.try_lead()).ok().flatten();
        if l.is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
        l
    });
    let again = again.unwrap_or_else(|| panic!("no lead after recovery\n{}", cluster.logs()));
    assert!(matches!(
        rt.block_on(again.put("certs/www/current", b"4".to_vec(), Expect::Any)),
        Ok(Written::Done(_))
    ));
    assert_eq!(
        rt.block_on(a.get("certs/www/current")).unwrap().unwrap().0,
        b"4".to_vec()
    );
}

#[test]
fn etcd_over_tls_with_client_certificates_and_a_user() {
    if !etcd::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tls = etcd::EtcdTls::generate(dir.path());
    let cluster = EtcdCluster::start_tls(dir.path(), 3, &tls);
    runtime().block_on(async {
        // The administrator's setup: a user limited to the fleet's prefix, authentication on.
        let admin = etcd_client::ConnectOptions::new().with_tls(
            etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(
                    std::fs::read(&tls.ca).unwrap(),
                ))
                .identity(etcd_client::Identity::from_pem(
                    std::fs::read(&tls.client_cert).unwrap(),
                    std::fs::read(&tls.client_key).unwrap(),
                )),
        );
        let mut raw = etcd_client::Client::connect(cluster.endpoints(), Some(admin))
            .await
            .unwrap();
        raw.user_add("root", "root-password", None).await.unwrap();
        raw.user_grant_role("root", "root").await.unwrap();
        raw.role_add("fleet").await.unwrap();
        raw.role_grant_permission(
            "fleet",
            etcd_client::Permission::read_write("/tls/").with_prefix(),
        )
        .await
        .unwrap();
        raw.user_add("agent", "agent-password", None).await.unwrap();
        raw.user_grant_role("agent", "fleet").await.unwrap();
        raw.auth_enable().await.unwrap();

        let mut o = options(&cluster, "web1", "/tls/");
        o.ca_file = Some(tls.ca.clone());
        o.cert_file = Some(tls.client_cert.clone());
        o.key_file = Some(tls.client_key.clone());
        o.user = Some("agent".into());
        o.password = Some(cert_agent::testing::values::Secret::new(
            "agent-password".to_owned(),
        ));
        let fleet = Fleet::connect(&o).await.unwrap();
        let lead = fleet.try_lead().await.unwrap().expect("leads over TLS");
        assert!(matches!(
            lead.put("certs/www/state", b"x".to_vec(), Expect::Any)
                .await
                .unwrap(),
            Written::Done(_)
        ));
        lead.resign().await;

        // A wrong password is refused with etcd's reason; the password is not in the message.
        let mut bad = o.clone();
        bad.password = Some(cert_agent::testing::values::Secret::new(
            "wrong-secret".to_owned(),
        ));
        let err = match Fleet::connect(&bad).await {
            Ok(f) => f.get("certs/www/state").await.unwrap_err(),
            Err(e) => e,
        };
        let text = err.to_string();
        assert!(matches!(err, FleetError::Refused { .. }), "{text}");
        assert!(text.contains("authentication failed"), "{text}");
        assert!(text.contains("[fleet] user, password_file"), "{text}");
        assert!(!text.contains("wrong-secret"), "{text}");

        // Without the client certificate the TLS handshake fails.
        let mut anonymous = o.clone();
        anonymous.cert_file = None;
        anonymous.key_file = None;
        let err = match Fleet::connect(&anonymous).await {
            Ok(f) => f.get("certs/www/state").await.unwrap_err(),
            Err(e) => e,
        };
        assert!(matches!(err, FleetError::Unavailable { .. }), "{err}");

        // A client key readable by group or others is refused before any connection, with
        // the file and its mode named (the rule of the API's password file).
        let shared_key = tls.client_key.with_extension("shared.key");
        std::fs::copy(&tls.client_key, &shared_key).unwrap();
        std::fs::set_permissions(&shared_key, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut shared = o.clone();
        shared.key_file = Some(shared_key.clone());
        let err = Fleet::connect(&shared).await.unwrap_err().to_string();
        assert!(err.contains("[fleet] key_file"), "{err}");
        assert!(err.contains(&shared_key.display().to_string()), "{err}");
        assert!(
            err.contains("mode 0640: it must not be readable by group or others"),
            "{err}"
        );
    });
}

#[test]
fn a_list_larger_than_one_answer_may_be_is_read_whole_and_in_order() {
    if !etcd::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), 3);
    runtime().block_on(async {
        let a = Fleet::connect(&options(&cluster, "web1", "/t7/"))
            .await
            .unwrap();
        let lead = a.try_lead().await.unwrap().expect("web1 leads");
        // 250 values of 40 KiB: 10 MiB, more than the 4 MiB one answer may carry.
        for i in 0..250u32 {
            let value = vec![u8::try_from(i % 251).unwrap(); 40 * 1024];
            lead.put(&format!("certs/c{i:03}/current"), value, Expect::Any)
                .await
                .unwrap();
        }
        // Just past the prefix's range: not listed.
        lead.put("certs0", b"outside".to_vec(), Expect::Any)
            .await
            .unwrap();
        let listed = a.list("certs/").await.unwrap();
        assert_eq!(listed.len(), 250);
        for (i, (key, value)) in listed.iter().enumerate() {
            assert_eq!(key, &format!("certs/c{i:03}/current"));
            assert_eq!(value.len(), 40 * 1024);
            assert_eq!(value[0], u8::try_from(i % 251).unwrap());
        }
        lead.resign().await;
    });
}

#[test]
fn each_hosts_part_is_read_without_the_rest_of_its_values() {
    if !etcd::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), 3);
    runtime().block_on(async {
        let a = Fleet::connect(&options(&cluster, "web1", "/t8/"))
            .await
            .unwrap();
        let lead = a.try_lead().await.unwrap().expect("web1 leads");
        // Hosts whose names sort around each other's keys (`-` sorts before `/`, `0` after),
        // a key directly under `hosts/`, and one just past it.
        let keys = [
            "hosts/odd",
            "hosts/web1-x/certs/www",
            "hosts/web1-x/seen",
            "hosts/web1/certs/www",
            "hosts/web1/dcv/www",
            "hosts/web1/proof/shop",
            "hosts/web1/proof/www",
            "hosts/web1/rollout/www",
            "hosts/web1/seen",
            "hosts/web1/unplaced/www",
            "hosts/web10/proof/www",
            "hosts/web10/unplaced/www",
            "hosts/web10/unplaced/wwwx",
            "hosts0/seen",
        ];
        for k in keys {
            lead.put(k, k.as_bytes().to_vec(), Expect::Any)
                .await
                .unwrap();
        }
        let (hosts, revision) = a.children("hosts/").await.unwrap();
        assert_eq!(hosts, ["odd", "web1-x", "web1", "web10"]);
        assert!(revision > 0);
        let read = |v: Vec<(String, Vec<u8>)>| -> Vec<String> {
            v.into_iter()
                .map(|(k, value)| {
                    assert_eq!(k.as_bytes(), value, "each key with its own value");
                    k
                })
                .collect()
        };
        assert_eq!(
            read(a.hosts_between("proof/", "seen").await.unwrap()),
            [
                "hosts/web1-x/seen",
                "hosts/web1/proof/shop",
                "hosts/web1/proof/www",
                "hosts/web1/rollout/www",
                "hosts/web1/seen",
                "hosts/web10/proof/www",
            ]
        );
        assert_eq!(
            read(a.hosts_under("unplaced/www").await.unwrap()),
            [
                "hosts/web1/unplaced/www",
                "hosts/web10/unplaced/www",
                "hosts/web10/unplaced/wwwx",
            ]
        );
        assert!(a.hosts_under("nothing").await.unwrap().is_empty());
        // 250 hosts of 3 keys: each read once, in order.
        for h in 0..250 {
            for part in ["certs/www", "proof/www", "seen"] {
                let k = format!("hosts/h{h:03}/{part}");
                lead.put(&k, k.as_bytes().to_vec(), Expect::Any)
                    .await
                    .unwrap();
            }
        }
        let (hosts, _) = a.children("hosts/").await.unwrap();
        assert_eq!(hosts.len(), 254);
        let seen = read(a.hosts_under("seen").await.unwrap());
        assert_eq!(seen.len(), 252);
        assert_eq!(seen[0], "hosts/h000/seen");
        assert_eq!(seen[249], "hosts/h249/seen");
        lead.resign().await;
    });
}
