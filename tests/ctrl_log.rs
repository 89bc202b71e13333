//! The `log` feature: a join that hangs says which ranks are missing before
//! its deadline (`cargo test --features log --test ctrl_log`).
#![cfg(feature = "log")]

use std::net::TcpListener;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use rrddmma::ctrl::{ClusterConfig, Error, RankSource, Resolved, Session};

static RECORDS: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.target().starts_with("rrddmma") {
            RECORDS.lock().unwrap().push((r.level(), r.args().to_string()));
        }
    }
    fn flush(&self) {}
}

#[test]
fn a_hanging_join_names_the_missing_ranks() {
    log::set_logger(&Capture).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    let coordinator = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut cfg = ClusterConfig::default();
    cfg.join_timeout = Duration::from_millis(1800);
    let place = move |rank| Resolved { rank, size: 3, coordinator, rank_source: RankSource::Config, device: None };
    // Ranks 0 and 1 come; rank 2 never does.
    let c = cfg.clone();
    // The member stays until the coordinator gives up on the session.
    let member = thread::spawn(move || Session::join_as(&c, &place(1))?.barrier());
    let e = Session::join_as(&cfg, &place(0)).unwrap_err();
    let m = member.join().unwrap();
    assert!(
        matches!(&e, Error::Timeout { missing, .. } if *missing == [2]),
        "{e:?} {m:?} {:#?}",
        RECORDS.lock().unwrap()
    );
    assert!(m.is_err());
    let records = RECORDS.lock().unwrap();
    let text: Vec<&str> = records.iter().map(|(_, m)| m.as_str()).collect();
    let has = |level: log::Level, needle: &str| records.iter().any(|(l, m)| *l == level && m.contains(needle));
    assert!(has(log::Level::Info, "listening on"), "{text:#?}");
    assert!(has(log::Level::Debug, "rank 1 joined (2 of 3 ranks present)"), "{text:#?}");
    assert!(has(log::Level::Info, "still waiting for ranks [2] to join"), "{text:#?}");
    assert!(has(log::Level::Error, "the session failed"), "{text:#?}");
}
