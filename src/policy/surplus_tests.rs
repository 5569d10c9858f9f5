//! The surplus plan on synthetic snapshots: 12 copies in 4 generations,
//! what keeps a copy, and the respawn guard's stages.

use std::collections::HashMap;

use super::*;
use crate::ids::{StartTime, Uid};
use crate::policy::generations::generations;
use crate::policy::tests::{World, tty};
use crate::scan::{Holder, StdinEnd};

const IDLE: Duration = Duration::from_secs(1800);

/// A host with 12 copies of one server in 4 generations, every copy's
/// stdin held by the host; pids 200..212, oldest first.
fn world() -> World {
    let mut w = World::new();
    tty(w.add(100, 1, "claude"), "/dev/pts/1");
    for g in 0..4u64 {
        for k in 0..3u64 {
            let pid = 200 + i32::try_from(g * 3 + k).unwrap();
            let p = w.add(pid, 100, "npx -y @playwright/mcp@latest");
            p.id.start_time = StartTime((1000 + g * 600 + k) * 100);
            p.details.as_mut().unwrap().stdin = Some(StdinEnd::Open(Holder::Expected));
        }
    }
    w
}

fn settings() -> Settings {
    Settings { keep_newest: 2, idle: IDLE }
}

/// Decisions by root pid.
fn decide(w: &World, watch: &HashMap<i32, Watch>, stage: &Stage) -> Vec<(i32, bool, String)> {
    let (snap, js) = w.judge();
    let gs = generations(&snap, &js, |_| None);
    let by_pid = |i: usize| watch.get(&snap.procs[i].pid().get()).copied();
    plan(&snap, &gs, settings(), by_pid, |_, _| stage.clone())
        .into_iter()
        .map(|d| (snap.procs[d.root].pid().get(), d.end, d.why))
        .collect()
}

fn idle(secs: u64) -> Watch {
    Watch { idle_for: Duration::from_secs(secs), waiting: Some(0) }
}

fn ended(ds: &[(i32, bool, String)]) -> Vec<i32> {
    ds.iter().filter(|d| d.1).map(|d| d.0).collect()
}

#[test]
fn old_idle_copies_end_and_the_newest_and_the_busy_stay() {
    let w = world();
    let mut watch: HashMap<i32, Watch> = (200..212).map(|p| (p, idle(3600))).collect();
    // The newest generation is in use; one old copy got a request lately.
    for p in 209..212 {
        watch.insert(p, idle(5));
    }
    watch.insert(203, idle(60));
    let ds = decide(&w, &watch, &Stage::Open);
    assert_eq!(ended(&ds), [200, 201, 202, 204, 205, 206, 207, 208]);
    let why = |pid: i32| ds.iter().find(|d| d.0 == pid).unwrap().2.clone();
    assert!(why(203).contains("did I/O or used CPU 60s ago"), "{}", why(203));
    assert!(why(211).contains("newest 2 of 12"), "{}", why(211));
    assert!(why(200).contains("holds 12 copies of @playwright/mcp"), "{}", why(200));
    assert!(why(200).contains("for 60m (idle window 30m)"), "{}", why(200));
}

#[test]
fn the_first_ending_is_one_copy_and_a_guard_stops_the_rest() {
    let w = world();
    let watch: HashMap<i32, Watch> = (200..212).map(|p| (p, idle(3600))).collect();
    let ds = decide(&w, &watch, &Stage::Probe);
    assert_eq!(ended(&ds), [200], "the oldest alone");
    assert!(ds.iter().find(|d| d.0 == 201).unwrap().2.contains("first ending is one copy"));
    let ds = decide(&w, &watch, &Stage::Watching { secs_left: 40 });
    assert!(ended(&ds).is_empty());
    assert!(ds.iter().find(|d| d.0 == 201).unwrap().2.contains("waiting 40s more"));
    let ds = decide(&w, &watch, &Stage::Tripped("the host started a copy 2s after one was ended".into()));
    assert!(ended(&ds).is_empty());
    assert!(ds.iter().find(|d| d.0 == 201).unwrap().2.starts_with("respawn guard: the host started"));
}

#[test]
fn what_is_not_known_keeps_a_copy() {
    let mut w = world();
    // 200: never sampled. 201: stdin's holder not told. 202: a request
    // waits. 203: whether one waits is not known. 204: a member of
    // another user.
    let mut watch: HashMap<i32, Watch> = (201..212).map(|p| (p, idle(3600))).collect();
    watch.insert(202, Watch { idle_for: Duration::from_secs(3600), waiting: Some(120) });
    watch.insert(203, Watch { idle_for: Duration::from_secs(3600), waiting: None });
    let set = |w: &mut World, pid: i32, f: &dyn Fn(&mut crate::scan::Process)| {
        f(w.procs.iter_mut().find(|p| p.pid().get() == pid).unwrap());
    };
    set(&mut w, 201, &|p| p.details.as_mut().unwrap().stdin = Some(StdinEnd::Open(Holder::NotAsked)));
    w.add(300, 204, "node server.js").details.as_mut().unwrap().uid = Some(Uid(1001));
    set(&mut w, 205, &|p| p.details.as_mut().unwrap().stdin = Some(StdinEnd::Open(Holder::Other(None))));
    let ds = decide(&w, &watch, &Stage::Open);
    assert_eq!(ended(&ds), [206, 207, 208, 209]);
    let why = |pid: i32| ds.iter().find(|d| d.0 == pid).unwrap().2.clone();
    assert!(why(200).contains("not sampled"), "{}", why(200));
    assert!(why(201).contains("not known to be held"), "{}", why(201));
    assert!(why(202).contains("120 byte(s) wait unread"), "{}", why(202));
    assert!(why(203).contains("could not be told"), "{}", why(203));
    assert!(why(204).contains("another user"), "{}", why(204));
    assert!(why(205).contains("not known to be held"), "{}", why(205));
}

#[test]
fn the_only_copy_is_never_ended() {
    let mut w = World::new();
    tty(w.add(100, 1, "claude"), "/dev/pts/1");
    let p = w.add(200, 100, "uvx mcp-server-fetch");
    p.details.as_mut().unwrap().stdin = Some(StdinEnd::Open(Holder::Expected));
    let watch: HashMap<i32, Watch> = [(200, idle(99_999))].into();
    let (snap, js) = w.judge();
    let gs = generations(&snap, &js, |_| None);
    let by_pid = |i: usize| watch.get(&snap.procs[i].pid().get()).copied();
    let one = Settings { keep_newest: 1, idle: IDLE };
    let ds = plan(&snap, &gs, one, by_pid, |_, _| Stage::Open);
    assert_eq!(ds.len(), 1);
    assert!(!ds[0].end && ds[0].why.contains("only copy"), "{ds:?}");
}

#[test]
fn spans_read_as_a_person_says_them() {
    assert_eq!(span(Duration::from_secs(95)), "95s");
    assert_eq!(span(Duration::from_secs(1800)), "30m");
    assert_eq!(span(Duration::from_secs(3 * 3600 + 300)), "3h05m");
}
