//! A jar's own word: the class names in its zip central directory.
//!
//! A jar is a server's when it holds classes of the Java SDK's server
//! package (`io/modelcontextprotocol/server/…class`, flattened into a
//! shaded jar) or nests Spring AI's MCP server starter
//! (`BOOT-INF/lib/spring-ai-…mcp-server…jar`, a Spring Boot jar), and
//! nothing in it is Spring AI's MCP client (`org/springframework/ai/mcp/
//! client/`, a nested `…mcp-client…jar`): a host. Names only: a resource
//! that merely mentions the package, or a jar that only depends on the SDK
//! (a nested `mcp-0.x.jar`), says nothing. How conclusive: the SDK's core
//! artifact ships both halves, so a shaded *client* without Spring's starter
//! would look like a server; its entry (`-jar`, or the classpath jar holding
//! the main class) is the program's own archive, the same footing as a
//! project that declares the SDK and is run by its declared entry.
//!
//! Read: the last 64 KiB + 22 bytes (end record and comment) and the central
//! directory it points to, at most [`MAX_CD`] (a 20,000-class jar's is about
//! 1.5 MiB); ZIP64 and a directory that does not end where the end record
//! starts are refused. The `zip` crate would read the same records; it is
//! not a dependency, and this needs neither its decompressors nor its
//! writer.

use super::binary::{Binary, u16le, u32le};

pub const MAX_CD: u64 = 4 << 20;
const TAIL: u64 = 22 + 0xffff;
pub const BUDGET: u64 = MAX_CD + TAIL;

/// What a jar says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JarSays {
    Server(String),
    Client,
    Nothing,
}

/// The entry names of the zip `bin`, or why not.
pub fn entries(bin: &mut Binary) -> Result<Vec<String>, &'static str> {
    let tail_len = bin.size.min(TAIL);
    let tail = bin.read_at(bin.size - tail_len, tail_len).ok_or("unreadable")?;
    let at = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..].starts_with(b"PK\x05\x06"))
        .ok_or("no zip end record")?;
    let eocd = bin.size - tail_len + at as u64;
    let (size, offset) = (u32le(&tail, at + 12).ok_or("cut")?, u32le(&tail, at + 16).ok_or("cut")?);
    if size == 0xffff_ffff || offset == 0xffff_ffff {
        return Err("ZIP64 is not read");
    }
    if size > MAX_CD {
        return Err("central directory beyond the cap");
    }
    // A launch script may precede the zip (Spring Boot's executable jars):
    // the directory ends where the end record starts, its offset is
    // relative to the zip's start, never beyond where it is.
    let start = eocd.checked_sub(size).ok_or("central directory before the file")?;
    if offset > start {
        return Err("central directory offset beyond the file");
    }
    let cd = bin.read_at(start, size).ok_or("unreadable")?;
    let mut names = Vec::new();
    let mut i = 0;
    while i + 46 <= cd.len() {
        if !cd[i..].starts_with(b"PK\x01\x02") {
            return Err("a bad central directory record");
        }
        let field = |at| u16le(&cd, i + at).and_then(|n| usize::try_from(n).ok()).ok_or("cut");
        let (n, extra, comment) = (field(28)?, field(30)?, field(32)?);
        let name = cd.get(i + 46..i + 46 + n).ok_or("cut")?;
        names.push(String::from_utf8_lossy(name).into_owned());
        i += 46 + n + extra + comment;
    }
    Ok(names)
}

/// What a jar's entry names say.
pub fn judge(names: &[String]) -> JarSays {
    let nested = |n: &str, what: &str| {
        n.strip_prefix("BOOT-INF/lib/")
            .or_else(|| n.strip_prefix("WEB-INF/lib/"))
            .is_some_and(|j| has_ext(j, "jar") && j.starts_with("spring-ai-") && j.contains(what))
    };
    if names.iter().any(|n| n.starts_with("org/springframework/ai/mcp/client/") || nested(n, "mcp-client")) {
        return JarSays::Client;
    }
    if names.iter().any(|n| n.starts_with("io/modelcontextprotocol/server/") && has_ext(n, "class")) {
        return JarSays::Server("io.modelcontextprotocol.server".into());
    }
    match names.iter().find(|n| nested(n, "mcp-server")) {
        Some(n) => JarSays::Server(n.rsplit('/').next().unwrap_or(n).trim_end_matches(".jar").to_string()),
        None => JarSays::Nothing,
    }
}

/// Whether the file name `n` ends in `.ext` (any case).
pub fn has_ext(n: &str, ext: &str) -> bool {
    std::path::Path::new(n).extension().is_some_and(|x| x.eq_ignore_ascii_case(ext))
}

/// `com.x.Main` → `com/x/Main.class`.
pub fn class_file(main: &str) -> String {
    format!("{}.class", main.replace('.', "/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_decide_not_resources() {
        let v = |n: &[&str]| judge(&n.iter().map(ToString::to_string).collect::<Vec<_>>());
        assert_eq!(
            v(&["META-INF/MANIFEST.MF", "io/modelcontextprotocol/server/McpServer.class"]),
            JarSays::Server("io.modelcontextprotocol.server".into())
        );
        assert_eq!(
            v(&["BOOT-INF/lib/mcp-0.10.0.jar", "BOOT-INF/lib/spring-ai-starter-mcp-server-1.0.0.jar"]),
            JarSays::Server("spring-ai-starter-mcp-server-1.0.0".into())
        );
        assert_eq!(
            v(&[
                "io/modelcontextprotocol/server/McpServer.class",
                "BOOT-INF/lib/spring-ai-starter-mcp-client-1.0.0.jar"
            ]),
            JarSays::Client
        );
        assert_eq!(v(&["BOOT-INF/lib/mcp-0.10.0.jar", "app/Main.class"]), JarSays::Nothing, "a dependency only");
        assert_eq!(v(&["io/modelcontextprotocol/server/README.txt"]), JarSays::Nothing, "a resource");
        assert_eq!(class_file("com.x.Main"), "com/x/Main.class");
    }
}
