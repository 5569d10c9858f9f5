//! A Go binary's own word: the module list the Go toolchain writes into
//! every binary it links (its build info, `go version -m`), and the
//! function names its `.gopclntab` keeps even when stripped (`-s -w`).
//!
//! The module alone is no proof: `github.com/modelcontextprotocol/go-sdk`
//! holds client and server in one package, `mcp-go` both in one module, and
//! `gopls` links the go-sdk's server for its `gopls mcp` mode while it
//! serves LSP on stdio. So a binary is a server when its build info lists an
//! SDK module *and* it links that SDK's server (`mcp-go/server.`,
//! `go-sdk/mcp.NewServer`) *and* neither its client (`mcp-go/client.`,
//! `go-sdk/mcp.NewClient`: a host or a proxy) nor a language server's
//! protocol (gopls, `go.lsp.dev`). The module without the names (the
//! function table beyond the cap, section headers stripped) is kept.
//!
//! Read: ELF64 little-endian only (every Linux Go target but big-endian
//! s390x/ppc64): the 64-byte header, at most 256 section headers (16 KiB)
//! and the section names (≤ 64 KiB) to find `.go.buildinfo` (≤ 64 KiB read)
//! and `.gopclntab` (scanned in 1 MiB pieces, at most [`MAX_PCLNTAB`]).
//! Hand-written rather than the `object` or `goblin` crates: they would
//! parse the same three tables, add a dependency the daemon links for this
//! one check, and still leave the byte budget to us (their readers map or
//! read whole sections); a scan of the whole file for the build-info magic
//! would read tens of MiB per binary.

use std::sync::LazyLock;

use super::binary::{Binary, u16le, u32le, u64le};

/// Bytes of section headers, names and build info a check may read.
const HEADERS: u64 = (256 * 64) + (64 << 10) + (64 << 10) + 64;
/// The function-name table scanned for the SDK's packages: a 40 MiB Go
/// server's is about 12 MiB.
pub const MAX_PCLNTAB: u64 = 24 << 20;
/// The most a check reads from one binary.
pub const BUDGET: u64 = HEADERS + MAX_PCLNTAB;
const PIECE: u64 = 1 << 20;

/// The SDK modules, and the names of their server and client halves.
const SDKS: &[(&str, &str, &str)] = &[
    ("github.com/mark3labs/mcp-go", "github.com/mark3labs/mcp-go/server.", "github.com/mark3labs/mcp-go/client."),
    (
        "github.com/modelcontextprotocol/go-sdk",
        "github.com/modelcontextprotocol/go-sdk/mcp.NewServer",
        "github.com/modelcontextprotocol/go-sdk/mcp.NewClient",
    ),
];
/// A language server that also has an MCP mode.
const LSP: &[&str] = &["golang.org/x/tools/gopls/", "go.lsp.dev/protocol."];

/// What a Go binary says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GoSays {
    /// Built with `module` (`path version`) and links its server (`found`).
    Server { module: String, found: String },
    /// A client, a language server, or the module without its names.
    Not(&'static str),
}

/// What the binary `bin` says; `None` when it is no Go binary at all.
pub fn read(bin: &mut Binary) -> Option<GoSays> {
    let (info, pcln) = sections(bin)?;
    let modinfo = modules(&bin.read_at(info.0, info.1.min(64 << 10))?)?;
    let Some((sdk, module)) = SDKS.iter().find_map(|s| Some((s, listed(&modinfo, s.0)?))) else {
        return Some(GoSays::Not("no MCP SDK module"));
    };
    let Some(pcln) = pcln else { return Some(GoSays::Not("no function table")) };
    if pcln.1 > MAX_PCLNTAB {
        return Some(GoSays::Not("function table beyond the cap"));
    }
    let (mut server, mut client, mut lsp) = (false, false, false);
    let mut off = 0;
    while off < pcln.1 {
        // Pieces overlap by a name's length, so none is cut in two.
        let Some(piece) = bin.read_at(pcln.0 + off, PIECE.min(pcln.1 - off) + 128) else {
            return Some(GoSays::Not("function table unreadable"));
        };
        for m in NAMES.find_iter(&piece) {
            let m = m.as_bytes();
            server |= m == sdk.1.as_bytes();
            client |= m == sdk.2.as_bytes();
            lsp |= LSP.iter().any(|l| m == l.as_bytes());
        }
        off += PIECE;
    }
    Some(match (server, client, lsp) {
        (_, true, _) => GoSays::Not("it links the SDK's client"),
        (_, _, true) => GoSays::Not("a language server"),
        (false, ..) => GoSays::Not("it does not link the SDK's server"),
        (true, ..) => GoSays::Server { module, found: sdk.1.trim_end_matches('.').to_string() },
    })
}

static NAMES: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    let all = SDKS.iter().flat_map(|s| [s.1, s.2]).chain(LSP.iter().copied());
    let alt: Vec<String> = all.map(regex::escape).collect();
    regex::bytes::Regex::new(&alt.join("|")).expect("literal alternation")
});

type Section = (u64, u64);

/// `.go.buildinfo` and `.gopclntab` (offset, size), from the section headers.
fn sections(bin: &mut Binary) -> Option<(Section, Option<Section>)> {
    let h = bin.read_at(0, 64)?;
    // ELF, 64-bit, little-endian.
    if h.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (shoff, shentsize, shnum, shstrndx) = (u64le(&h, 0x28)?, u16le(&h, 0x3a)?, u16le(&h, 0x3c)?, u16le(&h, 0x3e)?);
    if shentsize != 64 || shnum == 0 || shnum > 256 || shstrndx >= shnum {
        return None;
    }
    let sh = bin.read_at(shoff, shnum * 64)?;
    let field = |i: u64, at: usize| u64le(&sh, usize::try_from(i * 64).ok()? + at);
    let names = bin.read_at(field(shstrndx, 0x18)?, field(shstrndx, 0x20)?.min(64 << 10))?;
    let (mut info, mut pcln) = (None, None);
    for i in 0..shnum {
        let at = usize::try_from(u32le(&sh, usize::try_from(i * 64).ok()?)?).ok()?;
        let name = names.get(at..)?.split(|&b| b == 0).next()?;
        let span = (field(i, 0x18)?, field(i, 0x20)?);
        match name {
            b".go.buildinfo" => info = Some(span),
            b".gopclntab" | b".data.rel.ro.gopclntab" => pcln = Some(span),
            _ => {}
        }
    }
    Some((info?, pcln))
}

/// The module lines of a build info blob (Go ≥ 1.18: strings inline).
pub fn modules(blob: &[u8]) -> Option<String> {
    const MAGIC: &[u8] = b"\xff Go buildinf:";
    let at = (0..blob.len()).step_by(16).find(|&i| blob[i..].starts_with(MAGIC))?;
    let b = &blob[at..];
    if b.len() < 32 || b[15] & 2 == 0 {
        return None; // before Go 1.18: pointers into the data segment
    }
    let (_version, rest) = varint_str(&b[32..])?;
    let (m, _) = varint_str(rest)?;
    // Framed by 16-byte sentinels.
    let m = if m.len() >= 33 && m[m.len() - 17] == b'\n' { &m[16..m.len() - 16] } else { m };
    Some(String::from_utf8_lossy(m).into_owned())
}

fn varint_str(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (mut n, mut shift, mut i) = (0u64, 0, 0);
    loop {
        let byte = *b.get(i)?;
        n |= u64::from(byte & 0x7f) << shift;
        i += 1;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    let end = i.checked_add(usize::try_from(n).ok()?)?;
    Some((b.get(i..end)?, &b[end..]))
}

/// `path version` of `module` when the build info lists it (a dependency,
/// or the main module itself: the SDK's own examples).
fn listed(modinfo: &str, module: &str) -> Option<String> {
    modinfo.lines().find_map(|l| {
        let mut f = l.split('\t');
        let (kind, path) = (f.next()?, f.next()?);
        (matches!(kind, "dep" | "mod") && path == module).then(|| format!("{path} {}", f.next().unwrap_or("")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_lists_the_modules() {
        let sentinel = [0u8; 16];
        let mut m = sentinel.to_vec();
        m.extend_from_slice(b"path\texample.com/weather\nmod\texample.com/weather\t(devel)\t\ndep\tgithub.com/mark3labs/mcp-go\tv0.43.0\th1:x=\n");
        m.extend_from_slice(&sentinel);
        let mut blob = b"\xff Go buildinf:\x08\x02".to_vec();
        blob.resize(32, 0);
        blob.push(8);
        blob.extend_from_slice(b"go1.24.1");
        // A two-byte varint: the list is longer than 127 bytes.
        blob.extend_from_slice(&[u8::try_from(m.len() & 0x7f).unwrap() | 0x80, u8::try_from(m.len() >> 7).unwrap()]);
        blob.extend_from_slice(&m);
        let mods = modules(&blob).unwrap();
        assert_eq!(listed(&mods, SDKS[0].0).as_deref(), Some("github.com/mark3labs/mcp-go v0.43.0"));
        assert_eq!(listed(&mods, SDKS[1].0), None);
        assert_eq!(modules(b"\xff Go buildinf:\x08\x00"), None, "short");
        assert_eq!(modules(&blob[..40]), None, "cut inside a string");
        assert_eq!(varint_str(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
    }
}
