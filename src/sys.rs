//! The only module with `unsafe`: system calls that no safe wrapper offers.
//! Everything else goes through rustix's safe API. Dropping the process's own
//! read-only pages lives in the submodule `pages`.

// The one module of the library allowed `unsafe`, its submodules included
// (Cargo.toml denies it elsewhere); every block carries a `// SAFETY:` comment.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use rustix::process::{PidfdFlags, Signal};

use crate::ids::Pid;

mod pages;
pub(crate) use pages::{drop_own_read_only_pages, own_read_only_pages};

/// `PIDFD_SIGNAL_PROCESS_GROUP` from linux/pidfd.h (Linux ≥ 6.9): deliver to
/// the process group whose leader the pidfd refers to.
const PIDFD_SIGNAL_PROCESS_GROUP: libc::c_uint = 1 << 2;

/// Opens a pidfd. The caller must re-check the process's start time afterwards:
/// the pid may have been reused before this call.
pub(crate) fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    let raw = rustix::process::Pid::from_raw(pid.get()).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    rustix::process::pidfd_open(raw, PidfdFlags::empty()).map_err(io::Error::from)
}

/// Signals exactly the process behind `pidfd`, never a reused pid.
pub(crate) fn pidfd_signal(pidfd: BorrowedFd<'_>, sig: Signal) -> io::Result<()> {
    rustix::process::pidfd_send_signal(pidfd, sig).map_err(io::Error::from)
}

/// Signals the whole process group led by the process behind `leader`.
/// Fails with EINVAL on kernels before 6.9; callers fall back to per-member
/// signals.
pub(crate) fn pidfd_signal_group(leader: BorrowedFd<'_>, sig: Signal) -> io::Result<()> {
    // SAFETY: pidfd_send_signal(2) takes (int pidfd, int sig, siginfo_t *info,
    // unsigned int flags). `leader` is a live fd borrowed for this call, the
    // signal number comes from a valid `Signal`, a null `info` asks the kernel
    // to fill in a default siginfo, and the flag is a defined constant. No
    // memory is shared with the kernel beyond these scalars.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            leader.as_raw_fd(),
            sig.as_raw(),
            std::ptr::null::<libc::siginfo_t>(),
            PIDFD_SIGNAL_PROCESS_GROUP,
        )
    };
    if ret == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Registers an owned fd with the tokio reactor.
pub(crate) fn async_fd(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: `register` requires the fd to stay open and refer to the same
    // file description while registered. `OwnedFd` is moved in and owned by
    // the `AsyncFd` until it is dropped or `into_inner` is called; nothing else
    // can close it, and `as_raw_fd` on an `OwnedFd` always returns the same fd.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// Registers an owned fd with the tokio reactor for `interest` only (a PSI
/// trigger reports `POLLPRI`, nothing else).
pub(crate) fn async_fd_with(
    fd: OwnedFd,
    interest: tokio::io::Interest,
) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: as in `async_fd`: the `OwnedFd` is moved into the `AsyncFd`,
    // which alone can close it, and its raw fd never changes.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}

/// Makes a child started from `cmd` get SIGKILL when its parent thread dies,
/// so helper processes of tests and benchmarks never outlive them.
pub fn kill_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec; it only makes
    // one prctl(2) system call, which is async-signal-safe, and neither
    // allocates nor takes locks.
    unsafe {
        cmd.pre_exec(|| rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(io::Error::from));
    }
}

/// Caps glibc's malloc at one arena. The daemon's cycles run on tokio's
/// blocking threads; an arena per thread would each keep its own high-water
/// mark of freed snapshot memory resident.
pub(crate) fn single_malloc_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt takes plain integers and only tunes the allocator; it is
    // called at startup, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Runs the daemon again, in this process, without glibc's per-thread
/// cache of freed blocks (`tcache`: up to 7 blocks of each of 64 sizes a
/// thread, counted as in use, never trimmed). With it the daemon's
/// `RssAnon` crept as the caches of its long-lived threads filled (load
/// bench, 10,000 processes, minute lows 2,752 3,192 3,304 3,368 KiB);
/// without it 2,592 2,824 2,844 2,860 KiB. glibc takes the setting only
/// from `GLIBC_TUNABLES` at start, so the daemon execs its own binary once
/// with it set (the pid, fds and arguments stay). Nothing changes when the
/// variable is set already (so this runs once; an administrator who sets
/// it for something else adds `glibc.malloc.tcache_count=0` to it) or the
/// exec fails.
#[inline(never)]
pub(crate) fn exec_without_thread_cache() {
    #[cfg(target_env = "gnu")]
    {
        use std::os::unix::ffi::OsStringExt;
        // One already set is the administrator's choice (and, after the
        // exec, this function's: it runs once).
        if std::env::var_os("GLIBC_TUNABLES").is_some() {
            return;
        }
        // (`Command::exec` would do all this safely, for 6.8 KB more of binary.)
        let Ok(args) = std::env::args_os().map(|a| std::ffi::CString::new(a.into_vec())).collect::<Result<Vec<_>, _>>()
        else {
            return;
        };
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // SAFETY: both are C string literals; this runs at start-up while this is
        // the process's only thread, so nothing reads the environment
        // meanwhile. (Children the daemon starts keep the setting, which
        // only makes their allocator cache less.)
        unsafe { libc::setenv(c"GLIBC_TUNABLES".as_ptr(), c"glibc.malloc.tcache_count=0".as_ptr(), 1) };
        // SAFETY: the path is a C string literal and `argv` a null-ended
        // array of pointers into `args`, which outlives the call; execv
        // returns only when it failed, changing nothing.
        unsafe { libc::execv(c"/proc/self/exe".as_ptr(), argv.as_ptr()) };
    }
}

/// Hands the allocator's wholly free pages back to the kernel: each scan
/// builds and drops a few MiB of snapshot, which would otherwise stay resident.
pub(crate) fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists under its
    // locks; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The allocator's own figures, in bytes: `(in use, free in its heap,
/// mapped apart)`; zeros where it does not say. Debug logs show them, so
/// that memory kept by live data is told from memory kept by holes.
pub(crate) fn heap_figures() -> (u64, u64, u64) {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters under its
        // locks and returns a plain struct; it has no preconditions.
        let m = unsafe { libc::mallinfo2() };
        (m.uordblks as u64, m.fordblks as u64, m.hblkhd as u64)
    }
    #[cfg(not(target_env = "gnu"))]
    (0, 0, 0)
}

/// Blocks `sigs` in this process (the caller is single-threaded) and returns
/// a signalfd that reads them: the `reaperctl run` wrapper waits on it and on
/// its host's pidfd in one poll. Children started with `std::process` get an
/// empty signal mask again (std resets it before exec).
pub(crate) fn block_into_signalfd(sigs: &[Signal]) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `set` is initialised by sigemptyset before any other use and
    // lives on this stack frame; sigaddset only gets valid signal numbers;
    // pthread_sigmask and signalfd read the set and return plain integers;
    // signalfd's return value is a new fd we own (checked for -1 first).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        for s in sigs {
            libc::sigaddset(&raw mut set, s.as_raw());
        }
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        let fd = libc::signalfd(-1, &raw const set, libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Makes the child started from `cmd` move itself into the cgroup whose
/// `cgroup.procs` is open as `procs`, after fork and before exec: nothing
/// the program starts can run outside the cgroup, not even for a moment.
pub(crate) fn join_cgroup_before_exec(cmd: &mut std::process::Command, procs: OwnedFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec. It makes one
    // write(2) system call (async-signal-safe) on an fd opened by the parent,
    // from a static buffer; it neither allocates (an `io::Error` from a raw
    // errno holds no heap data) nor takes locks. "0" means the writing process.
    unsafe {
        cmd.pre_exec(move || rustix::io::write(&procs, b"0").map(drop).map_err(io::Error::from));
    }
}

/// Unblocks `sigs` in the child started from `cmd` before exec (std keeps
/// the parent's signal mask): the host gets the signals the wrapper blocked.
pub(crate) fn unblock_before_exec(cmd: &mut std::process::Command, sigs: &[Signal]) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the set is plain data, initialised by sigemptyset and filled
    // with valid signal numbers here, in the parent, then copied into the
    // closure. In the child the closure makes one sigprocmask(2) call
    // (async-signal-safe) and allocates nothing.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        for s in sigs {
            libc::sigaddset(&raw mut set, s.as_raw());
        }
        cmd.pre_exec(move || {
            if libc::sigprocmask(libc::SIG_UNBLOCK, &raw const set, std::ptr::null_mut()) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
}

/// The largest peak resident set (`ru_maxrss`, KiB) among the children this
/// process has waited for: what `benches/memory.rs` reports for one run of
/// `mcp-reaperd --once` (in a helper process of its own, so only that child
/// counts).
pub fn children_peak_rss_kib() -> Option<u64> {
    // SAFETY: rusage is plain data; getrusage(2) fills the whole struct we own
    // and has no other effect.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_CHILDREN, &raw mut ru) == 0).then(|| u64::try_from(ru.ru_maxrss).unwrap_or(0))
    }
}

/// CPU time `pid` has used, all its threads (the exited ones included), to
/// the nanosecond: the process's CPU-time clock (`clock_getcpuclockid(3)`).
/// What the benches measure a daemon by: `/proc/PID/schedstat` counts its
/// main thread only (not the cycles run on tokio's blocking threads), and
/// `stat` counts clock ticks, too coarse for an idle minute.
pub fn process_cpu_time(pid: i32) -> Option<std::time::Duration> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid(3) only writes the clock id into the
    // variable we own; a pid that does not exist is an error return.
    if unsafe { libc::clock_getcpuclockid(pid, &raw mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime(2) only writes the timespec we own.
    if unsafe { libc::clock_gettime(clock, &raw mut ts) } != 0 {
        return None;
    }
    Some(std::time::Duration::new(u64::try_from(ts.tv_sec).ok()?, u32::try_from(ts.tv_nsec).ok()?))
}

/// Socket activation: the fds `3 .. 3 + n` the service manager passed at
/// exec, owned from now on (dropped: closed) and close-on-exec; `None` for
/// one that is not open. Only the first call takes them (later ones get
/// nothing), and it must come at start-up: those numbers were taken when
/// the process began, so no file this process opened can have them.
pub(crate) fn take_passed_fds(n: u32) -> Vec<Option<OwnedFd>> {
    use std::os::fd::FromRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    static TAKEN: AtomicBool = AtomicBool::new(false);
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let raw = 3 + i32::try_from(i).ok()?;
            // SAFETY: fcntl(F_GETFD) on any number only reads the fd's flags,
            // or fails with EBADF when it is not open.
            if unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
                return None;
            }
            // SAFETY: `raw` is open, and by the protocol (LISTEN_PID is this
            // process, checked by the caller) it was handed to this process at
            // exec for it to own: no object here holds it (the numbers below
            // 3 + n were taken before any code of this process ran, and the
            // static above makes this the one place that takes them).
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // Children (an engine's client, a hook) must not inherit it.
            let _ = rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC);
            Some(fd)
        })
        .collect()
}

/// Removes `names` from the environment, when this process has one thread
/// only (start-up, before the runtime's); whether it did.
pub(crate) fn unset_env_alone(names: &[&str]) -> bool {
    // Threads of this process: /proc/self/task has one entry per thread.
    let alone = std::fs::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1);
    if alone {
        for n in names {
            // SAFETY: no other thread exists (counted just above, and only this
            // thread could start one) to read the environment meanwhile.
            unsafe { std::env::remove_var(n) };
        }
    }
    alone
}

/// Attaches a classic BPF program to a socket (`SO_ATTACH_FILTER`): the
/// kernel runs it on each datagram before queueing it, and drops those it
/// returns 0 for.
pub(crate) fn attach_socket_filter(sock: BorrowedFd<'_>, program: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(program.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let prog = libc::sock_fprog { len, filter: program.as_ptr().cast_mut() };
    // SAFETY: `prog` points at `len` initialized instructions that outlive
    // the call (the kernel copies the program before returning and never
    // writes through the pointer, so casting away const is sound); the
    // option length is the size of the `sock_fprog` passed; `sock` is a
    // valid, open descriptor for the call's duration.
    let ret = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            std::ptr::from_ref(&prog).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<libc::sock_fprog>()).expect("a small struct"),
        )
    };
    if ret == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Datagrams one [`recv_datagrams`] call takes at most.
pub const DATAGRAMS_AT_ONCE: usize = 64;

/// Receives the datagrams waiting on `fd` (recvmmsg(2), without blocking),
/// at most [`DATAGRAMS_AT_ONCE`], the `i`-th into `buf[i * slot..][..slot]`;
/// their lengths (each at most `slot`: a longer one is cut) go in `lens`.
/// One system call for a batch where `recv` takes one a datagram (issue 37:
/// under churn the proc connector queues ~900 a second).
pub fn recv_datagrams(fd: BorrowedFd<'_>, buf: &mut [u8], slot: usize, lens: &mut Vec<usize>) -> io::Result<()> {
    lens.clear();
    let n = buf.len().checked_div(slot).unwrap_or(0).min(DATAGRAMS_AT_ONCE);
    if n == 0 {
        return Ok(());
    }
    let mut iovs: Vec<libc::iovec> = buf
        .chunks_exact_mut(slot)
        .take(n)
        .map(|c| libc::iovec { iov_base: c.as_mut_ptr().cast(), iov_len: c.len() })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .map(|iov| {
            // SAFETY: mmsghdr is plain C data for which all zero bytes are a
            // valid value (null pointers, zero lengths and flags).
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    let count = libc::c_uint::try_from(hdrs.len()).unwrap_or(0);
    // SAFETY: `hdrs` holds `count` headers, each pointing at one iovec of
    // `iovs`, each of which describes a distinct `slot`-byte piece of `buf`;
    // all three outlive the call and nothing else touches them meanwhile.
    // The kernel writes only into those pieces and the headers' `msg_len`
    // and flags. No name, control data or timeout is passed (null).
    let got =
        unsafe { libc::recvmmsg(fd.as_raw_fd(), hdrs.as_mut_ptr(), count, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
    let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
    lens.extend(hdrs.iter().take(got).map(|h| (h.msg_len as usize).min(slot)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_are_received_many_at_once_each_in_its_slot() {
        use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType};
        use std::os::fd::AsFd;
        let (a, b) =
            rustix::net::socketpair(AddressFamily::UNIX, SocketType::DGRAM, SocketFlags::NONBLOCK, None).unwrap();
        let mut buf = vec![0u8; 64];
        let mut lens = Vec::new();
        recv_datagrams(b.as_fd(), &mut buf, 16, &mut lens).unwrap_err(); // nothing yet: EAGAIN
        for d in [&b"one"[..], b"two!", &[7u8; 40]] {
            rustix::net::send(&a, d, SendFlags::empty()).unwrap();
        }
        recv_datagrams(b.as_fd(), &mut buf, 16, &mut lens).unwrap();
        assert_eq!(lens, [3, 4, 16], "the third cut to its slot");
        assert_eq!((&buf[..3], &buf[16..20], &buf[32..48]), (&b"one"[..], &b"two!"[..], &[7u8; 16][..]));
        // More waiting than slots: the rest at the next call.
        for _ in 0..5 {
            rustix::net::send(&a, b"x", SendFlags::empty()).unwrap();
        }
        recv_datagrams(b.as_fd(), &mut buf, 16, &mut lens).unwrap();
        assert_eq!(lens.len(), 4);
        recv_datagrams(b.as_fd(), &mut buf, 16, &mut lens).unwrap();
        assert_eq!(lens, [1]);
    }

    #[test]
    fn a_process_cpu_clock_counts_its_threads() {
        let me = i32::try_from(std::process::id()).expect("a pid");
        let before = process_cpu_time(me).expect("own clock");
        // A thread that runs until its own CPU clock says 20 ms, and exits.
        std::thread::spawn(|| {
            let own = || rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
            let start = own();
            let mut x = 0u64;
            while (own().tv_sec - start.tv_sec) * 1_000_000_000 + (own().tv_nsec - start.tv_nsec) < 20_000_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        })
        .join()
        .expect("spinner");
        let after = process_cpu_time(me).expect("own clock");
        assert!(after.saturating_sub(before) >= std::time::Duration::from_millis(20), "{before:?} -> {after:?}");
    }
}
