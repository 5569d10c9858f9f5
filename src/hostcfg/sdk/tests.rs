//! Hostile programs: what a check reads of a binary or a jar stays within
//! its budget whatever the file claims, and a file its user may not read is
//! not read. Bytes read and time per check are printed (`cargo test --lib
//! hostcfg::sdk::tests -- --nocapture`); they are figures, not assertions
//! on time.

use std::os::unix::fs::{FileExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::Instant;

use super::binary::Binary;
use super::go::{self, GoSays};
use super::java;
use super::{Lang, Says, SdkCache};
use crate::access::{Cred, Denied};

fn me() -> Cred {
    Cred::of_user(rustix::process::geteuid().as_raw())
}

/// A minimal ELF64 file at `path`: sections `.go.buildinfo` (`info`) and
/// `.gopclntab` (`pcln`, written at `pcln_at`, its size claimed as
/// `pcln_claim`).
fn elf(path: &Path, info: &[u8], pcln: &[u8], pcln_at: u64, pcln_claim: u64) {
    let names = b"\0.shstrtab\0.go.buildinfo\0.gopclntab\0";
    let mut b = vec![0u8; 64];
    b[..6].copy_from_slice(b"\x7fELF\x02\x01");
    let info_at = 64 + 4 * 64;
    let names_at = info_at + info.len();
    b[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
    b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    b[0x3c..0x3e].copy_from_slice(&4u16.to_le_bytes());
    b[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
    let sh = |name: u32, off: u64, size: u64| {
        let mut e = vec![0u8; 64];
        e[..4].copy_from_slice(&name.to_le_bytes());
        e[0x18..0x20].copy_from_slice(&off.to_le_bytes());
        e[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        e
    };
    b.extend(vec![0u8; 64]);
    b.extend(sh(1, names_at as u64, names.len() as u64));
    b.extend(sh(11, info_at as u64, info.len() as u64));
    b.extend(sh(25, pcln_at, pcln_claim));
    b.extend_from_slice(info);
    b.extend_from_slice(names);
    std::fs::write(path, &b).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(pcln, pcln_at).unwrap();
}

fn info() -> Vec<u8> {
    let list = b"0123456789abcdefpath\tx\nmod\tx\t(devel)\t\ndep\tgithub.com/mark3labs/mcp-go\tv0.43.0\th1:x=\n0123456789abcdef";
    let mut b = b"\xff Go buildinf:\x08\x02".to_vec();
    b.resize(32, 0);
    b.push(8);
    b.extend_from_slice(b"go1.24.1");
    b.push(u8::try_from(list.len()).unwrap());
    b.extend_from_slice(list);
    b
}

#[test]
fn a_go_binary_is_read_within_its_budget_whatever_it_claims() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("server");
    // A 20 MiB function table at 4 GiB (sparse) of names like a real one's
    // (near misses: the SDK's `mcp` package), the server's name at its end.
    let near = b"github.com/mark3labs/mcp-go/mcp.(*CallToolRequest).GetArguments\0runtime.gcBgMarkWorker\0";
    let mut pcln: Vec<u8> = near.iter().copied().cycle().take(20 << 20).collect();
    let name = b"github.com/mark3labs/mcp-go/server.(*MCPServer).Listen";
    let n = pcln.len();
    pcln[n - 100..n - 100 + name.len()].copy_from_slice(name);
    elf(&p, &info(), &pcln, 4 << 30, pcln.len() as u64);
    let started = Instant::now();
    let mut bin = Binary::open(&p, &me(), go::BUDGET).unwrap();
    let says = go::read(&mut bin).unwrap();
    println!("go: 20 MiB function table scanned: {} bytes read in {:?}", bin.read, started.elapsed());
    assert!(
        matches!(says, GoSays::Server { ref found, .. } if found == "github.com/mark3labs/mcp-go/server"),
        "{says:?}"
    );
    assert!(bin.read <= go::BUDGET);
    // A table claimed beyond the cap: only the headers are read.
    elf(&p, &info(), b"x", 4 << 30, 3 << 30);
    let started = Instant::now();
    let mut bin = Binary::open(&p, &me(), go::BUDGET).unwrap();
    assert_eq!(go::read(&mut bin), Some(GoSays::Not("function table beyond the cap")));
    println!("go: a 3 GiB table refused: {} bytes read in {:?}", bin.read, started.elapsed());
    assert!(bin.read < 4096, "{}", bin.read);
    // Section headers claimed past the end, or too many: nothing more read.
    let mut h = std::fs::read(&p).unwrap()[..64].to_vec();
    h[0x28..0x30].copy_from_slice(&(1u64 << 62).to_le_bytes());
    std::fs::write(&p, &h).unwrap();
    let mut bin = Binary::open(&p, &me(), go::BUDGET).unwrap();
    assert_eq!(go::read(&mut bin), None);
    h[0x3c..0x3e].copy_from_slice(&0xffffu16.to_le_bytes());
    std::fs::write(&p, &h).unwrap();
    let mut bin = Binary::open(&p, &me(), go::BUDGET).unwrap();
    assert_eq!((go::read(&mut bin), bin.read), (None, 64));
}

#[test]
fn a_zip_is_read_from_its_end_and_a_bogus_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.jar");
    let name = b"io/modelcontextprotocol/server/McpServer.class";
    let mut cd = b"PK\x01\x02".to_vec();
    cd.resize(46, 0);
    cd[28..30].copy_from_slice(&u16::try_from(name.len()).unwrap().to_le_bytes());
    cd.extend_from_slice(name);
    let end = |size: u32, off: u32| {
        let mut e = b"PK\x05\x06".to_vec();
        e.resize(22, 0);
        e[12..16].copy_from_slice(&size.to_le_bytes());
        e[16..20].copy_from_slice(&off.to_le_bytes());
        e
    };
    // 6 GiB of hole, then the directory and the end record.
    let at = 6u64 << 30;
    let f = std::fs::File::create(&p).unwrap();
    f.write_all_at(&cd, at).unwrap();
    f.write_all_at(&end(u32::try_from(cd.len()).unwrap(), 0), at + cd.len() as u64).unwrap();
    let started = Instant::now();
    let mut bin = Binary::open(&p, &me(), java::BUDGET).unwrap();
    let names = java::entries(&mut bin).unwrap();
    println!("jar: 6 GiB file's directory: {} bytes read in {:?}", bin.read, started.elapsed());
    assert_eq!(names, [String::from_utf8_lossy(name)]);
    assert!(bin.read <= java::BUDGET);
    for (e, why) in [
        (end(u32::try_from(cd.len()).unwrap(), 0x7fff_0000), "central directory offset beyond the file"),
        (end(0xffff_ffff, 0), "ZIP64 is not read"),
        (end(64 << 20, 0), "central directory beyond the cap"),
    ] {
        let f = std::fs::File::create(&p).unwrap();
        f.write_all_at(&cd, 0).unwrap();
        f.write_all_at(&e, cd.len() as u64).unwrap();
        let mut bin = Binary::open(&p, &me(), java::BUDGET).unwrap();
        assert_eq!(java::entries(&mut bin), Err(why));
    }
    std::fs::write(&p, b"PK\x05\x06 not a zip").unwrap();
    assert!(java::entries(&mut Binary::open(&p, &me(), java::BUDGET).unwrap()).is_err());
}

#[test]
fn a_program_its_user_may_not_read_is_not_opened() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, b"\x7fELF").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("server");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    // Not its owner: refused through the symlink, whoever the reaper is.
    let nobody = Cred::of_user(65534);
    assert!(matches!(Binary::open(&link, &nobody, 64), Err(Denied::Refused(w)) if w.contains("may not read")));
    // Its owner may; a FIFO or a directory is never opened.
    assert!(Binary::open(&link, &me(), 64).is_ok());
    assert!(Binary::open(dir.path(), &me(), 64).is_err());
    assert!(Binary::open(Path::new("/dev/zero"), &Cred::of_user(0), 64).is_err());
}

#[test]
fn one_users_read_never_decides_for_another() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.path().join("weather.py");
    std::fs::write(&script, "from mcp.server.fastmcp import FastMCP\n").unwrap();
    let manifest = dir.path().join("package.json");
    std::fs::write(&manifest, r#"{"dependencies": {"@modelcontextprotocol/sdk": "1"}}"#).unwrap();
    for f in [&script, &manifest] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let owner = me();
    // Another user, who may read the files but owns neither.
    let other = Cred { uid: owner.uid + 4242, gid: owner.uid + 4242, groups: vec![] };
    let server = Says::Server("mcp.server.fastmcp".into());
    for first_owner in [true, false] {
        let mut cache = SdkCache::default();
        let mut ask = |c: &Cred| (cache.says(&script, Lang::Python, c), cache.manifest_from(dir.path(), Lang::Js, c));
        let (o, x) = if first_owner {
            let o = ask(&owner);
            (o, ask(&other))
        } else {
            let x = ask(&other);
            (ask(&owner), x)
        };
        assert_eq!((&o.0, o.1.is_some()), (&server, true), "the owner's word, first_owner {first_owner}");
        assert_eq!((&x.0, x.1.is_some()), (&Says::Nothing, false), "not the other's, first_owner {first_owner}");
    }
    // Given to the other user (a `chown` changes only the change time): the
    // owner's cached word goes with it.
    if owner.uid == 0 {
        let mut cache = SdkCache::default();
        assert_eq!(cache.says(&script, Lang::Python, &owner), server);
        std::os::unix::fs::chown(&script, Some(other.uid), None).unwrap();
        assert_eq!(cache.says(&script, Lang::Python, &owner), Says::Nothing);
        assert_eq!(cache.says(&script, Lang::Python, &other), server);
    }
}
