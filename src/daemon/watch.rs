//! Watches the config with inotify on directories, not files: editors replace
//! files by rename, so a watch on the file itself would miss changes.
//!
//! The config path may be a symlink, or lead through symlinked directories
//! (`/etc/mcp-reaper/config.toml -> /srv/cfg/reaper.toml`, or a Kubernetes
//! `ConfigMap`'s `config.toml -> ..data/config.toml` with `..data` swapped to a
//! new directory on update). So every directory on the way is watched: the
//! one holding each symlink met while resolving the path (for that link's
//! name) and the one holding the file itself. [`ConfigWatch::rearm`]
//! resolves again, since a link may have been retargeted.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

pub struct ConfigWatch {
    pub fd: OwnedFd,
    main: PathBuf,
    /// Per watch descriptor: which entries of that directory matter.
    wds: HashMap<i32, Interest>,
}

/// What in one watched directory concerns the config.
#[derive(Default)]
struct Interest {
    names: HashSet<OsString>,
    /// Any `*.toml` (the `config.d/` directory).
    toml: bool,
}

const MASK: WatchFlags = WatchFlags::CLOSE_WRITE
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::ATTRIB);

/// Symlinks followed at most while resolving, as the kernel's MAXSYMLINKS.
const MAX_LINKS: usize = 40;

impl ConfigWatch {
    /// Watches the directories the config at `main` comes from, and `config.d/` beside it.
    pub fn new(main: &Path) -> io::Result<ConfigWatch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let main = std::path::absolute(main)?;
        let mut w = ConfigWatch { fd, main, wds: HashMap::new() };
        w.rearm();
        Ok(w)
    }

    /// (Re-)resolves the config path and (re-)adds the watches: `config.d/`
    /// may have been created, a symlink retargeted. Watches no longer wanted
    /// are removed.
    pub fn rearm(&mut self) {
        let dir = self.main.parent().unwrap_or(Path::new("/"));
        let mut wanted: Vec<(PathBuf, Option<OsString>)> = vec![
            (dir.to_path_buf(), Some(OsString::from("config.d"))),
            (dir.join("config.d"), None), // None: any *.toml
        ];
        wanted.extend(path_entries(&self.main).into_iter().map(|(d, n)| (d, Some(n))));
        let mut wds: HashMap<i32, Interest> = HashMap::new();
        for (dir, name) in wanted {
            // The same directory reached by two paths gets the same descriptor.
            let Ok(wd) = inotify::add_watch(&self.fd, &dir, MASK) else { continue };
            let interest = wds.entry(wd).or_default();
            match name {
                Some(n) => {
                    interest.names.insert(n);
                }
                None => interest.toml = true,
            }
        }
        for old in self.wds.keys().filter(|wd| !wds.contains_key(wd)) {
            // Fails harmlessly for a directory that is gone (its watch went with it).
            let _ = inotify::remove_watch(&self.fd, *old);
        }
        self.wds = wds;
    }

    /// Consumes pending events; true if any concerned the config (an entry
    /// on the way to the main file, `config.d` itself, or a `.toml` inside
    /// it), or if events were lost. Other files in those directories are ignored.
    pub fn drain(&mut self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut any = false;
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        while let Ok(ev) = reader.next() {
            if ev.events().contains(inotify::ReadFlags::QUEUE_OVERFLOW) {
                any = true;
                continue;
            }
            let name = ev.file_name().map(std::ffi::CStr::to_bytes).unwrap_or_default();
            any |= self
                .wds
                .get(&ev.wd())
                .is_some_and(|i| i.names.contains(OsStr::from_bytes(name)) || (i.toml && name.ends_with(b".toml")));
        }
        any
    }
}

/// The (directory, entry name) pairs the file at `path` depends on: the
/// directory of every symlink met while resolving it, component by
/// component as the kernel does, with the link's name, and the directory
/// that finally holds the file, with its name. Directories are physical
/// (symlink-free) paths. At a missing component the walk ends with that
/// name in the last directory found, so its creation is noticed.
fn path_entries(path: &Path) -> Vec<(PathBuf, OsString)> {
    let mut out = Vec::new();
    let mut cur = PathBuf::from("/");
    let mut todo = names(path, &mut cur);
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&name);
        match std::fs::read_link(&next) {
            Ok(_) if links == MAX_LINKS => break, // a loop: the kernel gives up too
            Ok(target) => {
                links += 1;
                out.push((cur.clone(), name));
                // Relative to the link's directory, which `cur` still is.
                let mut rest = names(&target, &mut cur);
                rest.append(&mut todo);
                todo = rest;
            }
            Err(_) if !todo.is_empty() && next.is_dir() => cur = next,
            Err(_) => {
                out.push((cur, name));
                break;
            }
        }
    }
    out
}

/// The names to resolve in `path` (`..` included); a leading `/` resets `cur`.
fn names(path: &Path, cur: &mut PathBuf) -> VecDeque<OsString> {
    let mut out = VecDeque::new();
    for c in path.components() {
        match c {
            Component::RootDir => *cur = PathBuf::from("/"),
            Component::Normal(n) => out.push_back(n.to_os_string()),
            Component::ParentDir => out.push_back(OsString::from("..")),
            Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The daemon's side of a [`ConfigWatch`]: its fd in the runtime, or nothing
/// when there is no config file to watch.
pub struct ConfigEvents(Option<(ConfigWatch, tokio::io::unix::AsyncFd<OwnedFd>)>);

impl ConfigEvents {
    pub fn new(main: Option<&Path>) -> ConfigEvents {
        ConfigEvents(main.and_then(|m| ConfigWatch::new(m).ok()).and_then(|w| {
            let fd: OwnedFd = w.fd.try_clone().ok()?;
            Some((w, crate::sys::async_fd(fd).ok()?))
        }))
    }

    /// Resolves when inotify has something; never without a watch.
    pub async fn ready(&self) {
        match &self.0 {
            Some((_, fd)) => {
                let _ = fd.readable().await.map(|mut g| g.clear_ready());
            }
            None => std::future::pending().await,
        }
    }

    /// Whether the config changed: editors write in several steps, so after
    /// a change this waits for them to finish.
    pub async fn changed(&mut self) -> bool {
        let Some((w, _)) = &mut self.0 else { return false };
        if !w.drain() {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        w.drain();
        true
    }

    /// Re-resolves the config path before a reload, so the watches follow a
    /// retargeted symlink; a change after this point is noticed again.
    pub fn rearm(&mut self) {
        if let Some((w, _)) = &mut self.0 {
            w.rearm();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_on_the_way_are_all_watched() {
        // Canonical, so that a symlinked temp dir adds no entries of its own.
        let base =
            std::env::temp_dir().canonicalize().unwrap().join(format!("mcp-reaper-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        // A ConfigMap: etc/config.toml -> ..data/config.toml, ..data -> ..v1
        let etc = base.join("etc");
        std::fs::create_dir_all(etc.join("..v1")).unwrap();
        std::fs::write(etc.join("..v1/config.toml"), "").unwrap();
        std::os::unix::fs::symlink("..v1", etc.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/config.toml", etc.join("config.toml")).unwrap();
        let got = path_entries(&etc.join("config.toml"));
        let want: Vec<(PathBuf, OsString)> = vec![
            (etc.clone(), "config.toml".into()),
            (etc.clone(), "..data".into()),
            (etc.join("..v1"), "config.toml".into()),
        ];
        assert_eq!(got, want);

        // An absolute link to another tree, through `..`.
        std::fs::create_dir_all(base.join("srv/cfg")).unwrap();
        std::os::unix::fs::symlink(base.join("srv/cfg/../cfg/reaper.toml"), base.join("link.toml")).unwrap();
        let got = path_entries(&base.join("link.toml"));
        assert_eq!(got, vec![(base.clone(), "link.toml".into()), (base.join("srv/cfg"), "reaper.toml".into())]);

        // A plain file that does not exist yet: its directory, by name.
        assert_eq!(path_entries(&base.join("none.toml")), vec![(base.clone(), "none.toml".into())]);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
