//! The only module with `unsafe`: system calls that no safe wrapper offers.
//! Everything else goes through rustix's safe API.

// The one module of the library allowed `unsafe` (Cargo.toml denies it
// elsewhere); every block carries a `// SAFETY:` comment.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::process::{PidfdFlags, Signal};

use crate::ids::Pid;

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

/// One program header of a loaded object, as [`own_read_only_pages`] reads it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub kind: u32,
    pub flags: u32,
    pub vaddr: usize,
    pub filesz: usize,
}

/// An object of this process's link map: its file, load bias and program headers.
struct Loaded {
    path: std::path::PathBuf,
    bias: usize,
    segs: Vec<Segment>,
}

/// What `dl_iterate_phdr` tells: every object loaded (the program first,
/// `dl_iterate_phdr(3)`, named by `/proc/self/exe`; the vDSO and any other
/// object without an absolute path left out), and how many objects were
/// ever unloaded (`dlpi_subs`).
fn loaded_objects() -> (Vec<Loaded>, u64) {
    struct Out {
        objects: Vec<Loaded>,
        seen: usize,
        subs: u64,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: glibc passes a valid `dl_phdr_info` for the duration of the
        // callback, and `data` is the `Out` [`loaded_objects`] lends below,
        // borrowed by nothing else meanwhile.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Out>()) };
        out.subs = info.dlpi_subs;
        out.seen += 1;
        let path = if out.seen == 1 {
            std::path::PathBuf::from("/proc/self/exe")
        } else if info.dlpi_name.is_null() {
            return 0;
        } else {
            // SAFETY: `dlpi_name` is a NUL-terminated string owned by the
            // dynamic linker, valid for the duration of the callback.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) };
            let name = std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
            if !name.is_absolute() {
                return 0;
            }
            name.to_path_buf()
        };
        let phdrs = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers of
            // the loaded object, mapped for as long as the object is (the
            // whole callback).
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let segs = phdrs
            .iter()
            .map(|p| Segment {
                kind: p.p_type,
                flags: p.p_flags,
                vaddr: usize::try_from(p.p_vaddr).unwrap_or(usize::MAX),
                filesz: usize::try_from(p.p_filesz).unwrap_or(0),
            })
            .collect();
        out.objects.push(Loaded { path, bias: usize::try_from(info.dlpi_addr).unwrap_or(usize::MAX), segs });
        0 // every object
    }
    let mut out = Out { objects: Vec::new(), seen: 0, subs: 0 };
    // SAFETY: the callback matches dl_iterate_phdr(3)'s signature and only
    // reads the headers it is given into `out`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut out).cast()) };
    (out.objects, out.subs)
}

/// The whole pages of this executable's read-only `PT_LOAD` segments (its
/// code and constants), as address ranges; never a writable segment, nor one
/// that overlaps `PT_GNU_RELRO` (relocated data, made read-only after the
/// relocation: dropped, it would come back unrelocated from the file).
/// Rounded inwards, so no page another segment shares is in them.
pub(crate) fn read_only_ranges(bias: usize, segs: &[Segment], page: usize) -> Vec<std::ops::Range<usize>> {
    let span = |s: &Segment| {
        let start = bias.checked_add(s.vaddr)?;
        Some(start..start.checked_add(s.filesz)?)
    };
    let relro: Vec<_> = segs.iter().filter(|s| s.kind == libc::PT_GNU_RELRO).filter_map(span).collect();
    segs.iter()
        .filter(|s| s.kind == libc::PT_LOAD && s.flags & libc::PF_W == 0)
        .filter_map(span)
        .filter(|r| relro.iter().all(|x| x.end <= r.start || r.end <= x.start))
        .filter_map(|r| {
            let start = r.start.checked_next_multiple_of(page)?;
            let end = r.end / page * page;
            (start < end).then_some(start..end)
        })
        .collect()
}

/// The ranges of [`read_only_ranges`] of this executable and of the
/// libraries loaded with it (libc, the dynamic linker, libgcc) that
/// `/proc/self/maps` shows mapped private, not writable, from that object's
/// file (by inode): a program unpacked into anonymous memory, a library
/// replaced on disk since it was loaded, or anything mapped in a way this
/// function does not expect, gets none. None at all once any object was
/// ever unloaded: each range must stay the object's for as long as the
/// process lives (see [`drop_own_read_only_pages`]).
pub(crate) fn own_read_only_pages() -> Vec<std::ops::Range<usize>> {
    use std::os::unix::fs::MetadataExt;
    let (objects, subs) = loaded_objects();
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return Vec::new() };
    if subs != 0 {
        return Vec::new();
    }
    let mapped: Vec<(std::ops::Range<usize>, u64)> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let (range, perms, _off, _dev, inode) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            let (a, b) = range.split_once('-')?;
            let private_read_only = perms.len() == 4 && perms.as_bytes()[1] == b'-' && perms.as_bytes()[3] == b'p';
            let range = usize::from_str_radix(a, 16).ok()?..usize::from_str_radix(b, 16).ok()?;
            private_read_only.then_some((range, inode.parse::<u64>().ok()?))
        })
        .collect();
    let page = rustix::param::page_size();
    let mut out = Vec::new();
    for o in objects {
        let Ok(meta) = std::fs::metadata(&o.path) else { continue };
        let ours: Vec<_> = mapped.iter().filter(|(_, ino)| *ino == meta.ino()).map(|(r, _)| r.clone()).collect();
        out.extend(read_only_ranges(o.bias, &o.segs, page).into_iter().filter(|r| covered(r, &ours)));
    }
    out
}

/// Whether `maps` (sorted, as /proc lists them) cover `r` without a gap.
fn covered(r: &std::ops::Range<usize>, maps: &[std::ops::Range<usize>]) -> bool {
    let mut at = r.start;
    for m in maps {
        if m.start <= at && at < m.end {
            at = m.end;
        }
        if at >= r.end {
            return true;
        }
    }
    false
}

/// Drops `ranges` (from [`own_read_only_pages`]: the read-only file pages
/// of this executable and its libraries) from this process's page tables;
/// the page cache keeps them, and the next touch maps them again (a minor
/// fault). The bytes advised; none once any object was ever unloaded
/// (its range could hold something else now). Nothing in the daemon
/// unloads objects (no `dlclose`; glibc keeps its NSS modules loaded).
pub(crate) fn drop_own_read_only_pages(ranges: &[std::ops::Range<usize>]) -> usize {
    if loaded_objects().1 != 0 {
        return 0;
    }
    let mut done = 0;
    for r in ranges {
        // SAFETY: `r` lies in a read-only, private, file-backed mapping of
        // this executable or of a library loaded with it (checked against
        // /proc/self/maps by `own_read_only_pages`, when no object had ever
        // been unloaded; none has since, checked just above, so each is
        // still mapped as it was), whole pages only, none writable nor
        // RELRO. No page there was ever written (no text relocations in a
        // Rust PIE nor in the distribution's libraries), so
        // MADV_DONTNEED only drops page-table entries of unmodified page
        // cache pages; the next access maps the file's same bytes again.
        // No Rust reference sees a change. (A debugger's breakpoints or a
        // uprobe written into these pages would be lost.)
        let ret = unsafe { libc::madvise(r.start as *mut libc::c_void, r.end - r.start, libc::MADV_DONTNEED) };
        if ret == 0 {
            done += r.end - r.start;
        }
    }
    done
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

    fn seg(kind: u32, flags: u32, vaddr: usize, filesz: usize) -> Segment {
        Segment { kind, flags, vaddr, filesz }
    }

    #[test]
    fn only_whole_pages_of_read_only_loads_outside_relro() {
        let (r, x, w) = (libc::PF_R, libc::PF_R | libc::PF_X, libc::PF_R | libc::PF_W);
        let segs = [
            seg(libc::PT_PHDR, r, 0x40, 0x2a0),
            seg(libc::PT_LOAD, r, 0, 0x1_5940),
            seg(libc::PT_LOAD, x, 0x1_5a41, 0x3_0000),
            seg(libc::PT_LOAD, w, 0x5_0000, 0x8000),
            // A read-only load that RELRO covers (a linker that maps RELRO so).
            seg(libc::PT_LOAD, r, 0x6_0000, 0x3000),
            seg(libc::PT_GNU_RELRO, r, 0x6_0000, 0x3000),
            seg(libc::PT_LOAD, r, 0x7_0100, 0x800),
        ];
        let got = read_only_ranges(0x1000_0000, &segs, 0x1000);
        assert_eq!(got, vec![0x1000_0000..0x1001_5000, 0x1001_6000..0x1004_5000]);
    }

    #[test]
    fn dropping_the_own_text_leaves_a_working_program() {
        let ranges = own_read_only_pages();
        assert!(!ranges.is_empty(), "this test binary has read-only segments of its own");
        assert!(drop_own_read_only_pages(&ranges) > 0);
        // Code and constants come back from the file.
        let v: Vec<String> = (0..100).map(|i| format!("{i:>4}")).collect();
        assert_eq!(v.concat().len(), 400);
        assert!(drop_own_read_only_pages(&ranges) > 0);
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

    #[test]
    fn libc_text_is_among_the_pages_dropped() {
        let ranges = own_read_only_pages();
        // Through the GOT: libc's own address of the function.
        let getpid = libc::getpid as *const () as usize;
        let own = dropping_the_own_text_leaves_a_working_program as *const () as usize;
        assert!(ranges.iter().any(|r| r.contains(&getpid)), "libc's text: {ranges:x?}");
        assert!(ranges.iter().any(|r| r.contains(&own)), "the program's own text");
        assert!(drop_own_read_only_pages(&ranges) > 0);
        assert!(libc_still_answers());
    }

    fn libc_still_answers() -> bool {
        rustix::process::getpid().as_raw_nonzero().get() == i32::try_from(std::process::id()).unwrap_or(0)
    }
}
