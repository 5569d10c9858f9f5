//! What an entry script's text says about the MCP SDK it uses: the server
//! half's imports, or the client half's (a host's, never a server's).

use super::{Lang, Says};

const PY_CLIENT: &[&str] = &["mcp.client", "stdio_client", "ClientSession"];
const JS_CLIENT: &[&str] = &["@modelcontextprotocol/sdk/client", "StdioClientTransport"];

/// What a script's text says about the MCP SDK it uses.
pub fn analyse(text: &str, lang: Lang) -> Says {
    let code = || {
        text.lines().map(str::trim).filter(move |l| match lang {
            Lang::Python => !l.starts_with('#'),
            Lang::Js => !l.starts_with("//") && !l.starts_with('*') && !l.starts_with("/*"),
        })
    };
    let client = match lang {
        Lang::Python => PY_CLIENT,
        Lang::Js => JS_CLIENT,
    };
    if code().any(|l| client.iter().any(|c| l.contains(c)) || lang == Lang::Js && l.contains("new Client(")) {
        return Says::Client;
    }
    for l in code() {
        let found = match lang {
            Lang::Python => python_server(l),
            Lang::Js => js_server(l),
        };
        if let Some(f) = found {
            return Says::Server(f);
        }
    }
    Says::Nothing
}

/// `from mcp.server.fastmcp import FastMCP` → `mcp.server.fastmcp`.
fn python_server(l: &str) -> Option<String> {
    let module = if let Some(r) = l.strip_prefix("from ") {
        r.split_whitespace().next()?
    } else if let Some(r) = l.strip_prefix("import ") {
        r.split([',', ' ']).next()?
    } else if l.contains("FastMCP(") {
        return Some("FastMCP".into());
    } else {
        return None;
    };
    let server = module == "mcp.server"
        || module.starts_with("mcp.server.")
        || module == "fastmcp"
        || module.starts_with("fastmcp.");
    server.then(|| module.to_string())
}

/// `import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"` →
/// that path; `StdioServerTransport`, `McpServer`, npm `fastmcp`.
fn js_server(l: &str) -> Option<String> {
    if let Some(at) = l.find("@modelcontextprotocol/sdk/server") {
        let rest = &l[at..];
        let end = rest.find(['"', '\'', '`']).unwrap_or(rest.len());
        return Some(rest[..end].to_string());
    }
    for quoted in ["\"fastmcp\"", "'fastmcp'"] {
        if l.contains(quoted) && (l.contains("from ") || l.contains("require(") || l.contains("import(")) {
            return Some("fastmcp".into());
        }
    }
    ["StdioServerTransport", "McpServer"].into_iter().find(|w| l.contains(w)).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_imports_client_imports_and_neither() {
        let py = |t| analyse(t, Lang::Python);
        let js = |t| analyse(t, Lang::Js);
        assert_eq!(
            py("from mcp.server.fastmcp import FastMCP\nmcp = FastMCP('w')\n"),
            Says::Server("mcp.server.fastmcp".into())
        );
        assert_eq!(
            py("try:\n    import mcp.server.stdio\nexcept ImportError:\n    pass\n"),
            Says::Server("mcp.server.stdio".into())
        );
        assert_eq!(py("from fastmcp import FastMCP\n"), Says::Server("fastmcp".into()));
        assert_eq!(py("# from mcp.server.fastmcp import FastMCP\nimport json\n"), Says::Nothing, "a comment");
        assert_eq!(py("from mcp import ClientSession\nfrom mcp.client.stdio import stdio_client\n"), Says::Client);
        assert_eq!(
            py("from mcp.server.fastmcp import FastMCP\nfrom mcp.client.stdio import stdio_client\n"),
            Says::Client,
            "a proxy or agent with both halves is a host"
        );
        assert_eq!(py("import mcpx\nfrom mcp_server_helpers import x\nimport http.server\n"), Says::Nothing);
        assert_eq!(
            js("import { McpServer } from \"@modelcontextprotocol/sdk/server/mcp.js\";\n"),
            Says::Server("@modelcontextprotocol/sdk/server/mcp.js".into())
        );
        assert_eq!(js("const { StdioServerTransport } = require('x');\n"), Says::Server("StdioServerTransport".into()));
        assert_eq!(js("import { FastMCP } from 'fastmcp';\n"), Says::Server("fastmcp".into()));
        assert_eq!(js("import { Client } from \"@modelcontextprotocol/sdk/client/index.js\";\n"), Says::Client);
        assert_eq!(js("// McpServer\nconsole.log(1)\n"), Says::Nothing);
    }
}
