//! Watches the config file's directory (and `config.d/`) with inotify: editors
//! replace files by rename, so watching the file itself would miss changes.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

pub struct ConfigWatch {
    pub fd: OwnedFd,
    dirs: Vec<PathBuf>,
    main_name: std::ffi::OsString,
    wds: Vec<i32>,
}

const MASK: WatchFlags = WatchFlags::CLOSE_WRITE
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::ATTRIB);

impl ConfigWatch {
    /// Watches the directory of `main` and its `config.d/` (when they exist).
    pub fn new(main: &Path) -> io::Result<ConfigWatch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let dir = main.parent().unwrap_or(Path::new("/")).to_path_buf();
        let main_name = main.file_name().unwrap_or_default().to_os_string();
        let mut w = ConfigWatch { fd, dirs: vec![dir.clone(), dir.join("config.d")], main_name, wds: vec![-1, -1] };
        w.rearm();
        Ok(w)
    }

    /// (Re-)adds watches; `config.d/` may have been created since.
    pub fn rearm(&mut self) {
        for (i, d) in self.dirs.iter().enumerate() {
            self.wds[i] = inotify::add_watch(&self.fd, d, MASK).unwrap_or(-1);
        }
    }

    /// Consumes pending events; true if any concerned the config (the main
    /// file, `config.d` itself, or a `.toml` inside it). Other files in the
    /// directory are ignored.
    pub fn drain(&mut self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut any = false;
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        while let Ok(ev) = reader.next() {
            let name = ev.file_name().map(|n| n.to_bytes()).unwrap_or_default();
            let relevant = if ev.wd() == self.wds[0] {
                name == self.main_name.as_bytes() || name == b"config.d"
            } else {
                ev.wd() == self.wds[1] && name.ends_with(b".toml")
            };
            any |= relevant;
        }
        if any {
            self.rearm();
        }
        any
    }
}
