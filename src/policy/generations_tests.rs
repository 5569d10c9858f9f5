//! Generations on synthetic snapshots: grouping, the time window, sessions,
//! transport evidence, and session ids a user controls.

use super::*;
use crate::ids::StartTime;
use crate::policy::tests::{World, tty};
use crate::scan::{Holder, StdinEnd};

/// A copy of `cmd` under `host`, started at `secs` since boot (100 ticks/s).
fn copy(w: &mut World, pid: i32, host: i32, secs: u64, cmd: &str) {
    let p = w.add(pid, host, cmd);
    p.id.start_time = StartTime(secs * 100);
}

fn pids(snap: &Snapshot, g: &Generation) -> Vec<i32> {
    g.copies.iter().map(|c| snap.procs[c.root].pid().get()).collect()
}

#[test]
fn copies_cluster_into_generations_by_start_time() {
    let mut w = World::new();
    tty(w.add(100, 1, "claude"), "/dev/pts/1");
    // Four sets of three, 10 s apart, each set within a second.
    for g in 0..4u64 {
        for k in 0..3u64 {
            let pid = 200 + i32::try_from(g * 3 + k).unwrap();
            copy(&mut w, pid, 100, 1000 + g * 10 + k / 2, "npx -y @playwright/mcp@latest");
        }
    }
    copy(&mut w, 300, 100, 1000, "uvx mcp-server-fetch");
    let (snap, js) = w.judge();
    let gs = generations(&snap, &js, |_| None);
    assert_eq!(gs.len(), 2, "{gs:#?}");
    let pw = &gs[0];
    assert_eq!(pw.count(), 12);
    assert_eq!(pw.generations.len(), 4);
    assert_eq!(pids(&snap, &pw.generations[0]), [200, 201, 202]);
    assert_eq!(pids(&snap, &pw.generations[3]), [209, 210, 211]);
    assert_eq!(snap.procs[pw.host].pid().get(), 100);
    let dup = crate::policy::duplicates(&snap, &js);
    assert_eq!(pw.command, dup[0].command, "named as `duplicates` names it");
    assert_eq!(dup[0].generations, 4, "the scan's count by the same rule");
    assert_eq!(dup[0].rss_bytes, 12 << 20, "every copy's members");
    assert_eq!(gs[1].count(), 1);
}

#[test]
fn a_steady_respawn_does_not_chain_into_one_generation() {
    let mut w = World::new();
    tty(w.add(100, 1, "claude"), "/dev/pts/1");
    // One new copy a second for 10 s: the window counts from a
    // generation's first copy, so these are several generations.
    for k in 0..10u64 {
        copy(&mut w, 200 + i32::try_from(k).unwrap(), 100, 500 + k, "uvx mcp-server-time");
    }
    let (snap, js) = w.judge();
    let gs = generations(&snap, &js, |_| None);
    let n = gs[0].generations.len();
    assert!(n >= 10 / (usize::try_from(WINDOW_SECS).unwrap() + 1), "{n}");
    assert!(gs[0].generations.iter().all(|g| g.copies.len() <= usize::try_from(WINDOW_SECS).unwrap() + 1));
}

#[test]
fn sessions_split_generations_started_together() {
    let mut w = World::new();
    tty(w.add(100, 1, "codex app-server"), "/dev/pts/1");
    copy(&mut w, 200, 100, 700, "uvx mcp-server-fetch");
    copy(&mut w, 201, 100, 700, "uvx mcp-server-fetch");
    let (snap, js) = w.judge();
    let session = |i: usize| Some(format!("s{}", snap.procs[i].pid().get()));
    let gs = generations(&snap, &js, session);
    assert_eq!(gs[0].generations.len(), 2, "{gs:#?}");
    assert_eq!(gs[0].generations[0].session.as_deref(), Some("s200"));
}

#[test]
fn transport_evidence_is_the_hosts_alone() {
    let mut w = World::new();
    tty(w.add(100, 1, "claude"), "/dev/pts/1");
    copy(&mut w, 200, 100, 10, "uvx mcp-server-fetch");
    copy(&mut w, 201, 100, 10, "uvx mcp-server-fetch");
    copy(&mut w, 202, 100, 10, "uvx mcp-server-fetch");
    let set = |w: &mut World, pid: i32, end: StdinEnd| {
        let p = w.procs.iter_mut().find(|p| p.pid().get() == pid).unwrap();
        p.details.as_mut().unwrap().stdin = Some(end);
    };
    set(&mut w, 200, StdinEnd::Open(Holder::Expected));
    set(&mut w, 201, StdinEnd::Open(Holder::Other(None)));
    let (snap, js) = w.judge();
    let gs = generations(&snap, &js, |_| None);
    let held: Vec<(i32, Option<bool>)> = gs[0].copies().map(|c| (snap.procs[c.root].pid().get(), c.held)).collect();
    assert_eq!(held, [(200, Some(true)), (201, Some(false)), (202, None)]);
}

#[test]
fn stale_hosts_and_orphans_hold_no_generations() {
    let mut w = World::new();
    copy(&mut w, 200, 1, 10, "uvx mcp-server-fetch"); // adopted by init
    let (snap, js) = w.judge();
    assert!(generations(&snap, &js, |_| None).is_empty());
}

#[test]
fn session_ids_are_believed_only_when_they_look_like_one() {
    let env = b"PATH=/bin\0CLAUDE_CODE_SESSION_ID=0b9e4c1e-6f1a-4a35-9d0e-2f1f5c3a7b11\0X=1\0";
    assert_eq!(
        session_in_environ(env, "CLAUDE_CODE_SESSION_ID").as_deref(),
        Some("0b9e4c1e-6f1a-4a35-9d0e-2f1f5c3a7b11")
    );
    let last = b"CLAUDE_CODE_SESSION_ID=a\0CLAUDE_CODE_SESSION_ID=b\0";
    assert_eq!(session_in_environ(last, "CLAUDE_CODE_SESSION_ID").as_deref(), Some("b"), "getenv's");
    for hostile in [
        &b"CLAUDE_CODE_SESSION_ID=\x1b[2Jx\0"[..],
        b"CLAUDE_CODE_SESSION_ID=a b\0",
        b"CLAUDE_CODE_SESSION_ID=\xe2\x80\xaeabc\0",
        b"CLAUDE_CODE_SESSION_ID=\0",
        b"XCLAUDE_CODE_SESSION_ID=abc\0",
        b"CLAUDE_CODE_SESSION_IDX=abc\0",
    ] {
        assert_eq!(session_in_environ(hostile, "CLAUDE_CODE_SESSION_ID"), None, "{hostile:?}");
    }
    let cut = b"PATH=/bin\0CLAUDE_CODE_SESSION_ID=0b9e4c1e-6f";
    assert_eq!(session_in_environ(cut, "CLAUDE_CODE_SESSION_ID"), None, "an entry cut at the read's bound");
    assert!(session_token(&[b'a'; MAX_SESSION]).is_some());
    assert!(session_token(&[b'a'; MAX_SESSION + 1]).is_none());
}
