//! The invariants behind the fuzz targets in `fuzz/`. Each `pub fn` takes one
//! fuzz input and panics when an invariant does not hold. The fuzz targets
//! (`fuzz/fuzz_targets/*.rs`) include this file with `#[path]`, and
//! `tests/fuzz_regressions.rs` replays the committed seeds and regression
//! inputs through the same functions on stable Rust, so a fixed bug stays fixed.
//!
//! No dependencies beyond the library and std: structured targets read their
//! input with [`Input`] instead of `arbitrary`.

#![allow(dead_code)] // each fuzz target uses one entry point

use mcp_reaper::config::Config;
use mcp_reaper::ids::Pid;
use mcp_reaper::proto::{self, FrameError, Reply, Request};
use mcp_reaper::scan::events::{self, ProcEvent};
use mcp_reaper::scan::parse::{self, Rollup, Stat};

/// The targets, by name: the directory names under `fuzz/seeds/` and
/// `fuzz/regressions/`, and the binary names of the fuzz targets.
/// A fuzz target: one input, panics on a broken invariant.
pub type Check = fn(&[u8]);

pub const TARGETS: &[(&str, Check)] = &[
    ("proc_stat", proc_stat),
    ("proc_stat_structured", proc_stat_structured),
    ("proc_status", proc_status),
    ("config", config),
    ("ctl_frame", ctl_frame),
    ("netlink", netlink),
    ("netlink_structured", netlink_structured),
];

// ---- /proc/PID/stat ---------------------------------------------------------

/// Arbitrary bytes: `parse_stat` agrees with an independent, index-based
/// reading of proc(5), and an accepted line has a positive pid and the comm
/// between the first `(` and the last `)`.
pub fn proc_stat(data: &[u8]) {
    let got = parse::parse_stat(data);
    let want = reference_stat(data);
    match (&got, &want) {
        (Ok(g), Some(w)) => assert_eq!(g, w, "parse_stat disagrees with the reference"),
        (Err(e), None) => assert!(!e.what.is_empty()),
        _ => panic!("parse_stat gave {got:?}, the reference {want:?}"),
    }
    if let Ok(s) = got {
        assert!(s.pid > 0, "accepted a non-positive pid {}", s.pid);
        let open = data.iter().position(|&b| b == b'(').unwrap();
        let close = data.iter().rposition(|&b| b == b')').unwrap();
        assert_eq!(s.comm.as_str(), String::from_utf8_lossy(&data[open + 1..close]));
        assert!(!s.state.is_ascii_whitespace());
    }
}

/// proc(5) read field by field: fields 3.. are the whitespace-separated words
/// after the last `)`; field N is word N-3.
fn reference_stat(buf: &[u8]) -> Option<Stat> {
    let open = buf.iter().position(|&b| b == b'(')?;
    let close = buf.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let pid: i32 =
        std::str::from_utf8(&buf[..open]).ok()?.trim_matches(|c: char| c.is_ascii_whitespace()).parse().ok()?;
    if pid <= 0 {
        return None;
    }
    let words: Vec<&[u8]> = buf[close + 1..].split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()).collect();
    let field = |n: usize| -> Option<&str> { std::str::from_utf8(words.get(n - 3)?).ok() };
    Some(Stat {
        pid,
        comm: mcp_reaper::scan::Comm::from_bytes(&buf[open + 1..close]),
        state: words.first()?[0],
        ppid: field(4)?.parse().ok()?,
        pgrp: field(5)?.parse().ok()?,
        session: field(6)?.parse().ok()?,
        tty_nr: field(7)?.parse::<i32>().ok()?.cast_unsigned(), // a dev_t printed with %d
        flags: field(9)?.parse().ok()?,
        num_threads: field(20)?.parse().ok()?,
        start_time: field(22)?.parse().ok()?,
        rss_pages: u64::try_from(field(24)?.parse::<i64>().ok()?.max(0)).ok()?,
        start_stack: field(28).and_then(|f| f.parse().ok()).unwrap_or(0),
    })
}

/// A stat line built from the input the way the kernel writes one, with a
/// hostile comm (any bytes: parentheses, newlines, invalid UTF-8), any
/// whitespace between fields and junk in the fields the parser skips: every
/// field it reads comes back.
pub fn proc_stat_structured(data: &[u8]) {
    let mut inp = Input::new(data);
    let pid = i32::try_from(inp.u32() % i32::MAX.cast_unsigned()).unwrap() + 1;
    let comm_len = inp.below(40);
    let comm = inp.bytes(comm_len).to_vec();
    let state = match inp.byte() {
        b if b.is_ascii_whitespace() || b == b')' => b'S',
        b => b,
    };
    let (ppid, pgrp, session, tty, tpgid) = (inp.i32(), inp.i32(), inp.i32(), inp.i32(), inp.i32());
    let flags = inp.u32();
    let mut line = vec![b' '; inp.below(3)];
    line.extend_from_slice(pid.to_string().as_bytes());
    inp.sep(&mut line, 0);
    line.push(b'(');
    line.extend_from_slice(&comm);
    line.push(b')');
    inp.sep(&mut line, 0);
    line.push(state);
    for f in [ppid, pgrp, session, tty, tpgid] {
        inp.sep(&mut line, 1);
        line.extend_from_slice(f.to_string().as_bytes());
    }
    inp.sep(&mut line, 1);
    line.extend_from_slice(flags.to_string().as_bytes());
    for _ in 10..20 {
        inp.sep(&mut line, 1);
        inp.junk_word(&mut line);
    }
    let num_threads = inp.i64();
    inp.sep(&mut line, 1);
    line.extend_from_slice(num_threads.to_string().as_bytes());
    inp.sep(&mut line, 1);
    inp.junk_word(&mut line); // itrealvalue
    let start_time = inp.u64();
    inp.sep(&mut line, 1);
    line.extend_from_slice(start_time.to_string().as_bytes());
    inp.sep(&mut line, 1);
    inp.junk_word(&mut line); // vsize
    let rss = inp.i64();
    inp.sep(&mut line, 1);
    line.extend_from_slice(rss.to_string().as_bytes());
    // rsslim, startcode, endcode, then startstack (or a line cut before it).
    let start_stack = if inp.byte() & 1 == 1 {
        for _ in 25..28 {
            inp.sep(&mut line, 1);
            inp.junk_word(&mut line);
        }
        let s = inp.u64();
        inp.sep(&mut line, 1);
        line.extend_from_slice(s.to_string().as_bytes());
        s
    } else {
        0
    };
    for _ in 0..inp.below(30).min(if start_stack == 0 { 3 } else { 30 }) {
        inp.sep(&mut line, 1);
        inp.junk_word(&mut line);
    }
    if inp.byte() & 1 == 1 {
        line.push(b'\n');
    }
    let want = Stat {
        pid,
        comm: mcp_reaper::scan::Comm::from_bytes(&comm),
        state,
        ppid,
        pgrp,
        session,
        tty_nr: tty.cast_unsigned(),
        flags,
        num_threads,
        start_time,
        rss_pages: u64::try_from(rss.max(0)).unwrap(),
        start_stack,
    };
    assert_eq!(parse::parse_stat(&line), Ok(want), "line {:?}", String::from_utf8_lossy(&line));
}

// ---- /proc/PID/status, smaps_rollup, meminfo, cmdline -----------------------

/// Arbitrary bytes through the line-oriented parsers and `join_cmdline`: each
/// key's value is read from the last line that names it, unknown and
/// malformed lines change nothing, sizes are whole KiB (or saturated).
pub fn proc_status(data: &[u8]) {
    let s = parse::parse_status(data);
    assert_eq!(s.real_uid, last_value(data, b"Uid:").and_then(first_word_num::<u32>));
    assert_eq!(s.vm_rss_bytes, last_value(data, b"VmRSS:").and_then(kib_ref));
    assert_eq!(s.vm_swap_bytes, last_value(data, b"VmSwap:").and_then(kib_ref));
    assert_eq!(
        s.nspid_depth,
        last_value(data, b"NSpid:").map(|v| v.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()).count())
    );
    for b in [s.vm_rss_bytes, s.vm_swap_bytes].into_iter().flatten() {
        assert!(b % 1024 == 0 || b == u64::MAX, "{b} is not whole KiB");
    }
    // A line without a colon, or a key nobody reads, appended: nothing changes.
    let mut more = data.to_vec();
    more.extend_from_slice(b"\nno colon here\nName:\tx\n");
    assert_eq!(parse::parse_status(&more), s);
    // A well-formed line appended: it wins.
    let mut more = data.to_vec();
    more.extend_from_slice(b"\nUid:\t4242\t0\t0\t0\n");
    assert_eq!(parse::parse_status(&more).real_uid, Some(4242));

    let r = parse::parse_smaps_rollup(data);
    let pss = last_value(data, b"Pss:").and_then(kib_ref);
    let swap_pss = last_value(data, b"SwapPss:").and_then(kib_ref).unwrap_or(0);
    assert_eq!(r, pss.map(|pss_bytes| Rollup { pss_bytes, swap_pss_bytes: swap_pss }));

    let m = parse::parse_meminfo(data);
    assert_eq!(m.mem_available_bytes, last_value(data, b"MemAvailable:").and_then(kib_ref).unwrap_or(0));
    assert_eq!(m.swap_free_bytes, last_value(data, b"SwapFree:").and_then(kib_ref).unwrap_or(0));

    let c = parse::join_cmdline(data);
    assert!(!c.contains('\0'), "NUL in joined cmdline {c:?}");
    assert_eq!(c.is_empty(), data.iter().all(|&b| b == 0));
    if !data.contains(&0) {
        assert_eq!(c, String::from_utf8_lossy(data));
    }
}

/// The value of the last line that starts with `key`.
fn last_value<'a>(data: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    data.split(|&b| b == b'\n').rev().find_map(|l| l.strip_prefix(key))
}

fn first_word_num<T: std::str::FromStr>(v: &[u8]) -> Option<T> {
    let w = v.split(u8::is_ascii_whitespace).find(|w| !w.is_empty())?;
    std::str::from_utf8(w).ok()?.parse().ok()
}

fn kib_ref(v: &[u8]) -> Option<u64> {
    let k: u64 = first_word_num(v)?;
    Some(k.saturating_mul(1024))
}

// ---- config loader ----------------------------------------------------------

/// Any text as a user config file on top of the embedded default: no panic;
/// an error names the user's file, a line and column inside the text, and says
/// something; an accepted config has every value in its documented range.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let name = "fuzz.toml";
    match Config::from_str_with_default(name, &text) {
        Ok(c) => {
            assert!((1..=86_400).contains(&c.interval_secs), "interval_secs {}", c.interval_secs);
            assert!(c.grace_secs <= 604_800, "grace_secs {}", c.grace_secs);
            assert!(
                c.term_timeout_secs.is_finite() && (0.05..=300.0).contains(&c.term_timeout_secs),
                "term_timeout_secs {}",
                c.term_timeout_secs
            );
            let _ = c.term_timeout(); // panics on a negative or non-finite value
            for p in [&c.socket, &c.state_file, &c.metrics_textfile].into_iter().flatten() {
                assert!(p.is_absolute(), "relative path {} accepted", p.display());
            }
            assert_eq!(c.sources.len(), 2);
            assert_eq!(c.sources[1], name);
            let first_line = text.lines().next().unwrap_or("");
            let _ = c.matcher.classify(first_line, Some("/usr/bin/node"));
        }
        Err(errs) => {
            assert!(!errs.0.is_empty(), "an error without errors");
            let lines: Vec<&str> = text.split('\n').collect();
            for e in &errs.0 {
                assert_eq!(e.file, name, "error blamed on another file: {e}");
                assert!(!e.message.trim().is_empty(), "empty message: {e:?}");
                let (line, col) = e.position.unwrap_or_else(|| panic!("error without line:col: {e}"));
                assert!(line >= 1 && line <= lines.len(), "line {line} outside 1..={}: {e}", lines.len());
                let width = lines[line - 1].chars().count();
                assert!(col >= 1 && col <= width + 1, "column {col} outside 1..={} on line {line}: {e}", width + 1);
            }
        }
    }
}

// ---- control socket ---------------------------------------------------------

/// The daemon's read path on a byte stream: a 4-byte header checked against
/// the limit, then exactly that many body bytes (a short stream ends the
/// conversation), then JSON. A decoded request re-encodes to a frame within
/// the limit that decodes to the same request; a decoded reply re-encodes
/// stably.
pub fn ctl_frame(data: &[u8]) {
    let Some((hdr, rest)) = data.split_first_chunk::<4>() else { return };
    let declared = u32::from_be_bytes(*hdr) as usize;
    // The client's limit is the larger one; both agree on the length.
    match proto::frame_len(*hdr, proto::MAX_REPLY) {
        Ok(n) => assert_eq!(n, declared),
        Err(FrameError::TooLarge(n)) => assert!(n == declared && n > proto::MAX_REPLY),
        Err(e) => panic!("frame_len failed with {e}"),
    }
    let n = match proto::frame_len(*hdr, proto::MAX_REQUEST) {
        Ok(n) => {
            assert!(n == declared && n <= proto::MAX_REQUEST);
            n
        }
        Err(FrameError::TooLarge(n)) => {
            assert!(n == declared && n > proto::MAX_REQUEST);
            return;
        }
        Err(e) => panic!("frame_len failed with {e}"),
    };
    let Some(body) = rest.get(..n) else { return }; // read_exact: EOF mid-body
    match proto::decode::<Request>(body) {
        Ok(req) => {
            let frame = proto::encode(&req);
            let hdr: [u8; 4] = frame[..4].try_into().unwrap();
            let len = proto::frame_len(hdr, proto::MAX_REQUEST).expect("a re-encoded request fits the limit");
            assert_eq!(len, frame.len() - 4);
            let again: Request = proto::decode(&frame[4..]).expect("a re-encoded request decodes");
            assert_eq!(again, req);
        }
        Err(e) => assert!(matches!(e, FrameError::Json(_)), "decode failed with {e}"),
    }
    if let Ok(reply) = proto::decode::<Reply>(body) {
        let frame = proto::encode(&reply);
        assert_eq!(u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4);
        let again: Reply = proto::decode(&frame[4..]).expect("a re-encoded reply decodes");
        let frame2 = proto::encode(&again);
        let (a, b): (serde_json::Value, serde_json::Value) =
            (serde_json::from_slice(&frame[4..]).unwrap(), serde_json::from_slice(&frame2[4..]).unwrap());
        assert!(
            same_json(&a, &b),
            "reply does not re-encode the same:\n{}\n{}",
            String::from_utf8_lossy(&frame[4..]),
            String::from_utf8_lossy(&frame2[4..])
        );
    }
}

/// Equal JSON, except that floats may differ in the last place: `serde_json`
/// without its `float_roundtrip` feature parses some 17-digit floats one ulp
/// off (`-7.312715117751977e-234` reads back as `…976e-234`), so a reply's
/// `uptime_secs` can drift by one ulp per trip. Anything more is a bug.
#[allow(clippy::float_cmp)] // exact equality first, then one ulp apart
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x.is_sign_negative() == y.is_sign_negative() && x.to_bits().abs_diff(y.to_bits()) <= 1)
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same_json(vx, vy))
        }
        _ => a == b,
    }
}

// ---- netlink proc connector -------------------------------------------------

/// Smallest netlink message that yields an event: header, `cn_msg`, and the
/// 16-byte `proc_event` head plus the 8 bytes of the shortest event (exec, exit).
const MIN_EVENT_MSG: usize = 16 + 20 + 16 + 8;

/// Arbitrary datagrams: no panic, no event without a whole message behind it,
/// appending leaves existing output alone, and more bytes after a datagram
/// never change the events read from it.
pub fn netlink(data: &[u8]) {
    let mut out = vec![ProcEvent::Exit { pid: Pid::INIT }];
    events::parse(data, &mut out);
    assert_eq!(out[0], ProcEvent::Exit { pid: Pid::INIT }, "parse clobbered earlier events");
    let got = &out[1..];
    assert!(got.len() * MIN_EVENT_MSG <= data.len(), "{} events from {} bytes", got.len(), data.len());
    let mut twice = data.to_vec();
    twice.extend_from_slice(data);
    let mut out2 = Vec::new();
    events::parse(&twice, &mut out2);
    assert!(out2.starts_with(got), "trailing bytes changed earlier events: {got:?} vs {out2:?}");
}

/// Datagrams built the way the kernel sends them (fork, exec, exit and other
/// events, error messages, other connector indexes, over-long messages with
/// unaligned lengths): exactly the process-level events come back, in order.
pub fn netlink_structured(data: &[u8]) {
    let mut inp = Input::new(data);
    let mut buf = Vec::new();
    let mut want = Vec::new();
    for _ in 0..inp.below(8) {
        let kind = inp.byte();
        let what = match kind % 5 {
            0 => 0x0000_0001, // fork
            1 => 0x0000_0002, // exec
            2 => 0x8000_0000, // exit
            3 => 0x0000_0004, // uid change: ignored
            _ => inp.u32(),
        };
        let nfields = match what {
            0x0000_0001 => 4,
            0x0000_0002 => 2,
            0x8000_0000 => 6,
            _ => inp.below(6),
        };
        // Small pids most of the time so the equality checks are exercised.
        let fields: Vec<u32> = (0..nfields)
            .map(|_| if inp.byte() & 1 == 0 { u32::try_from(inp.below(4)).unwrap() } else { inp.u32() })
            .collect();
        let extra = inp.below(7); // bytes past the event, making the length unaligned
        let error_msg = kind & 0x20 != 0 && kind & 0x40 != 0;
        let foreign = kind & 0x80 != 0 && kind & 0x40 != 0;
        let mut ev = Vec::new();
        ev.extend_from_slice(&what.to_ne_bytes());
        ev.extend_from_slice(&0u32.to_ne_bytes()); // cpu
        ev.extend_from_slice(&0u64.to_ne_bytes()); // timestamp
        for f in &fields {
            ev.extend_from_slice(&f.to_ne_bytes());
        }
        ev.extend(std::iter::repeat_n(0xa5, extra));
        let len = 16 + 20 + ev.len();
        buf.extend_from_slice(&u32::try_from(len).unwrap().to_ne_bytes());
        buf.extend_from_slice(&(if error_msg { 2u16 } else { 3u16 }).to_ne_bytes());
        buf.extend_from_slice(&0u16.to_ne_bytes()); // flags
        buf.extend_from_slice(&inp.u32().to_ne_bytes()); // seq
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port
        buf.extend_from_slice(&(if foreign { 2u32 } else { 1u32 }).to_ne_bytes()); // idx
        buf.extend_from_slice(&1u32.to_ne_bytes()); // val
        buf.extend_from_slice(&0u32.to_ne_bytes()); // seq
        buf.extend_from_slice(&0u32.to_ne_bytes()); // ack
        buf.extend_from_slice(&u16::try_from(ev.len()).unwrap().to_ne_bytes());
        buf.extend_from_slice(&0u16.to_ne_bytes()); // flags
        buf.extend_from_slice(&ev);
        while buf.len() % 4 != 0 {
            buf.push(0);
        }
        if error_msg || foreign {
            continue;
        }
        let p = |i: usize| Pid::new(fields[i].cast_signed());
        match what {
            0x0000_0001 => {
                if let (Some(parent), Some(child_pid), Some(child)) = (p(1), p(2), p(3))
                    && child_pid == child
                {
                    want.push(ProcEvent::Fork { parent, child });
                }
            }
            0x0000_0002 => {
                if let Some(pid) = p(1) {
                    want.push(ProcEvent::Exec { pid });
                }
            }
            0x8000_0000 => {
                if let (Some(pid), Some(tgid)) = (p(0), p(1))
                    && pid == tgid
                {
                    want.push(ProcEvent::Exit { pid });
                }
            }
            _ => {}
        }
    }
    let mut got = Vec::new();
    events::parse(&buf, &mut got);
    assert_eq!(got, want);
}

// ---- input reader for the structured targets --------------------------------

/// Reads values off the front of the fuzz input; past its end everything is 0.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.data.split_at(n.min(self.data.len()));
        self.data = tail;
        head
    }

    pub fn byte(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0; N];
        let b = self.bytes(N);
        a[..b.len()].copy_from_slice(b);
        a
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.array())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    pub fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.array())
    }

    /// `min..min+3` ASCII whitespace bytes, of any kind the parser splits on.
    fn sep(&mut self, out: &mut Vec<u8>, min: usize) {
        let n = min + self.below(3);
        for _ in 0..n {
            out.push(b" \t\n\r\x0c"[self.below(5)]);
        }
    }

    /// A non-empty word of anything but whitespace and `)`: a field the parser skips.
    fn junk_word(&mut self, out: &mut Vec<u8>) {
        let n = 1 + self.below(6);
        for _ in 0..n {
            let b = self.byte();
            out.push(if b.is_ascii_whitespace() || b == b')' { b'0' } else { b });
        }
    }
}
