//! A socket filter (classic BPF) for the proc connector: the kernel drops
//! what [`super::events::parse`] would skip before it is queued, so the
//! daemon is not woken for it.
//!
//! What it drops: threads (a thread's fork, exit and renaming; parse keeps
//! only thread group leaders) and the event kinds parse ignores (uid, gid,
//! sid, ptrace, coredump changes, the listen acknowledgement). On a desktop
//! most events are threads: a browser, a language server, Node's workers and
//! a build's compilers start, name and end threads all the time, and each
//! was a datagram to receive, parse and drop in user space (issue 37).
//!
//! The layout is the kernel's and fixed: one event a datagram, the
//! netlink header (16 bytes), `struct cn_msg` (20), then `struct proc_event`:
//! `what` at 36, its union at 52. Fork: parent pid, parent tgid, child pid,
//! child tgid (52, 56, 60, 64); exec, comm, exit: pid, tgid (52, 56). BPF's
//! word loads read big-endian, the connector writes in the host's order:
//! the kinds are compared swapped; pid against tgid needs no swap. A
//! datagram shorter than a load is dropped by the kernel (a load past the
//! end returns 0), as parse would skip it.

use libc::{
    BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_MISC, BPF_RET, BPF_TAX, BPF_W, BPF_X, PROC_EVENT_COMM,
    PROC_EVENT_EXEC, PROC_EVENT_EXIT, PROC_EVENT_FORK, sock_filter,
};

const WHAT: u32 = 36;
const PID: u32 = 52;
const TGID: u32 = 56;
const CHILD_PID: u32 = 60;
const CHILD_TGID: u32 = 64;

/// A kind as a BPF word load reads it.
const fn loaded(kind: u32) -> u32 {
    u32::from_be_bytes(kind.to_ne_bytes())
}

#[allow(clippy::cast_possible_truncation)] // opcodes are below 0x100 by definition
const fn op(code: u32, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code: code as u16, jt, jf, k }
}

const fn load(at: u32) -> sock_filter {
    op(BPF_LD | BPF_W | BPF_ABS, 0, 0, at)
}

const fn jeq(k: u32, jt: u8, jf: u8) -> sock_filter {
    op(BPF_JMP | BPF_JEQ | BPF_K, jt, jf, k)
}

/// `A == X`: jump `jt` ahead when equal, `jf` when not.
const fn jeq_x(jt: u8, jf: u8) -> sock_filter {
    op(BPF_JMP | BPF_JEQ | BPF_X, jt, jf, 0)
}

const TAX: sock_filter = op(BPF_MISC | BPF_TAX, 0, 0, 0);

/// The program: keep a process's fork, exec, renaming and exit; drop the
/// rest. Jumps go forward only (a jump's target is its index + 1 + offset).
pub fn program() -> [sock_filter; 15] {
    [
        /* 0 */ load(WHAT),
        /* 1 */ jeq(loaded(PROC_EVENT_FORK), 3, 0), // → 5
        /* 2 */ jeq(loaded(PROC_EVENT_EXEC), 10, 0), // → 13
        /* 3 */ jeq(loaded(PROC_EVENT_COMM), 5, 0), // → 9
        /* 4 */ jeq(loaded(PROC_EVENT_EXIT), 4, 9), // → 9, else → 14
        // fork: a new process, not a thread (child pid = child tgid)
        /* 5 */ load(CHILD_TGID),
        /* 6 */ TAX,
        /* 7 */ load(CHILD_PID),
        /* 8 */ jeq_x(4, 5), // → 13, else → 14
        // comm, exit: the thread group leader's (pid = tgid)
        /* 9 */ load(TGID),
        /* 10 */ TAX,
        /* 11 */ load(PID),
        /* 12 */ jeq_x(0, 1), // → 13, else → 14
        /* 13 */ op(BPF_RET | BPF_K, 0, 0, u32::MAX),
        /* 14 */ op(BPF_RET | BPF_K, 0, 0, 0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::events::{ProcEvent, parse};

    /// The kernel's classic BPF, for the opcodes the program uses: a word
    /// load past the end ends the program with 0 (the kernel's rule).
    fn run(prog: &[sock_filter], pkt: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        loop {
            let i = prog[pc];
            let code = u32::from(i.code);
            pc += 1;
            if code == BPF_LD | BPF_W | BPF_ABS {
                let at = i.k as usize;
                let Some(w) = pkt.get(at..at + 4) else { return 0 };
                a = u32::from_be_bytes(w.try_into().unwrap());
            } else if code == BPF_MISC | BPF_TAX {
                x = a;
            } else if code == BPF_JMP | BPF_JEQ | BPF_K || code == BPF_JMP | BPF_JEQ | BPF_X {
                let k = if code & BPF_X != 0 { x } else { i.k };
                pc += usize::from(if a == k { i.jt } else { i.jf });
            } else if code == BPF_RET | BPF_K {
                return i.k;
            } else {
                panic!("opcode {code:#x} not in the program");
            }
        }
    }

    /// One event as the kernel sends it: netlink header, `cn_msg`, `proc_event`.
    fn msg(what: u32, fields: &[u32]) -> Vec<u8> {
        let data_len = 16 + 4 * fields.len();
        let total = 16 + 20 + data_len;
        let mut m = Vec::new();
        m.extend_from_slice(&u32::try_from(total).unwrap().to_ne_bytes());
        m.extend_from_slice(&3u16.to_ne_bytes()); // NLMSG_DONE
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&libc::CN_IDX_PROC.to_ne_bytes());
        m.extend_from_slice(&libc::CN_VAL_PROC.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(&u16::try_from(data_len).unwrap().to_ne_bytes());
        m.extend_from_slice(&[0; 2]);
        m.extend_from_slice(&what.to_ne_bytes());
        m.extend_from_slice(&[0; 12]); // cpu, timestamp
        for f in fields {
            m.extend_from_slice(&f.to_ne_bytes());
        }
        m
    }

    #[test]
    fn keeps_exactly_what_parse_keeps() {
        let prog = program();
        let cases = [
            msg(PROC_EVENT_FORK, &[10, 10, 11, 11]),
            msg(PROC_EVENT_FORK, &[10, 10, 12, 11]), // a thread of 11
            msg(PROC_EVENT_EXEC, &[11, 11]),
            msg(PROC_EVENT_COMM, &[12, 11, 0x0062_7573, 0, 0, 0]), // a thread named itself
            msg(PROC_EVENT_COMM, &[11, 11, 0x006d_706e, 0, 0, 0]), // retitled "npm"
            msg(PROC_EVENT_EXIT, &[12, 11, 0, 17, 10, 10]),        // thread exit
            msg(PROC_EVENT_EXIT, &[11, 11, 0, 17, 10, 10]),
            msg(libc::PROC_EVENT_UID, &[11, 11, 0, 1000]),
            msg(libc::PROC_EVENT_SID, &[11, 11]),
            msg(libc::PROC_EVENT_NONE, &[0]),
            msg(PROC_EVENT_FORK, &[10, 10, 11])[..60].to_vec(), // cut short
        ];
        let mut kept = 0;
        for m in &cases {
            let mut events: Vec<ProcEvent> = Vec::new();
            parse(m, &mut events);
            let keep = run(&prog, m) != 0;
            assert_eq!(keep, !events.is_empty(), "filter and parse differ on {m:?}: {events:?}");
            kept += usize::from(keep);
        }
        assert_eq!(kept, 4, "a process's fork, exec, renaming and exit");
    }

    /// The kernel runs it: with the filter attached, every datagram that
    /// arrives is one parse keeps, while this test starts threads (each a
    /// fork, a renaming and an exit of a thread) and a process.
    #[test]
    fn the_kernel_drops_threads_before_they_are_queued() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: the proc connector needs root (CAP_NET_ADMIN)");
            return;
        }
        let fd = crate::scan::events::Connector::open().expect("connector");
        let threads: Vec<_> =
            (0..20).map(|i| std::thread::Builder::new().name(format!("t{i}")).spawn(|| ()).expect("thread")).collect();
        for t in threads {
            t.join().expect("join");
        }
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = crate::ids::Pid::new(child.id().cast_signed()).unwrap();
        child.wait().expect("wait");
        let mut buf = vec![0u8; 8192];
        let (mut datagrams, mut dropped_by_parse) = (0, 0);
        let mut dropped = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match rustix::net::recv(&fd, &mut buf, rustix::net::RecvFlags::empty()) {
                Ok((n, _)) => {
                    let mut events = Vec::new();
                    parse(&buf[..n.min(buf.len())], &mut events);
                    datagrams += 1;
                    dropped_by_parse += usize::from(events.is_empty());
                    if events.is_empty() {
                        dropped.push(buf[..n.min(buf.len()).min(72)].to_vec());
                    }
                    if events.contains(&ProcEvent::Exit { pid }) {
                        break;
                    }
                }
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {
                    assert!(std::time::Instant::now() < deadline, "the child's exit never came");
                    let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
                    let second = rustix::time::Timespec { tv_sec: 1, tv_nsec: 0 };
                    let _ = rustix::event::poll(&mut fds, Some(&second));
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
        assert_eq!(
            dropped_by_parse, 0,
            "{dropped_by_parse} of {datagrams} datagrams were threads or ignored kinds: {dropped:?}"
        );
    }
}
