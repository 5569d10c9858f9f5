//! Compiled and packaged programs: a native binary's build info ([`go`])
//! and a `java` process's jar ([`java`]). Read through [`Binary`] as the
//! process's user, cached per (their uid, the version of the file opened).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::binary::Binary;
use super::go::{self, GoSays};
use super::java::{self, JarSays};
use super::{Evidence, SdkCache};
use crate::access::Cred;
use crate::hostcfg::matching::normalize;

/// Classpath entries looked at for the jar holding the main class.
const CLASSPATH: usize = 16;

impl SdkCache {
    /// A native program's evidence: the binary the process runs
    /// (`/proc/PID/exe`, which names the file it was started from; the
    /// file read must still be that inode).
    pub(super) fn of_binary(&mut self, dir: &Path, cred: &Cred) -> Option<Evidence> {
        let exe = std::fs::read_link(dir.join("exe")).ok().filter(|e| e.is_absolute())?;
        // The magic link's own target (a /proc read, no path walked).
        let running = std::fs::metadata(dir.join("exe")).ok()?;
        let mut bin = Binary::open(&exe, cred, go::BUDGET).ok()?;
        if bin.id.inode() != (running.dev(), running.ino()) {
            return None;
        }
        let key = ((cred.uid, bin.id), String::new());
        if let Some(e) = self.programs.get(&key) {
            return e.clone();
        }
        let e = match go::read(&mut bin) {
            Some(GoSays::Server { module, found }) => {
                Some(Evidence { kind: "built", found, file: exe.display().to_string(), via: Some(module) })
            }
            _ => None,
        };
        self.programs.insert(key, e.clone());
        e
    }

    /// A `java` process's evidence: its `-jar` file, or the classpath jar
    /// holding its main class (`word`).
    pub(super) fn of_java(&mut self, words: &[&str], word: &str, cwd: &Path, cred: &Cred) -> Option<Evidence> {
        if words.contains(&"-jar") {
            return self.jar(&normalize(&cwd.join(word)), cred, "");
        }
        let at = words.iter().position(|w| matches!(*w, "-cp" | "-classpath" | "--class-path"))?;
        let class = java::class_file(word);
        let jars = words.get(at + 1)?.split(':').filter(|e| java::has_ext(e, "jar")).take(CLASSPATH);
        let jars: Vec<_> = jars.map(|j| normalize(&cwd.join(j))).collect();
        jars.iter().find_map(|j| self.jar(j, cred, &class))
    }

    /// What the jar at `path` says, if it holds `main` (any, when empty).
    fn jar(&mut self, path: &Path, cred: &Cred, main: &str) -> Option<Evidence> {
        let mut bin = Binary::open(path, cred, java::BUDGET).ok()?;
        let key = ((cred.uid, bin.id), main.to_string());
        if let Some(e) = self.programs.get(&key) {
            return e.clone();
        }
        let names = java::entries(&mut bin).ok();
        let e = names.filter(|n| main.is_empty() || n.iter().any(|e| e == main)).and_then(|n| match java::judge(&n) {
            JarSays::Server(found) => {
                Some(Evidence { kind: "holds", found, file: path.display().to_string(), via: None })
            }
            JarSays::Client | JarSays::Nothing => None,
        });
        self.programs.insert(key, e.clone());
        e
    }
}
