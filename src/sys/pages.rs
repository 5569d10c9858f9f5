//! Dropping this process's own read-only file pages (code and constants of
//! the executable and its libraries) from its page tables: which objects are
//! loaded (`dl_iterate_phdr`), which of their pages are safe to drop, and the
//! `madvise` that drops them. Kept apart from the rest of `sys` as one concern;
//! `unsafe` is allowed here because `sys` allows it for its submodules.

use std::os::unix::ffi::OsStrExt;

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

#[cfg(test)]
mod tests {
    use super::*;

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
