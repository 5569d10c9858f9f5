//! What an entry script's imports say about the MCP SDK it uses: the
//! server half's, or the client half's (a host's, never a server's).
//!
//! Only import statements count ([`python`], [`js`]), never a word in a
//! string or a comment: a program that sends a `fastmcp` cell to its kernel,
//! or documents how to start a server, is not one. A server word
//! (`FastMCP`, `McpServer`, `StdioServerTransport`) says nothing alone;
//! imported, the module it comes from already says it.
//!
//! A program importing both halves is a client here (a proxy, an agent
//! hosting its own tools); other evidence (a host's config naming it, the
//! name patterns) can still make it a server.

use super::{Lang, Says, js, python};

/// What a script's text says about the MCP SDK it uses.
pub fn analyse(text: &str, lang: Lang) -> Says {
    match lang {
        Lang::Python => python_says(&python::imports(text)),
        Lang::Js => js_says(&js::imports(text)),
    }
}

fn python_says(imports: &[python::Import]) -> Says {
    // `from a import b` names `a.b` (a module or one of `a`'s own names).
    let paths = |i: &python::Import| -> Vec<String> {
        if i.names.is_empty() {
            return vec![i.module.clone()];
        }
        i.names.iter().map(|n| if n == "*" { i.module.clone() } else { format!("{}.{n}", i.module) }).collect()
    };
    if imports.iter().flat_map(paths).any(|p| python_client(&p)) {
        return Says::Client;
    }
    let server = imports.iter().find_map(|i| {
        let p = paths(i).into_iter().find(|p| python_server(p))?;
        // The module as written (`mcp.server.fastmcp`, `fastmcp`); `mcp`
        // alone would name both halves (`from mcp import server`).
        Some(if i.module == "mcp" { p } else { i.module.clone() })
    });
    server.map_or(Says::Nothing, Says::Server)
}

/// `a.b` is `prefix` or inside it.
fn within(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|r| r.is_empty() || r.starts_with('.'))
}

/// `mcp.client…` and `fastmcp.client…`, the `Client` both packages export
/// (`from fastmcp import Client`, the SDK 2.x's `from mcp import Client`),
/// and the SDK's client names wherever they are imported from.
fn python_client(path: &str) -> bool {
    let (package, name) = path.rsplit_once('.').unwrap_or(("", path));
    within(path, "mcp.client")
        || within(path, "fastmcp.client")
        || (name == "Client" && matches!(package, "mcp" | "fastmcp"))
        || matches!(name, "ClientSession" | "ClientSessionGroup" | "stdio_client")
}

/// `mcp.server…`; anything of `fastmcp` but its client (which
/// [`python_client`] has seen first). `import fastmcp` alone, like `import
/// mcp`, names a package holding both halves: no proof.
fn python_server(path: &str) -> bool {
    within(path, "mcp.server") || path.strip_prefix("fastmcp.").is_some_and(|r| !r.is_empty())
}

fn js_says(specifiers: &[&str]) -> Says {
    let under = |s: &str, p: &str| s.strip_prefix(p).is_some_and(|r| r.is_empty() || r.starts_with('/'));
    let client = ["@modelcontextprotocol/sdk/client", "@modelcontextprotocol/client"];
    if specifiers.iter().any(|s| client.iter().any(|c| under(s, c))) {
        return Says::Client;
    }
    // The SDK's server modules (v1's `sdk/server/…`, v2's own package), npm `fastmcp`.
    let server = ["@modelcontextprotocol/sdk/server", "@modelcontextprotocol/server", "fastmcp"];
    specifiers
        .iter()
        .find(|s| server.iter().any(|p| under(s, p)))
        .map_or(Says::Nothing, |s| Says::Server((*s).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(t: &str) -> Says {
        analyse(t, Lang::Python)
    }

    fn js(t: &str) -> Says {
        analyse(t, Lang::Js)
    }

    #[test]
    fn server_imports_client_imports_and_neither() {
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
        assert_eq!(js("import { FastMCP } from 'fastmcp';\n"), Says::Server("fastmcp".into()));
        assert_eq!(js("import { Client } from \"@modelcontextprotocol/sdk/client/index.js\";\n"), Says::Client);
        assert_eq!(js("// McpServer\nconsole.log(1)\n"), Says::Nothing);
    }

    #[test]
    fn a_word_in_a_string_or_a_comment_is_no_import() {
        // The cell a notebook pipeline sends to its kernel (issue 32, shape 5).
        let cell = "code = \"from fastmcp import FastMCP\\nnb = FastMCP('notebook')\"\nkernel.execute(code)\n";
        assert_eq!(py(cell), Says::Nothing);
        assert_eq!(py("CELL = '''\nfrom fastmcp import FastMCP\nimport mcp.server.stdio\n'''\n"), Says::Nothing);
        assert_eq!(
            py("def usage():\n    \"\"\"Serve it:\n\n    from mcp.server.fastmcp import FastMCP\n    \"\"\"\n"),
            Says::Nothing
        );
        assert_eq!(py("msg = f\"\"\"{name}\nimport fastmcp.server\n\"\"\"\n"), Says::Nothing);
        assert_eq!(py("x = 1  # from mcp.server.fastmcp import FastMCP\n"), Says::Nothing);
        let template = "const doc = `\nimport { McpServer } from \"@modelcontextprotocol/sdk/server/mcp.js\";\n`;\n";
        assert_eq!(js(template), Says::Nothing);
        let block =
            "/*\nimport { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';\n*/\nmain();\n";
        assert_eq!(js(block), Says::Nothing);
        assert_eq!(js("const hint = \"new McpServer() over a StdioServerTransport\";\n"), Says::Nothing);
        assert_eq!(js("const { StdioServerTransport } = require('./transports.js');\n"), Says::Nothing, "a bare word");
    }

    #[test]
    fn fastmcps_client_is_the_client_half() {
        assert_eq!(py("from fastmcp import Client\n"), Says::Client);
        assert_eq!(py("from fastmcp import FastMCP, Client\n"), Says::Client, "both halves: a proxy, a host");
        assert_eq!(py("from fastmcp import (\n    FastMCP,\n    Client as C,\n)\n"), Says::Client);
        assert_eq!(py("import fastmcp.client\n"), Says::Client);
        assert_eq!(py("from fastmcp.client.transports import StdioTransport\n"), Says::Client);
        assert_eq!(py("from mcp import Client\nfrom mcp.server.mcpserver import MCPServer\n"), Says::Client);
        // Only an import is the client half, as only an import is the server's.
        assert_eq!(py("from fastmcp import FastMCP\n# not a ClientSession\n"), Says::Server("fastmcp".into()));
        let js_client = "import { Client } from '@modelcontextprotocol/sdk/client/index.js';\n";
        assert_eq!(
            js(&format!("{js_client}import {{ McpServer }} from '@modelcontextprotocol/sdk/server/mcp.js';\n")),
            Says::Client
        );
        assert_eq!(js("// new Client() later\nimport { FastMCP } from 'fastmcp';\n"), Says::Server("fastmcp".into()));
    }

    #[test]
    fn imports_however_they_are_written() {
        assert_eq!(py("import json, mcp.server.stdio as stdio\n"), Says::Server("mcp.server.stdio".into()));
        assert_eq!(
            py("import os; from mcp.server.fastmcp import FastMCP\n"),
            Says::Server("mcp.server.fastmcp".into())
        );
        assert_eq!(
            py("try: import mcp.server.stdio\nexcept ImportError: pass\n"),
            Says::Server("mcp.server.stdio".into())
        );
        assert_eq!(
            py("if True:\n    from fastmcp import (\n        FastMCP,  # the app\n        Context,\n    )\n"),
            Says::Server("fastmcp".into())
        );
        assert_eq!(py("import fastmcp\n"), Says::Nothing, "the package itself holds both halves");
        let stdio = "@modelcontextprotocol/sdk/server/stdio.js";
        for t in [
            format!("const {{ StdioServerTransport }} = require(\"{stdio}\");\n"),
            format!("const m = await import('{stdio}');\n"),
            format!("import '{stdio}';\n"),
            format!("export {{ StdioServerTransport }} from '{stdio}';\n"),
            format!("import {{\n  StdioServerTransport,\n}} from \"{stdio}\"\n"),
            format!("const q = /[\"'`]/g; // quotes\nimport {{ StdioServerTransport }} from \"{stdio}\";\n"),
            format!(
                "#!/usr/bin/env node\nimport type {{ X }} from './x.js';\nimport {{ StdioServerTransport }} from '{stdio}';\n"
            ),
        ] {
            assert_eq!(js(&t), Says::Server(stdio.into()), "{t}");
        }
        assert_eq!(
            js("import { McpServer } from '@modelcontextprotocol/server';\n"),
            Says::Server("@modelcontextprotocol/server".into())
        );
        assert_eq!(js("import { Client } from '@modelcontextprotocol/client';\n"), Says::Client);
        assert_eq!(
            js("import x from '@modelcontextprotocol/sdk/serverless.js';\nimport f from 'fastmcp-utils';\n"),
            Says::Nothing
        );
    }

    /// Python string literals holding `line`, and comments and docstrings.
    fn py_hiding(line: &str) -> Vec<String> {
        let q = |l: &str, quote: char| {
            format!("{quote}{}{quote}", l.replace('\\', "\\\\").replace(quote, &format!("\\{quote}")))
        };
        vec![
            format!("CELL = {}", q(line, '"')),
            format!("CELL = {}", q(&format!("{line}\\nrun()"), '\'')),
            format!("subprocess.run([sys.executable, '-c', {}])", q(line, '\'')),
            format!("CELL = \"\"\"\n{line}\n\"\"\""),
            format!("CELL = r'''{line}\n'''"),
            format!("msg = f\"{{name}}: {line}\""),
            format!("msg = rb'{line}'"),
            format!("# {line}"),
            format!("x = 1  # {line}"),
            format!("def usage():\n    \"\"\"Serve it with:\n\n    {line}\n    \"\"\"\n    return 0"),
        ]
    }

    /// JavaScript string and template literals holding `line`, and comments.
    fn js_hiding(line: &str) -> Vec<String> {
        let q = |l: &str, quote: char| {
            format!("{quote}{}{quote}", l.replace('\\', "\\\\").replace(quote, &format!("\\{quote}")))
        };
        vec![
            format!("const doc = {};", q(line, '\'')),
            format!("console.log({});", q(line, '"')),
            format!("const doc = `\n{line}\n`;"),
            format!("const doc = `${{name}}: {line}`;"),
            format!("// {line}"),
            format!("main(); // {line}"),
            format!("/*\n{line}\n*/"),
            format!("/**\n * Usage:\n * {line}\n */"),
        ]
    }

    /// Where a script's imports may stand: first, after a docstring and
    /// other imports, in a `try:`, in an `if`.
    fn py_places(imports: &str) -> Vec<String> {
        let indented: String = imports.lines().map(|l| "    ".to_string() + l + "\n").collect();
        vec![
            format!("{imports}\n"),
            format!("\"\"\"A server.\"\"\"\nimport os, sys\n\n{imports}\n"),
            format!("try:\n{indented}except ImportError:\n    pass\n"),
            format!("if sys.version_info >= (3, 10):\n{indented}"),
        ]
    }

    /// First, after a shebang, after a regular expression holding quotes.
    fn js_places(imports: &str) -> Vec<String> {
        vec![
            format!("{imports}\n"),
            format!("#!/usr/bin/env node\n\"use strict\";\n{imports}\n"),
            format!("const quotes = /['\"`]/g;\n{imports}\n"),
        ]
    }

    struct Mutations {
        places: fn(&str) -> Vec<String>,
        hiding: fn(&str) -> Vec<String>,
        /// Client-half imports, each put in place of a server import.
        clients: &'static [&'static str],
    }

    fn mutations(lang: Lang) -> Mutations {
        match lang {
            Lang::Python => Mutations {
                places: py_places,
                hiding: py_hiding,
                clients: &[
                    "from fastmcp import Client",
                    "from mcp.client.stdio import stdio_client",
                    "import fastmcp.client",
                ],
            },
            Lang::Js => Mutations {
                places: js_places,
                hiding: js_hiding,
                clients: &["import { Client } from \"@modelcontextprotocol/sdk/client/index.js\";"],
            },
        }
    }

    #[test]
    fn a_server_script_with_its_import_hidden_or_swapped_is_never_server_evidence() {
        struct Script {
            lang: Lang,
            imports: &'static [&'static str],
            body: &'static str,
            found: &'static str,
        }
        let scripts = [
            Script {
                lang: Lang::Python,
                imports: &["from mcp.server.fastmcp import FastMCP"],
                body: "mcp = FastMCP(\"weather\")\nmcp.run()\n",
                found: "mcp.server.fastmcp",
            },
            Script {
                lang: Lang::Python,
                imports: &["import mcp.server.stdio", "from mcp.server import Server"],
                body: "server = Server('w')\nasync def main():\n    async with mcp.server.stdio.stdio_server() as (r, w):\n        await server.run(r, w, None)\n",
                found: "mcp.server.stdio",
            },
            Script {
                lang: Lang::Python,
                imports: &["from fastmcp import FastMCP"],
                body: "app = FastMCP('notes')\napp.run()\n",
                found: "fastmcp",
            },
            Script {
                lang: Lang::Js,
                imports: &[
                    "import { McpServer } from \"@modelcontextprotocol/sdk/server/mcp.js\";",
                    "import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';",
                ],
                body: "const server = new McpServer({ name: \"w\", version: \"1.0.0\" });\nawait server.connect(new StdioServerTransport());\n",
                found: "@modelcontextprotocol/sdk/server/mcp.js",
            },
            Script {
                lang: Lang::Js,
                imports: &["const { FastMCP } = require(\"fastmcp\");"],
                body: "const server = new FastMCP({ name: 'w', version: '1.0.0' });\nserver.start({ transportType: 'stdio' });\n",
                found: "fastmcp",
            },
        ];
        let mut checked = 0;
        for s in &scripts {
            let m = mutations(s.lang);
            let as_written: Vec<String> = s.imports.iter().map(ToString::to_string).collect();
            for p in 0..(m.places)("").len() {
                let text = |imports: &[String]| format!("{}{}", (m.places)(&imports.join("\n")).swap_remove(p), s.body);
                let plain = text(&as_written);
                assert_eq!(analyse(&plain, s.lang), Says::Server(s.found.into()), "{plain}");
                for k in 0..(m.hiding)("").len() {
                    let hidden: Vec<String> = s.imports.iter().map(|i| (m.hiding)(i).swap_remove(k)).collect();
                    let t = text(&hidden);
                    assert!(!matches!(analyse(&t, s.lang), Says::Server(_)), "{t}");
                    checked += 1;
                }
                for c in m.clients {
                    let mut swapped = as_written.clone();
                    swapped[0] = (*c).to_string();
                    let t = text(&swapped);
                    assert_eq!(analyse(&t, s.lang), Says::Client, "{t}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }
}
