//! What a user may reach, judged for them by a reaper that may be root: a
//! path is resolved one component at a time as the kernel would for that
//! user (search permission on every directory, symlinks followed and their
//! targets walked the same way, at most 40), by their uid, gid and
//! supplementary groups against each object's owner, group and mode bits.
//! Nothing is opened but directories (`O_PATH`, which reads nothing and
//! never reaches a device's driver) until the last component is known to be
//! what the caller wants: a socket is then connected to, a regular file
//! opened, through the directory fd that was checked (`/proc/self/fd/N/name`
//! for a socket), so no directory can be swapped between check and use.
//!
//! Why checks and not the user's own rights: a thread of its own with
//! `setfsuid`/`setfsgid`/`setgroups` would let the kernel decide, but needs
//! `CAP_SETUID`/`CAP_SETGID` and the `@privileged` system calls, which the
//! shipped unit does not grant (and a daemon holding them could become any
//! user). Mode bits are what is checked: an object carrying a POSIX access
//! ACL is judged by its owner class only (its group bits are the ACL's mask,
//! not a group's rights), so an ACL never grants more here than the mode
//! shows to its owner, and LSMs (which only ever deny) are not consulted.
//! What stays: the last name inside the checked directory could be renamed
//! between the check and the use by someone who may write that directory;
//! the object reached is compared with the one checked afterwards.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

/// The symlinks one resolution may follow (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Who a path is judged for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// Read permission (`r`), write (`w`), search or execute (`x`).
pub const READ: u32 = 4;
pub const WRITE: u32 = 2;
pub const SEARCH: u32 = 1;

impl Cred {
    /// The credentials of the process at `proc_dir` (`/proc/PID`), from its
    /// `status`: `Uid:`, `Gid:` and `Groups:`. A process whose real,
    /// effective, saved and filesystem ids are not all one (a set-id
    /// program, whose argv its caller chose) is nobody's word.
    pub fn of_process(proc_dir: &Path) -> Result<Cred, String> {
        let text = std::fs::read_to_string(proc_dir.join("status")).map_err(|e| format!("its status: {e}"))?;
        let ids = |key: &str| -> Option<Vec<u32>> {
            let line = text.lines().find_map(|l| l.strip_prefix(key))?;
            line.split_whitespace().map(|w| w.parse().ok()).collect()
        };
        let (Some(uids), Some(gids)) = (ids("Uid:"), ids("Gid:")) else {
            return Err("its status has no Uid:/Gid: lines".into());
        };
        let one = |v: &[u32]| v.first().copied().filter(|f| v.len() == 4 && v.iter().all(|x| x == f));
        let (Some(uid), Some(gid)) = (one(&uids), one(&gids)) else {
            return Err(format!("it runs set-id (uids {uids:?}, gids {gids:?}): its argv is not its user's word"));
        };
        let groups = ids("Groups:").unwrap_or_default();
        Ok(Cred { uid, gid, groups })
    }

    /// A user known by uid only (a home's owner): the reaper's own
    /// credentials when it is that user, else the passwd group and no
    /// supplementary groups (never more than the user has).
    pub fn of_user(uid: u32) -> Cred {
        if rustix::process::geteuid().as_raw() == uid {
            let groups = rustix::process::getgroups().unwrap_or_default().iter().map(|g| g.as_raw()).collect();
            return Cred { uid, gid: rustix::process::getegid().as_raw(), groups };
        }
        // 65534: the kernel's overflow gid, a group nobody's files belong to.
        Cred { uid, gid: passwd_gid(uid).unwrap_or(65534), groups: Vec::new() }
    }

    fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Whether this user may `want` (a sum of [`READ`], [`WRITE`],
    /// [`SEARCH`]) on the object `st` describes. `acl`: it carries an
    /// access ACL (only its owner class is trusted then).
    pub fn may(&self, st: &Stat, want: u32, acl: bool) -> bool {
        let mode = st.st_mode;
        if self.uid == 0 {
            // Root passes the mode bits, but runs a non-directory only when someone may.
            return want & SEARCH == 0 || FileType::from_raw_mode(mode) == FileType::Directory || mode & 0o111 != 0;
        }
        let bits = if st.st_uid == self.uid {
            mode >> 6
        } else if acl {
            return false;
        } else if self.in_group(st.st_gid) {
            mode >> 3
        } else {
            mode
        };
        bits & want & 7 == want
    }
}

/// `uid`'s primary group in `/etc/passwd`.
fn passwd_gid(uid: u32) -> Option<u32> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2].parse() == Ok(uid)).then(|| f[3].parse().ok()).flatten()
    })
}

/// Why a path was not reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// It does not exist (as that user sees it).
    Missing(String),
    /// That user may not reach it, or it is not what was asked for.
    Refused(String),
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Denied::Missing(w) | Denied::Refused(w) => f.write_str(w),
        }
    }
}

/// A path resolved for a user: the directory holding its last component,
/// that name, and what it was when checked.
pub struct Resolved {
    pub dir: OwnedFd,
    pub name: OsString,
    pub stat: Stat,
    /// The path as resolved (symlinks followed), for messages.
    pub shown: PathBuf,
    /// The last component carries an access ACL.
    pub acl: bool,
}

impl Resolved {
    /// The path that reaches the checked object through the checked
    /// directory, whatever happens to the directories above it meanwhile.
    pub fn via_fd(&self) -> PathBuf {
        let mut p = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()));
        p.push(&self.name);
        p
    }

    /// Whether `name` in the checked directory is still the object checked.
    pub fn unchanged(&self) -> bool {
        rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (self.stat.st_dev, self.stat.st_ino))
    }
}

/// `ls -l`'s words for an object: `drwx------ 0:0`.
pub fn describe(st: &Stat) -> String {
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => 'd',
        FileType::Socket => 's',
        FileType::Symlink => 'l',
        FileType::Fifo => 'p',
        FileType::CharacterDevice => 'c',
        FileType::BlockDevice => 'b',
        _ => '-',
    };
    let mut s = String::from(kind);
    for shift in [6, 3, 0] {
        let b = (st.st_mode >> shift) & 7;
        s.push(if b & 4 != 0 { 'r' } else { '-' });
        s.push(if b & 2 != 0 { 'w' } else { '-' });
        s.push(if b & 1 != 0 { 'x' } else { '-' });
    }
    format!("{s} {}:{}", st.st_uid, st.st_gid)
}

/// Whether the object open as `fd` carries an access ACL.
fn has_acl(fd: impl AsFd) -> bool {
    let p = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    rustix::fs::getxattr(p.as_str(), "system.posix_acl_access", &mut [0u8; 0][..]).is_ok()
}

fn errno(e: rustix::io::Errno, at: &Path) -> Denied {
    let shown = at.display();
    match e {
        rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR => Denied::Missing(format!("{shown} does not exist")),
        rustix::io::Errno::LOOP => Denied::Refused("a symlink loop".into()),
        e => Denied::Refused(format!("{shown}: {}", std::io::Error::from(e))),
    }
}

/// Resolves `path` (absolute) for `cred`; the last component is looked at
/// (`lstat`), never opened, and is no symlink.
pub fn resolve(path: &Path, cred: &Cred) -> Result<Resolved, Denied> {
    walk(path, cred).map_err(|stop| match stop {
        Stop::Unsearchable(why) => Denied::Refused(why),
        Stop::Denied(Denied::Missing(_)) => Denied::Missing(format!("{} does not exist", path.display())),
        Stop::Denied(refused) => refused,
    })
}

/// What `cred`'s user finds at `path`: `Ok(None)` when nothing is there
/// for them: it does not exist, or it lies below a directory they may not
/// search. Whether anything is below such a directory is unknown to them,
/// and nothing there is looked at here either, so what they cannot see
/// changes nothing the caller does or says (a host config in a root-only
/// `CLAUDE_CONFIG_DIR` is reported the same whether or not it exists, and
/// no automount below it is triggered).
pub fn lookup(path: &Path, cred: &Cred) -> Result<Option<Resolved>, Denied> {
    match walk(path, cred) {
        Ok(r) => Ok(Some(r)),
        Err(Stop::Unsearchable(_) | Stop::Denied(Denied::Missing(_))) => Ok(None),
        Err(Stop::Denied(refused)) => Err(refused),
    }
}

/// Why a walk stopped: a directory on the way the user may not search is
/// told apart, as what lies below it is no business of theirs.
enum Stop {
    Unsearchable(String),
    Denied(Denied),
}

impl From<Denied> for Stop {
    fn from(d: Denied) -> Stop {
        Stop::Denied(d)
    }
}

fn walk(path: &Path, cred: &Cred) -> Result<Resolved, Stop> {
    if !path.is_absolute() {
        return Err(Denied::Refused(format!("{} is not an absolute path", path.display())).into());
    }
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root = || rustix::fs::open("/", dir_flags, Mode::empty()).map_err(|e| errno(e, Path::new("/")));
    let mut queue: VecDeque<OsString> = VecDeque::new();
    push_front(&mut queue, path);
    let mut dir = root()?;
    let mut dir_stat = rustix::fs::fstat(&dir).map_err(|e| errno(e, Path::new("/")))?;
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = queue.pop_front() {
        // Its ACL is looked up only where `may` reads it: not for root, not for the owner.
        let acl = cred.uid != 0 && dir_stat.st_uid != cred.uid && has_acl(&dir);
        if !cred.may(&dir_stat, SEARCH, acl) {
            let why = format!("uid {} may not search {} ({})", cred.uid, at.display(), describe(&dir_stat));
            return Err(Stop::Unsearchable(why));
        }
        let here = at.join(&name);
        if name == ".." {
            dir = rustix::fs::openat(&dir, "..", dir_flags, Mode::empty()).map_err(|e| errno(e, &here))?;
            dir_stat = rustix::fs::fstat(&dir).map_err(|e| errno(e, &here))?;
            at.pop();
            continue;
        }
        let st = rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| errno(e, &here))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            links += 1;
            if links > MAX_LINKS {
                return Err(Denied::Refused("a symlink loop".into()).into());
            }
            let target = rustix::fs::readlinkat(&dir, &name, Vec::new()).map_err(|e| errno(e, &here))?;
            let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
            if target.is_absolute() {
                dir = root()?;
                dir_stat = rustix::fs::fstat(&dir).map_err(|e| errno(e, Path::new("/")))?;
                at = PathBuf::from("/");
            }
            push_front(&mut queue, &target);
            continue;
        }
        if queue.is_empty() {
            let mut r = Resolved { dir, name, stat: st, shown: here, acl: false };
            // The last component's ACL by its path through the directory (the object is never opened).
            r.acl = rustix::fs::lgetxattr(r.via_fd(), "system.posix_acl_access", &mut [0u8; 0][..]).is_ok();
            return Ok(r);
        }
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(Denied::Missing(format!("{} is not a directory", here.display())).into());
        }
        let next = rustix::fs::openat(&dir, &name, dir_flags, Mode::empty()).map_err(|e| errno(e, &here))?;
        let next_stat = rustix::fs::fstat(&next).map_err(|e| errno(e, &here))?;
        if (next_stat.st_dev, next_stat.st_ino) != (st.st_dev, st.st_ino) {
            return Err(Denied::Refused(format!("{} changed while it was looked at", here.display())).into());
        }
        (dir, dir_stat, at) = (next, next_stat, here);
    }
    Err(Denied::Refused(format!("{} names no file", path.display())).into())
}

/// Puts `path`'s components (a leading `/` and `.` dropped) before `queue`.
fn push_front(queue: &mut VecDeque<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    for p in parts.into_iter().rev() {
        queue.push_front(p);
    }
}

/// Whether `cred` could connect to the unix socket at `path`: it resolves
/// (search on every directory), is a socket, and they may write to it.
pub fn check_socket(path: &Path, cred: &Cred) -> Result<Resolved, Denied> {
    let r = resolve(path, cred)?;
    if FileType::from_raw_mode(r.stat.st_mode) != FileType::Socket {
        return Err(Denied::Refused(format!("{} is no socket", r.shown.display())));
    }
    if !cred.may(&r.stat, WRITE, r.acl) {
        let why = format!("uid {} may not connect to {} ({})", cred.uid, r.shown.display(), describe(&r.stat));
        return Err(Denied::Refused(why));
    }
    Ok(r)
}

/// A non-blocking stream connected to the socket at `path`, if `cred`
/// could connect to it ([`check_socket`]); the connection goes through the
/// checked directory.
pub fn connect(path: &Path, cred: &Cred) -> Result<OwnedFd, Denied> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let r = check_socket(path, cred)?;
    let fail = |e: rustix::io::Errno| Denied::Refused(format!("{}: {}", r.shown.display(), std::io::Error::from(e)));
    let addr = SocketAddrUnix::new(r.via_fd()).map_err(fail)?;
    let sock = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(fail)?;
    rustix::net::connect(&sock, &addr).map_err(fail)?;
    if !r.unchanged() {
        return Err(Denied::Refused(format!("{} was replaced while connecting", r.shown.display())));
    }
    Ok(sock)
}

#[cfg(test)]
mod tests;
