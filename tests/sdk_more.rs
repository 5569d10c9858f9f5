//! Servers known by their compiled or packaged program (issue 23): a Go
//! binary's build info and function names, a jar's class names, a venv's
//! console script and the modules its entry imports. Real process trees,
//! the real `reaperctl scan` and an enforcing `mcp-reaperd --once`, scoped
//! to the test's sandbox, as in tests/sdk.rs.
//!
//! Fixtures: tests/common/programs.rs (a Go binary is a copy of the
//! `fakeproc` stand-in given Go's sections; jars are stored zips).
//! No fixture program is executed as what it claims to be.

mod common;
#[path = "common/programs.rs"]
mod programs;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Sandbox, Spec, TempDir, alive, in_any_tree, reaped_roots, wait_until};
use programs::{claim_pclntab_size, go_binary, zip};
use serde_json::Value;

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
    common::json_in(dir, bin, sb, extra)
}

fn scan(dir: &TempDir, sb: &Sandbox) -> Value {
    json(dir, env!("CARGO_BIN_EXE_reaperctl"), sb, &["scan"])
}

fn once(dir: &TempDir, sb: &Sandbox) -> Value {
    json(dir, env!("CARGO_BIN_EXE_mcp-reaperd"), sb, &["--once", "--log-target", "stderr"])
}

/// Kills the host, checks each server's evidence in `reaperctl scan`
/// (`kind`, the reason's words), reaps, and checks who lives.
fn reap_and_check(dir: &TempDir, sb: &Sandbox, host: i32, servers: &[(i32, &str, &str)], kept: &[i32]) {
    sb.kill_host(host);
    let v = scan(dir, sb);
    for &(pid, kind, words) in servers {
        let m = in_any_tree(&v, pid).unwrap_or_else(|| panic!("{pid} ({words}) is in no tree: {v:#}"));
        assert_eq!((m["role"].as_str(), m["sdk"]["kind"].as_str()), (Some("server"), Some(kind)), "{m:#}");
        let rule = m["role_rule"].as_str().unwrap_or_default();
        assert!(rule.contains(words), "{rule:?} lacks {words:?}");
        let t = v["trees"].as_array().unwrap().iter().find(|t| t["root"] == pid).unwrap_or_else(|| panic!("{v:#}"));
        assert!(t["reason"].as_str().unwrap().contains(words), "{t:#}");
    }
    for &p in kept {
        assert!(in_any_tree(&v, p).is_none(), "{p} is no server: {:#}", v["trees"]);
    }
    let v = once(dir, sb);
    let mut want: Vec<i64> = servers.iter().map(|s| i64::from(s.0)).collect();
    want.sort_unstable();
    assert_eq!(reaped_roots(&v), want, "{v:#}");
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
