//! Waves from the sorted host names, and the gate of each host: table-driven.

use super::*;
use crate::fleet::decision::{Decision, Verdict};
use crate::fleet::proof::{Answer, Proof};

fn hosts(n: usize) -> Vec<String> {
    let mut h: Vec<String> = (1..=n).map(|i| format!("web{i:02}")).collect();
    h.sort();
    h
}

fn config(canaries: Canaries, wave: WaveSize, pause_secs: u64) -> RolloutConfig {
    RolloutConfig {
        canaries,
        wave,
        pause_secs,
        deadline_fraction: 0.1,
    }
}

fn t(secs: i64) -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000) + time::Duration::seconds(secs)
}

fn proof(host: &str, serial: &str, at: i64, served: &str) -> (String, Proof) {
    (
        host.to_owned(),
        Proof {
            host: host.to_owned(),
            serial: serial.to_owned(),
            version: 2,
            at: t(at),
            answers: vec![Answer {
                address: "127.0.0.1:443".into(),
                server_name: "www.test".into(),
                served: Some(served.to_owned()),
                chain_error: None,
                error: None,
            }],
            health: None,
            since: None,
            rolled_back: None,
        },
    )
}

#[test]
fn waves_are_the_canaries_then_the_sorted_rest_a_wave_at_a_time() {
    let sizes = |c: &RolloutConfig, n: usize| -> Vec<usize> {
        waves(c, &hosts(n)).iter().map(Vec::len).collect()
    };
    // 50 hosts: 2 canaries, then a quarter of the 48 (12) per wave.
    let fifty = config(Canaries::Count(2), WaveSize::Fraction(0.25), 600);
    assert_eq!(sizes(&fifty, 50), [2, 12, 12, 12, 12]);
    let w = waves(&fifty, &hosts(50));
    assert_eq!(w[0], ["web01", "web02"]);
    assert_eq!(w[1][0], "web03");
    // Named canaries: only those that announce themselves, the rest in name order.
    let named = config(
        Canaries::Named(vec!["web03".into(), "gone".into()]),
        WaveSize::Count(2),
        0,
    );
    assert_eq!(
        waves(&named, &hosts(5)),
        [
            vec!["web03".to_owned()],
            vec!["web01".into(), "web02".into()],
            vec!["web04".into(), "web05".into()]
        ]
    );
    // A fraction rounds up; a wave holds at least one host; more canaries than hosts.
    assert_eq!(
        sizes(&config(Canaries::Count(1), WaveSize::Fraction(0.3), 0), 5),
        [1, 2, 2]
    );
    assert_eq!(
        sizes(&config(Canaries::Count(1), WaveSize::Fraction(0.01), 0), 3),
        [1, 1, 1]
    );
    assert_eq!(
        sizes(&config(Canaries::Count(9), WaveSize::Count(1), 0), 3),
        [3]
    );
    assert_eq!(
        sizes(&config(Canaries::Count(1), WaveSize::Fraction(1.0), 0), 1),
        [1]
    );
}

/// (host, proofs, now, expected: "go", "halted", or a part of the reason it waits).
type Row<'a> = (&'a str, Vec<(String, Proof)>, i64, &'a str);

#[test]
fn a_host_installs_once_every_earlier_wave_proved_the_serial_and_the_pause_passed() {
    let c = config(Canaries::Count(1), WaveSize::Count(2), 60);
    let h = hosts(5); // waves: [web01], [web02, web03], [web04, web05]
    let all = |p: &[(String, Proof)]| p.iter().cloned().collect::<BTreeMap<_, _>>();
    let canary = proof("web01", "0A", 100, "0A");
    let old = proof("web01", "09", 10, "09");
    let w2 = proof("web02", "0A", 200, "0A");
    let w3 = proof("web03", "0A", 230, "0A");
    let bad = proof("web02", "0A", 200, "09");
    let rows: Vec<Row<'_>> = vec![
        ("web01", vec![], 0, "go"),
        (
            "web02",
            vec![],
            0,
            "web01 (wave 0) has not proved serial 0A yet",
        ),
        (
            "web02",
            vec![old.clone()],
            500,
            "web01 (wave 0) has not proved serial 0A yet",
        ),
        (
            "web02",
            vec![canary.clone()],
            120,
            "the pause after wave 0 lasts until",
        ),
        ("web02", vec![canary.clone()], 160, "go"),
        (
            "web04",
            vec![canary.clone(), w2.clone()],
            999,
            "web03 (wave 1) has not proved",
        ),
        (
            "web04",
            vec![canary.clone(), w2.clone(), w3.clone()],
            280,
            "lasts until",
        ),
        (
            "web04",
            vec![canary.clone(), w2.clone(), w3.clone()],
            290,
            "go",
        ),
        ("web05", vec![canary.clone(), bad.clone()], 999, "halted"),
        ("web03", vec![canary.clone(), bad.clone()], 999, "go"),
        (
            "stranger",
            vec![canary.clone(), w2.clone(), w3.clone()],
            999,
            "web04 (wave 2)",
        ),
    ];
    for (host, proofs, now, want) in rows {
        let got = gate(&c, &h, (host, "0A"), (&all(&proofs), None), t(now));
        match (&got, want) {
            (Gate::Go, "go") => {}
            (Gate::Wait(why), w) if w != "go" && w != "halted" => {
                assert!(why.contains(w), "{host} at {now}: {why} / {w}");
            }
            (Gate::Halted(why), "halted") => {
                assert!(
                    why.starts_with("rollout halted at wave 1: web02: ")
                        && why.contains("serves serial 09, not 0A"),
                    "{why}"
                );
            }
            _ => panic!("{host} at {now}: {got:?}, expected {want}"),
        }
    }
}

#[test]
fn a_rollout_halts_at_the_first_failed_proof_of_a_wave_before_the_last() {
    let c = config(Canaries::Count(1), WaveSize::Count(2), 60);
    let h = hosts(5); // waves: [web01], [web02, web03], [web04, web05]
    let all = |p: &[(String, Proof)]| p.iter().cloned().collect::<BTreeMap<_, _>>();
    let canary = proof("web01", "0A", 100, "0A");
    let bad = |host: &str| proof(host, "0A", 200, "09");
    assert_eq!(
        halted(&c, &h, "0A", (&all(std::slice::from_ref(&canary)), None)),
        None
    );
    // The canary: the wave after it is kept back, named with its own words.
    let at_canary = halted(&c, &h, "0A", (&all(&[bad("web01")]), None)).expect("halted");
    assert!(
        at_canary.starts_with("rollout halted at wave 0: web01: ")
            && at_canary.contains("serves serial 09, not 0A"),
        "{at_canary}"
    );
    assert_eq!(
        gate(
            &c,
            &h,
            ("web02", "0A"),
            (&all(&[bad("web01")]), None),
            t(999)
        ),
        Gate::Halted(at_canary)
    );
    // The first failed proof in wave order.
    let both = all(&[canary.clone(), bad("web03"), bad("web02")]);
    let why = halted(&c, &h, "0A", (&both, None)).unwrap();
    assert!(
        why.starts_with("rollout halted at wave 1: web02: "),
        "{why}"
    );
    // A proof of another serial, or a failure in the last wave (no host kept back): no halt.
    assert_eq!(halted(&c, &h, "0B", (&both, None)), None);
    assert_eq!(
        halted(&c, &h, "0A", (&all(&[canary.clone(), bad("web05")]), None)),
        None
    );
    // Every host installed and proved the serial: the rollout is over, and the canary that
    // serves another serial since (drift) halts nothing.
    let mut done: BTreeMap<_, _> = ["web02", "web03", "web04", "web05"]
        .iter()
        .map(|host| proof(host, "0A", 300, "0A"))
        .collect();
    done.insert("web01".into(), bad("web01").1);
    assert_eq!(halted(&c, &h, "0A", (&done, None)), None);
    done.remove("web05");
    assert!(
        halted(&c, &h, "0A", (&done, None)).is_some(),
        "web05 kept back"
    );
}

fn decided(verdict: Verdict, serial: &str, at: i64) -> Decision {
    Decision {
        verdict,
        serial: serial.to_owned(),
        host: "web03".to_owned(),
        at: t(at),
    }
}

#[test]
fn a_resume_sets_the_failed_proofs_before_it_aside_and_an_abort_refuses_the_serial() {
    let c = config(Canaries::Count(1), WaveSize::Count(2), 0);
    let h = hosts(5); // waves: [web01], [web02, web03], [web04, web05]
    let all = |p: &[(String, Proof)]| p.iter().cloned().collect::<BTreeMap<_, _>>();
    let bad = all(&[proof("web01", "0A", 100, "09")]);
    let go = |d: &Decision| gate(&c, &h, ("web02", "0A"), (&bad, Some(d)), t(999));
    // Resumed after the failed proof: the next wave goes on, nothing is halted.
    let resumed = decided(Verdict::Resume, "0A", 150);
    assert_eq!(go(&resumed), Gate::Go);
    assert_eq!(halted(&c, &h, "0A", (&bad, Some(&resumed))), None);
    // A proof that fails after the resume halts it again.
    let later = all(&[proof("web01", "0A", 200, "09")]);
    assert!(matches!(
        gate(&c, &h, ("web02", "0A"), (&later, Some(&resumed)), t(999)),
        Gate::Halted(_)
    ));
    assert!(halted(&c, &h, "0A", (&later, Some(&resumed))).is_some());
    // Aborted: no host installs the serial, the canary's wave neither; not halted any more.
    let aborted = decided(Verdict::Abort, "0A", 150);
    for host in ["web01", "web02", "web05"] {
        match gate(&c, &h, (host, "0A"), (&bad, Some(&aborted)), t(999)) {
            Gate::Halted(why) => assert!(
                why.starts_with("rollout of serial 0A aborted by web03 at ")
                    && why.ends_with(": serial 0A is refused"),
                "{why}"
            ),
            other => panic!("{host}: {other:?}"),
        }
    }
    assert_eq!(halted(&c, &h, "0A", (&bad, Some(&aborted))), None);
}

#[test]
fn a_certificate_near_its_end_is_not_held_back_by_the_waves() {
    let c = config(Canaries::Count(1), WaveSize::Count(2), 0);
    // A certificate of 100 days from t(0): the last tenth begins on day 90.
    let day = |d: i64| t(d * 86_400);
    let serving = Some(("09", day(0), day(100)));
    assert_eq!(overdue(&c, serving, "0A", day(89)), None);
    let why = overdue(&c, serving, "0A", day(90)).expect("overdue");
    assert!(
        why.starts_with(
            "installed serial 0A at once, whatever its wave: the certificate this \
                         host served (serial 09) ends at "
        ) && why.contains("within the last 10% of its lifetime"),
        "{why}"
    );
    assert!(overdue(&c, serving, "0A", day(101)).is_some(), "expired");
    // Nothing installed, or the serial served already: nothing to override.
    assert_eq!(overdue(&c, None, "0A", day(99)), None);
    assert_eq!(overdue(&c, serving, "09", day(99)), None);
    // Another fraction.
    let half = RolloutConfig {
        deadline_fraction: 0.5,
        ..c
    };
    assert!(overdue(&half, serving, "0A", day(50)).is_some());
    assert_eq!(overdue(&half, serving, "0A", day(49)), None);
}

/// A drift proof that passes again keeps the time since which its host proved the serial: the
/// pause after its wave counts from then, not from each new proof (with `proof_interval_secs`
/// shorter than `rollout_pause_secs`, each drift proof would otherwise restart the pause and the
/// next wave would never come).
#[test]
fn the_pause_counts_from_when_a_host_first_proved_the_serial_not_from_its_drift_proofs() {
    let c = config(Canaries::Count(1), WaveSize::Count(1), 3600);
    let h = hosts(2);
    let (_, mut again) = proof("web01", "0A", 3000, "0A");
    again.since = Some(t(100));
    let proofs = BTreeMap::from([("web01".to_owned(), again.clone())]);
    assert_eq!(
        gate(&c, &h, ("web02", "0A"), (&proofs, None), t(3701)),
        Gate::Go
    );
    match gate(&c, &h, ("web02", "0A"), (&proofs, None), t(3600)) {
        Gate::Wait(why) => assert!(why.contains("lasts until"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A `since` after the proof itself counts as the proof's time.
    again.since = Some(t(9000));
    let proofs = BTreeMap::from([("web01".to_owned(), again)]);
    assert!(matches!(
        gate(&c, &h, ("web02", "0A"), (&proofs, None), t(6000)),
        Gate::Wait(_)
    ));
    assert_eq!(
        gate(&c, &h, ("web02", "0A"), (&proofs, None), t(6601)),
        Gate::Go
    );
}
