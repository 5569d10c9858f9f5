//! Servers known by their compiled or packaged program (issue 23): a Go
//! binary's build info and function names, a jar's class names, a venv's
//! console script and the modules its entry imports. Real process trees,
//! the real `reaperctl scan` and an enforcing `mcp-reaperd --once`, scoped
//! to the test's sandbox, as in tests/sdk.rs.
//!
//! Fixtures: no Go toolchain or SDK modules are at hand offline, so a "Go
//! binary" is a copy of the `fakeproc` stand-in (a real ELF executable, so
//! `/proc/PID/exe` is the fixture) given the two sections the Go linker
//! writes and the reaper reads: `.go.buildinfo` in Go 1.18's format (the
//! 14-byte magic `\xff Go buildinf:`, pointer size, flags 2 = strings
//! inline, padding to 32 bytes, then the varint-prefixed Go version and
//! module list, the list framed by 16-byte sentinels; lines
//! `path`/`mod`/`dep\tPATH\tVERSION\tSUM`, as `go version -m` prints them),
//! and a `.gopclntab` holding the function names (the real table's header
//! and pc tables are not read, only its names). Section headers are not
//! used by the kernel's loader: the copy still runs. Jars are stored zips
//! written here (entry names are all the reaper reads). The venv is a
//! directory tree: `pyvenv.cfg`, `bin/`, `lib/python3.12/site-packages/`.
//! No fixture program is executed as what it claims to be.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Sandbox, Spec, TempDir, alive, s, wait_until};
use serde_json::Value;

// ------------------------------------------------------------ fixtures

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
fn go_binary(path: &Path, deps: &[(&str, &str)], funcs: &[&str], gap: u64) {
    let elf = std::fs::read(common::fakeproc_path()).unwrap();
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
fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
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

const MCP_GO: &str = "github.com/mark3labs/mcp-go";
const GO_SDK: &str = "github.com/modelcontextprotocol/go-sdk";
const SERVER_CLASS: &str = "io/modelcontextprotocol/server/McpSyncServer.class";

fn write(root: &Path, rel: &str, data: impl AsRef<[u8]>) -> PathBuf {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, data).unwrap();
    p
}

// ------------------------------------------------------------ running

fn json(dir: &TempDir, bin: &str, sb: &Sandbox, extra: &[&str]) -> Value {
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let scope = s(sb.scope_pid());
    let mut args = extra.to_vec();
    args.extend(["--json", "--scope", &scope]);
    common::json_with_home(bin, &args, &dir.config(0, ""), &home)
}

fn scan(dir: &TempDir, sb: &Sandbox) -> Value {
    json(dir, env!("CARGO_BIN_EXE_reaperctl"), sb, &["scan"])
}

fn once(dir: &TempDir, sb: &Sandbox) -> Value {
    json(dir, env!("CARGO_BIN_EXE_mcp-reaperd"), sb, &["--once", "--log-target", "stderr"])
}

fn member(v: &Value, pid: i32) -> Option<&Value> {
    v["trees"].as_array()?.iter().flat_map(|t| t["members"].as_array().into_iter().flatten()).find(|m| m["pid"] == pid)
}

fn roots(v: &Value) -> Vec<i64> {
    let mut r: Vec<i64> =
        v["outcomes"].as_array().into_iter().flatten().filter_map(|o| o["root"]["pid"].as_i64()).collect();
    r.sort_unstable();
    r
}

/// Kills the host, checks each server's evidence in `reaperctl scan`
/// (`kind`, the reason's words), reaps, and checks who lives.
fn reap_and_check(dir: &TempDir, sb: &Sandbox, host: i32, servers: &[(i32, &str, &str)], kept: &[i32]) {
    sb.kill_host(host);
    let v = scan(dir, sb);
    for &(pid, kind, words) in servers {
        let m = member(&v, pid).unwrap_or_else(|| panic!("{pid} ({words}) is in no tree: {v:#}"));
        assert_eq!((m["role"].as_str(), m["sdk"]["kind"].as_str()), (Some("server"), Some(kind)), "{m:#}");
        let rule = m["role_rule"].as_str().unwrap_or_default();
        assert!(rule.contains(words), "{rule:?} lacks {words:?}");
        let t = v["trees"].as_array().unwrap().iter().find(|t| t["root"] == pid).unwrap_or_else(|| panic!("{v:#}"));
        assert!(t["reason"].as_str().unwrap().contains(words), "{t:#}");
    }
    for &p in kept {
        assert!(member(&v, p).is_none(), "{p} is no server: {:#}", v["trees"]);
    }
    let v = once(dir, sb);
    let mut want: Vec<i64> = servers.iter().map(|s| i64::from(s.0)).collect();
    want.sort_unstable();
    assert_eq!(roots(&v), want, "{v:#}");
    assert!(wait_until(Duration::from_secs(10), || servers.iter().all(|s| !alive(s.0))), "a server survived");
    sb.assert_alive(kept);
}

// ------------------------------------------------------------ tests

#[test]
fn go_binaries_built_with_an_mcp_sdk_server_are_reaped_and_clients_and_gopls_stay() {
    let dir = TempDir::new("sdk-go");
    let bin = |n: &str| dir.path().join("bin").join(n);
    go_binary(
        &bin("weather-go"),
        &[(MCP_GO, "v0.43.0")],
        &["github.com/mark3labs/mcp-go/server.(*MCPServer).HandleMessage"],
        0,
    );
    go_binary(&bin("tides"), &[(GO_SDK, "v1.0.0")], &["github.com/modelcontextprotocol/go-sdk/mcp.NewServer"], 0);
    // Only the client half: an agent, a host.
    go_binary(&bin("agent-go"), &[(MCP_GO, "v0.43.0")], &["github.com/mark3labs/mcp-go/client.NewStdioMCPClient"], 0);
    // Both halves: a proxy, a host.
    go_binary(
        &bin("proxy-go"),
        &[(MCP_GO, "v0.43.0")],
        &["github.com/mark3labs/mcp-go/server.NewMCPServer", "github.com/mark3labs/mcp-go/client.NewClient"],
        0,
    );
    // The module without its server's names (no proof).
    go_binary(&bin("dep-only"), &[(MCP_GO, "v0.43.0")], &["main.run"], 0);
    // gopls links the go-sdk's server for `gopls mcp`; serving LSP it is no MCP server.
    go_binary(
        &bin("gopls"),
        &[(GO_SDK, "v0.5.0"), ("golang.org/x/tools", "v0.35.0")],
        &["github.com/modelcontextprotocol/go-sdk/mcp.NewServer", "golang.org/x/tools/gopls/internal/protocol.Serve"],
        0,
    );
    let go = |n: &str, args: &[&str]| {
        let p = bin(n);
        let mut argv = vec![p.to_str().unwrap()];
        argv.extend(args);
        Spec::new(&argv).exe(&p).cwd(dir.path())
    };
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .child(go("weather-go", &["stdio"]))
            .child(go("tides", &[]))
            .child(go("agent-go", &[]))
            .child(go("proxy-go", &["--config", "x.json"]))
            .child(go("dep-only", &[]))
            .child(go("gopls", &["serve"])),
    ]);
    let pid = |n: &str| sb.pid_of(&bin(n).display().to_string());
    let (weather, tides) = (pid("weather-go"), pid("tides"));
    let kept = [pid("agent-go"), pid("proxy-go"), pid("dep-only"), pid("gopls")];
    let host = sb.pid_of("python3 agent.py");
    let w = format!(
        "its binary is built with {MCP_GO} v0.43.0 and links {MCP_GO}/server ({})",
        bin("weather-go").display()
    );
    let t = format!("its binary is built with {GO_SDK} v1.0.0 and links {GO_SDK}/mcp.NewServer");
    reap_and_check(&dir, &sb, host, &[(weather, "built", &w), (tides, "built", &t)], &kept);
}

#[test]
fn jars_holding_the_java_sdks_server_are_reaped_and_other_jars_stay() {
    let dir = TempDir::new("sdk-java");
    let d = dir.path();
    let manifest: (&str, &[u8]) = ("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\nMain-Class: com.x.Main\n");
    write(d, "server.jar", zip(&[manifest, (SERVER_CLASS, b"\xca\xfe\xba\xbe"), ("com/x/Main.class", b"")]));
    // A Spring Boot jar nesting Spring AI's server starter.
    write(d, "boot.jar", zip(&[manifest, ("BOOT-INF/lib/spring-ai-starter-mcp-server-1.0.0.jar", b"PK")]));
    // Run by `-cp`: the jar holding the main class is the program's.
    write(d, "lib/app.jar", zip(&[("com/w/Weather.class", b""), (SERVER_CLASS, b"")]));
    write(d, "lib/guava.jar", zip(&[("com/google/Guava.class", b"")]));
    // Bystanders: no server package; a resource naming it; a client starter.
    write(d, "plain.jar", zip(&[manifest, ("com/x/Main.class", b"io/modelcontextprotocol/server/")]));
    write(d, "resource.jar", zip(&[manifest, ("docs/io/modelcontextprotocol/server/README.txt", b"")]));
    write(
        d,
        "client.jar",
        zip(&[manifest, (SERVER_CLASS, b""), ("org/springframework/ai/mcp/client/McpClient.class", b"")]),
    );
    // The main class is not in the jar holding the SDK.
    write(d, "lib/sdk.jar", zip(&[(SERVER_CLASS, b"")]));
    let java = |args: &[&str]| {
        let mut argv = vec!["java"];
        argv.extend(args);
        Spec::new(&argv).cwd(d)
    };
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .child(java(&["-Dspring.ai.mcp.server.stdio=true", "-jar", "server.jar"]))
            .child(java(&["-jar", "boot.jar"]))
            .child(java(&["-cp", "lib/guava.jar:lib/app.jar", "com.w.Weather"]))
            .child(java(&["-jar", "plain.jar"]))
            .child(java(&["-jar", "resource.jar"]))
            .child(java(&["-jar", "client.jar"]))
            .child(java(&["-cp", "lib/sdk.jar:lib/guava.jar", "com.x.Main"])),
    ]);
    let host = sb.pid_of("python3 agent.py");
    let (server, boot, cp) =
        (sb.pid_of("java -Dspring"), sb.pid_of("java -jar boot.jar"), sb.pid_of("java -cp lib/guava"));
    let kept = [
        sb.pid_of("java -jar plain.jar"),
        sb.pid_of("java -jar resource.jar"),
        sb.pid_of("java -jar client.jar"),
        sb.pid_of("java -cp lib/sdk.jar"),
    ];
    let holds = format!("its jar holds io.modelcontextprotocol.server ({})", d.join("server.jar").display());
    let servers = [
        (server, "holds", holds.as_str()),
        (boot, "holds", "its jar holds spring-ai-starter-mcp-server-1.0.0"),
        (cp, "holds", "app.jar"),
    ];
    reap_and_check(&dir, &sb, host, &servers, &kept);
}

const CONSOLE_SCRIPT: &str = "#!VENV/bin/python3\nimport re\nimport sys\nfrom weather.server import main\nif __name__ == \"__main__\":\n    sys.argv[0] = re.sub(r\"(-script\\.pyw|\\.exe)?$\", \"\", sys.argv[0])\n    sys.exit(main())\n";
const SERVER_MODULE: &str = "import httpx\nfrom mcp.server.fastmcp import FastMCP\n\nmcp = FastMCP(\"weather\")\n\ndef main():\n    mcp.run(transport=\"stdio\")\n";

#[test]
fn a_venvs_console_script_and_a_script_importing_its_own_server_module_are_reaped() {
    let dir = TempDir::new("sdk-venv");
    let p = dir.path().join("proj");
    let venv = p.join(".venv");
    let site = "lib/python3.12/site-packages";
    write(&venv, "pyvenv.cfg", "home = /usr/bin\nversion_info = 3.12.3\n");
    write(&venv, "bin/python3", "");
    write(
        &venv,
        &format!("{site}/mcp/__init__.py"),
        "from .client.session import ClientSession\nfrom .server.session import ServerSession\n",
    );
    write(&venv, &format!("{site}/mcp/server/__init__.py"), "");
    // An installed console script: `pip install weather` (no pyproject around).
    write(&venv, "bin/weather", CONSOLE_SCRIPT.replace("VENV", &venv.display().to_string()));
    write(&venv, &format!("{site}/weather/__init__.py"), "");
    write(&venv, &format!("{site}/weather/server.py"), SERVER_MODULE);
    // An editable install's source, through a .pth file.
    write(&venv, &format!("{site}/_tides.pth"), format!("{}\n", p.join("src").display()));
    write(
        &venv,
        "bin/tides",
        CONSOLE_SCRIPT.replace("VENV", &venv.display().to_string()).replace("weather.server", "tides"),
    );
    write(&p, "src/tides/__init__.py", "from .app import main\n");
    write(&p, "src/tides/app.py", SERVER_MODULE);
    // `.venv/bin/python3 app.py` whose package imports the server.
    write(&p, "app.py", "from forecast import serve\nserve()\n");
    write(&p, "forecast/__init__.py", "from .core import serve\n");
    write(&p, "forecast/core.py", SERVER_MODULE);
    // Bystanders in the same venv: an agent whose module imports the client
    // half, a tool importing nothing MCP, a module importing `mcp` itself.
    write(&p, "agent_cli.py", "from agent_lib import run\nrun()\n");
    write(&p, "agent_lib.py", "from mcp.client.stdio import stdio_client\n");
    write(&p, "report.py", "import json\nimport forecast_data\n");
    write(&p, "forecast_data.py", "import csv\n");
    write(&p, "bare.py", "import mcp\n");
    let py = venv.join("bin/python3").display().to_string();
    let run = |args: &[&str]| {
        let mut argv = vec![py.as_str()];
        argv.extend(args);
        Spec::new(&argv).cwd(&p)
    };
    let weather_bin = venv.join("bin/weather").display().to_string();
    let tides_bin = venv.join("bin/tides").display().to_string();
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .child(run(&[&weather_bin]))
            .child(run(&[&tides_bin]))
            .child(Spec::new(&[".venv/bin/python3", "app.py"]).cwd(&p))
            .child(run(&["agent_cli.py"]))
            .child(run(&["report.py"]))
            .child(run(&["bare.py"])),
    ]);
    let host = sb.pid_of("python3 agent.py");
    let (weather, tides) = (sb.pid_of(&format!("{py} {weather_bin}")), sb.pid_of(&format!("{py} {tides_bin}")));
    let app = sb.pid_of(".venv/bin/python3 app.py");
    let kept =
        [sb.pid_of(&format!("{py} agent_cli")), sb.pid_of(&format!("{py} report")), sb.pid_of(&format!("{py} bare"))];
    let w = format!(
        "its venv has mcp.server and its module weather.server imports mcp.server.fastmcp ({}/{site}/weather/server.py)",
        venv.display()
    );
    let servers = [
        (weather, "venv", w.as_str()),
        (tides, "venv", "its module tides.app imports mcp.server.fastmcp"),
        (app, "venv", "its module forecast.core imports mcp.server.fastmcp"),
    ];
    reap_and_check(&dir, &sb, host, &servers, &kept);
}

#[test]
fn hostile_programs_are_read_bounded_and_refused() {
    let dir = TempDir::new("sdk-hostile");
    let d = dir.path();
    // A binary with 6 GiB of hole before its sections (sparse: nothing is
    // allocated) whose function table claims 3 GiB: refused, nothing of it read.
    go_binary(&d.join("bin/huge-go"), &[(MCP_GO, "v0.43.0")], &["github.com/mark3labs/mcp-go/server.Serve"], 6 << 30);
    claim_pclntab_size(&d.join("bin/huge-go"), 3 << 30);
    assert!(std::fs::metadata(d.join("bin/huge-go")).unwrap().len() > 6 << 30);
    // A zip whose end record points its directory beyond the file.
    let mut bogus = zip(&[(SERVER_CLASS, b"")]);
    let n = bogus.len();
    bogus[n - 6..n - 2].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    write(d, "bogus.jar", bogus);
    // A 5 GiB jar (sparse) whose directory sits at its end: read bounded.
    let jar = zip(&[(SERVER_CLASS, b"")]);
    let big = d.join("big.jar");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(5 << 30).unwrap();
    drop(f);
    // The zip at its end, its offsets relative to the zip's start (as after
    // a prepended launch script).
    let at = (5u64 << 30) - jar.len() as u64;
    std::os::unix::fs::FileExt::write_all_at(&std::fs::OpenOptions::new().write(true).open(&big).unwrap(), &jar, at)
        .unwrap();
    let huge_go = d.join("bin/huge-go");
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .child(Spec::new(&[huge_go.to_str().unwrap()]).exe(&huge_go).cwd(d))
            .child(Spec::new(&["java", "-jar", "bogus.jar"]).cwd(d))
            .child(Spec::new(&["java", "-jar", "big.jar"]).cwd(d)),
    ]);
    let host = sb.pid_of("python3 agent.py");
    let (huge, bogus, big) =
        (sb.pid_of(huge_go.to_str().unwrap()), sb.pid_of("java -jar bogus"), sb.pid_of("java -jar big"));
    let started = std::time::Instant::now();
    reap_and_check(&dir, &sb, host, &[(big, "holds", "big.jar")], &[huge, bogus]);
    eprintln!("hostile: scan + reap with a 6 GiB binary and a 5 GiB jar: {:?}", started.elapsed());
}

/// Sets the size of the last `.gopclntab` section header of `path`.
fn claim_pclntab_size(path: &Path, size: u64) {
    use std::os::unix::fs::FileExt as _;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut h = [0u8; 64];
    f.read_exact_at(&mut h, 0).unwrap();
    let (shoff, shnum) = (u64at(&h, 0x28), u16at(&h, 0x3c) as u64);
    // The fixture's last section is the function table.
    f.write_all_at(&size.to_le_bytes(), shoff + (shnum - 1) * 64 + 0x20).unwrap();
}

#[test]
fn a_jar_behind_a_symlink_to_a_file_its_user_may_not_read_is_refused() {
    if !common::is_root() {
        common::skip(
            "a_jar_behind_a_symlink_to_a_file_its_user_may_not_read_is_refused",
            "needs root to run as another uid",
        );
        return;
    }
    let dir = TempDir::new("sdk-symlink");
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = write(d, "root-only/server.jar", zip(&[(SERVER_CLASS, b"")]));
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let user = d.join("user");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::set_permissions(&user, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&secret, user.join("server.jar")).unwrap();
    // The same jar, readable: known (so the refusal is the rights', not the jar's).
    let open = write(d, "open/server.jar", zip(&[(SERVER_CLASS, b"")]));
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&open, user.join("open.jar")).unwrap();
    let sb = Sandbox::new(vec![
        Spec::new(&["python3", "agent.py"])
            .uid(65534)
            .child(Spec::new(&["java", "-jar", "server.jar"]).cwd(&user).uid(65534))
            .child(Spec::new(&["java", "-jar", "open.jar"]).cwd(&user).uid(65534)),
    ]);
    let host = sb.pid_of("python3 agent.py");
    let (refused, known) = (sb.pid_of("java -jar server.jar"), sb.pid_of("java -jar open.jar"));
    reap_and_check(&dir, &sb, host, &[(known, "holds", "user/open.jar")], &[refused]);
}
