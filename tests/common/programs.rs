//! Program fixtures for `tests/sdk_more.rs`. No Go toolchain or SDK
//! modules are at hand offline, so a "Go binary" is a copy of the
//! `fakeproc` stand-in (a real ELF executable, so `/proc/PID/exe` is the
//! fixture) given the two sections the Go linker writes and the reaper
//! reads: `.go.buildinfo` in Go 1.18's format (the
//! 14-byte magic `\xff Go buildinf:`, pointer size, flags 2 = strings
//! inline, padding to 32 bytes, then the varint-prefixed Go version and
//! module list, the list framed by 16-byte sentinels; lines
//! `path`/`mod`/`dep\tPATH\tVERSION\tSUM`, as `go version -m` prints them),
//! and a `.gopclntab` holding the function names (the real table's header
//! and pc tables are not read, only its names). Section headers are not
//! used by the kernel's loader: the copy still runs. Jars are stored zips
//! written here (entry names are all the reaper reads). The venv is a
//! directory tree: `pyvenv.cfg`, `bin/`, `lib/python3.12/site-packages/`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

fn u16at(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes(b[at..at + 2].try_into().unwrap()))
}
fn u64at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// `elf` with `add` appended as sections after `gap` bytes of hole: the
/// patched head, where the tail goes, and the tail (the sections, a new
/// section-name table and section header table, which the head points at).
fn with_sections(mut elf: Vec<u8>, gap: u64, add: &[(&str, Vec<u8>)]) -> (Vec<u8>, u64, Vec<u8>) {
    let (shoff, shnum, shstrndx) = (u64at(&elf, 0x28), u16at(&elf, 0x3c), u16at(&elf, 0x3e));
    let old_sh = elf[usize::try_from(shoff).unwrap()..][..shnum * 64].to_vec();
    let name_sh = &old_sh[shstrndx * 64..][..64];
    let (noff, nsize) =
        (usize::try_from(u64at(name_sh, 0x18)).unwrap(), usize::try_from(u64at(name_sh, 0x20)).unwrap());
    let mut names = elf[noff..noff + nsize].to_vec();
    let mut sh = old_sh;
    let base = elf.len() as u64 + gap;
    let mut tail = Vec::new();
    for (name, data) in add {
        while !(base + tail.len() as u64).is_multiple_of(16) {
            tail.push(0);
        }
        let mut e = vec![0u8; 64];
        e[0..4].copy_from_slice(&u32::try_from(names.len()).unwrap().to_le_bytes());
        e[4] = 1; // PROGBITS
        put64(&mut e, 0x18, base + tail.len() as u64);
        put64(&mut e, 0x20, data.len() as u64);
        put64(&mut e, 0x30, 16);
        sh.extend_from_slice(&e);
        names.extend_from_slice(name.as_bytes());
        names.push(0);
        tail.extend_from_slice(data);
    }
    let names_at = base + tail.len() as u64;
    tail.extend_from_slice(&names);
    put64(&mut sh, shstrndx * 64 + 0x18, names_at);
    put64(&mut sh, shstrndx * 64 + 0x20, names.len() as u64);
    while !(base + tail.len() as u64).is_multiple_of(8) {
        tail.push(0);
    }
    let sh_at = base + tail.len() as u64;
    tail.extend_from_slice(&sh);
    put64(&mut elf, 0x28, sh_at);
    let n = u16::try_from(shnum + add.len()).unwrap();
    elf[0x3c..0x3e].copy_from_slice(&n.to_le_bytes());
    (elf, base, tail)
}

/// A `.go.buildinfo` listing `deps` (Go 1.18+ format, see the file header).
fn buildinfo(main: &str, deps: &[(&str, &str)]) -> Vec<u8> {
    let mut list = vec![0x30u8; 16];
    list.extend_from_slice(format!("path\t{main}\nmod\t{main}\t(devel)\t\n").as_bytes());
    for (path, version) in deps {
        list.extend_from_slice(format!("dep\t{path}\t{version}\th1:AAAA=\n").as_bytes());
    }
    list.extend_from_slice(&[0x31u8; 16]);
    let mut b = b"\xff Go buildinf:\x08\x02".to_vec();
    b.resize(32, 0);
    for s in [&b"go1.24.1"[..], &list] {
        let mut n = s.len();
        while n >= 0x80 {
            b.push(u8::try_from(n & 0x7f).unwrap() | 0x80);
            n >>= 7;
        }
        b.push(u8::try_from(n).unwrap());
        b.extend_from_slice(s);
    }
    b
}

/// A `.gopclntab` whose name table holds `funcs` (header bytes, then names).
fn pclntab(funcs: &[&str]) -> Vec<u8> {
    let mut b = vec![0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8];
    b.resize(64, 0);
    for f in ["runtime.main", "main.main"].iter().chain(funcs) {
        b.extend_from_slice(f.as_bytes());
        b.push(0);
    }
    b
}

/// A copy of fakeproc at `path` built with `deps`, linking `funcs`.
pub fn go_binary(path: &Path, deps: &[(&str, &str)], funcs: &[&str], gap: u64) {
    let elf = std::fs::read(crate::common::fakeproc_path()).unwrap();
    let (head, at, tail) =
        with_sections(elf, gap, &[(".go.buildinfo", buildinfo("example.com/x", deps)), (".gopclntab", pclntab(funcs))]);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, head).unwrap();
    // Past the hole, sparse.
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &tail, at).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A stored zip of `entries` (no compression; CRCs left 0: only names are read).
pub fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let (mut out, mut cd) = (Vec::new(), Vec::new());
    for (name, data) in entries {
        let (n, len) = (u16::try_from(name.len()).unwrap(), u32::try_from(data.len()).unwrap());
        let at = u32::try_from(out.len()).unwrap();
        out.extend_from_slice(b"PK\x03\x04\x14\0\0\0\0\0\0\0\0\0\0\0\0\0");
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        cd.extend_from_slice(b"PK\x01\x02\x14\0\x14\0\0\0\0\0\0\0\0\0\0\0\0\0");
        cd.extend_from_slice(&len.to_le_bytes());
        cd.extend_from_slice(&len.to_le_bytes());
        cd.extend_from_slice(&n.to_le_bytes());
        cd.extend_from_slice(&[0; 12]);
        cd.extend_from_slice(&at.to_le_bytes());
        cd.extend_from_slice(name.as_bytes());
    }
    let (cd_at, count) = (u32::try_from(out.len()).unwrap(), u16::try_from(entries.len()).unwrap());
    out.extend_from_slice(&cd);
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&u32::try_from(cd.len()).unwrap().to_le_bytes());
    out.extend_from_slice(&cd_at.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// Sets the size of the last `.gopclntab` section header of `path`.
pub fn claim_pclntab_size(path: &Path, size: u64) {
    use std::os::unix::fs::FileExt as _;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut h = [0u8; 64];
    f.read_exact_at(&mut h, 0).unwrap();
    let (shoff, shnum) = (u64at(&h, 0x28), u16at(&h, 0x3c) as u64);
    // The fixture's last section is the function table.
    f.write_all_at(&size.to_le_bytes(), shoff + (shnum - 1) * 64 + 0x20).unwrap();
}
