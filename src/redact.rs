//! Secrets in command lines (`--api-key=…`, `token=…`, `Authorization: …`)
//! are masked wherever a command line is shown: terminal, JSON, logs, the
//! control socket. Matching (roles, `protect`) always sees the raw text.
//!
//! The one way a command line reaches a human is
//! [`Process::display_cmd`](crate::scan::Process::display_cmd), which runs it
//! through [`current`]; everything shown (`names::short_cmd`, reasons, the
//! scan report, outcomes, the daemon's status) is built from it.
//!
//! The patterns come from `[redact]` in the config, which installs its
//! redactor here; until one is installed, the embedded default file's
//! `[redact]` applies (read here: this module knows nothing of `config`). Each capturing group that
//! took part in a match is replaced by [`MASK`]; a pattern without capturing
//! groups has its whole match replaced.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, OnceLock, RwLock};

use regex::{Regex, RegexSet, RegexSetBuilder};

/// The lazy DFA's state cache per compiled regex or list (regex's default is
/// 2 MiB each), here and for the role patterns. Command lines are short and
/// the lists few: a small cache keeps the daemon's footprint down, and a full
/// one only costs a cache reset.
pub const DFA_CACHE: usize = 256 * 1024;

/// What a secret is replaced by.
pub const MASK: &str = "***";

/// Compiled-program cap per pattern, as for the role patterns.
const SIZE_LIMIT: usize = 1 << 20;

/// Compiled redaction patterns. No patterns: shows text unchanged.
///
/// The embedded default's patterns (known to compile, see
/// [`crate::compiled`]) are compiled when first needed: the set when a
/// command line is first shown, each pattern when it first matches; most
/// runs of `reaperctl` show few lines, and most lines hold no secret. Other
/// patterns are compiled at once, so a config's bad ones are refused on load.
#[derive(Debug)]
pub struct Redactor {
    patterns: Vec<String>,
    set: OnceLock<RegexSet>,
    each: Vec<OnceLock<Regex>>,
}

fn compile_one(p: &str) -> Result<Regex, String> {
    // The one the config's check compiled, when there is one.
    crate::compiled::regex(p, SIZE_LIMIT, DFA_CACHE).map_err(|e| {
        let e = e.to_string();
        let msg: Vec<&str> = e.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        format!("invalid regex: {}", msg.join(" "))
    })
}

fn compile_set(patterns: &[String]) -> Result<RegexSet, String> {
    RegexSetBuilder::new(patterns)
        .size_limit(SIZE_LIMIT * patterns.len().max(1))
        .dfa_size_limit(DFA_CACHE)
        .build()
        .map_err(|e| format!("invalid regex set: {e}"))
}

impl Redactor {
    /// Compiles `patterns`; the message names the first bad one. The
    /// embedded default's are compiled when first used instead.
    pub fn new(patterns: &[String]) -> Result<Redactor, String> {
        let lazy = Redactor {
            patterns: patterns.to_vec(),
            set: OnceLock::new(),
            each: patterns.iter().map(|_| OnceLock::new()).collect(),
        };
        if crate::compiled::all_vouched(patterns) {
            return Ok(lazy);
        }
        for (p, slot) in patterns.iter().zip(&lazy.each) {
            let _ = slot.set(compile_one(p)?);
        }
        let _ = lazy.set.set(compile_set(patterns)?);
        Ok(lazy)
    }

    /// Shows everything as it is (`redact.enabled = false`); also the [`Default`].
    pub fn disabled() -> Redactor {
        Redactor { patterns: Vec::new(), set: OnceLock::new(), each: Vec::new() }
    }

    pub fn is_enabled(&self) -> bool {
        !self.patterns.is_empty()
    }

    fn set(&self) -> &RegexSet {
        self.set.get_or_init(|| compile_set(&self.patterns).expect("vouched-for patterns compile together (tested)"))
    }

    fn each(&self, i: usize) -> &Regex {
        self.each[i].get_or_init(|| compile_one(&self.patterns[i]).expect("vouched-for patterns compile (tested)"))
    }

    /// `text` with every secret replaced by [`MASK`]. Borrowed when nothing matched.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.is_enabled() {
            return Cow::Borrowed(text);
        }
        let hits = self.set().matches(text);
        if !hits.matched_any() {
            return Cow::Borrowed(text);
        }
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for i in &hits {
            for caps in self.each(i).captures_iter(text) {
                if caps.len() == 1 {
                    let m = caps.get(0).expect("group 0 always takes part");
                    spans.push((m.start(), m.end()));
                } else {
                    spans.extend(caps.iter().skip(1).flatten().map(|m| (m.start(), m.end())));
                }
            }
        }
        spans.retain(|&(s, e)| s < e);
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        spans.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (s, e) in spans {
            if e <= at {
                continue; // inside a span already masked
            }
            if s >= at {
                out.push_str(&text[at..s]);
                out.push_str(MASK);
            }
            // An overlap extends the mask already written.
            at = e;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }
}

/// The embedded default config (the same file `config` embeds).
const EMBEDDED_CONFIG: &str = include_str!("../config/default.toml");

static DEFAULT: LazyLock<Arc<Redactor>> = LazyLock::new(|| Arc::new(embedded_default()));

/// The redactor of the embedded default's `[redact]`.
fn embedded_default() -> Redactor {
    #[derive(serde::Deserialize)]
    struct File {
        redact: Section,
    }
    #[derive(serde::Deserialize)]
    struct Section {
        enabled: bool,
        patterns: Vec<String>,
        extra_patterns: Vec<String>,
    }
    let r = toml::from_str::<File>(EMBEDDED_CONFIG).expect("the embedded default config is valid (tested)").redact;
    if r.enabled {
        let all: Vec<String> = r.patterns.into_iter().chain(r.extra_patterns).collect();
        Redactor::new(&all).expect("the embedded default's [redact] patterns compile (tested)")
    } else {
        Redactor::disabled()
    }
}
impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::disabled()
    }
}

static CURRENT: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// Makes `r` the redactor of this process (after a config is loaded or reloaded).
pub fn install(r: Arc<Redactor>) {
    *CURRENT.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(r);
}

/// The installed redactor, or the embedded default's when none was installed:
/// a path that forgets to install one still masks the default secrets.
pub fn current() -> Arc<Redactor> {
    let installed = CURRENT.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    installed.unwrap_or_else(|| DEFAULT.clone())
}

/// [`Redactor::redact`] with the [`current`] redactor.
pub fn redact(text: &str) -> Cow<'_, str> {
    current().redact(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the embedded default's patterns (compiled once).
    fn r(text: &str) -> String {
        DEFAULT.redact(text).into_owned()
    }

    /// Every case: the shown text exactly.
    fn check(cases: &[(&str, &str)]) {
        let red = &*DEFAULT;
        for (input, want) in cases {
            assert_eq!(red.redact(input), *want, "redacting {input:?}");
        }
    }

    /// The embedded default's patterns are compiled when first used, on the
    /// strength of this test: each compiles alone, and with room to spare,
    /// so that any list of n of them fits a set's limit of n × `SIZE_LIMIT`.
    #[test]
    fn the_embedded_patterns_compile_lazily_and_as_sets_of_any_of_them() {
        #[derive(serde::Deserialize)]
        struct File {
            redact: Section,
        }
        #[derive(serde::Deserialize)]
        struct Section {
            patterns: Vec<String>,
        }
        let pats = toml::from_str::<File>(EMBEDDED_CONFIG).unwrap().redact.patterns;
        for p in &pats {
            compile_one(p).unwrap();
            RegexSetBuilder::new([p]).size_limit(SIZE_LIMIT / 4).build().unwrap();
        }
        let doubled: Vec<String> = pats.iter().chain(&pats).cloned().collect();
        compile_set(&doubled).unwrap();
        let lazy = crate::compiled::once(|| {
            for p in &pats {
                crate::compiled::vouch(p);
            }
            Redactor::new(&pats).unwrap()
        });
        assert!(lazy.set.get().is_none() && lazy.each.iter().all(|e| e.get().is_none()), "nothing compiled yet");
        assert_eq!(lazy.redact("srv --token=abc"), "srv --token=***");
        assert!(lazy.set.get().is_some());
        let compiled = lazy.each.iter().filter(|e| e.get().is_some()).count();
        assert!((1..=2).contains(&compiled), "only the patterns that matched: {compiled}");
        let eager = Redactor::new(&pats).unwrap();
        assert!(eager.set.get().is_some() && eager.each.iter().all(|e| e.get().is_some()), "not vouched: compiled now");
    }

    #[test]
    fn options_with_the_value_in_the_same_argument() {
        check(&[
            ("node /x/mcp-server-github --api-key=SEKRET1", "node /x/mcp-server-github --api-key=***"),
            ("srv --API_KEY=abc --port 3000", "srv --API_KEY=*** --port 3000"),
            ("srv --apikey=abc", "srv --apikey=***"),
            ("srv --token=abc", "srv --token=***"),
            ("srv --github-token=abc", "srv --github-token=***"),
            ("srv --access_token=abc", "srv --access_token=***"),
            ("srv --password=hunter2 -v", "srv --password=*** -v"),
            ("srv --db-pass=hunter2", "srv --db-pass=***"),
            ("srv --client-secret=abc", "srv --client-secret=***"),
            ("srv --secret=a,b;c&d", "srv --secret=***"),
            ("srv -token=abc", "srv -token=***"),
            ("srv --private-key=-----BEGIN", "srv --private-key=***"),
        ]);
    }

    /// argv is joined by spaces, so the next element is the word after the option.
    #[test]
    fn options_with_the_value_in_the_next_argument() {
        check(&[
            ("srv --api-key SEKRET1 --port 3000", "srv --api-key *** --port 3000"),
            ("srv --token abc", "srv --token ***"),
            ("srv --password hunter2", "srv --password ***"),
            ("srv --secret s3cr3t", "srv --secret ***"),
            ("srv --openai-key sk-x", "srv --openai-key ***"),
            ("srv --slack-bot-token abc http://x", "srv --slack-bot-token *** http://x"),
            ("srv --api-key A --token B", "srv --api-key *** --token ***"),
            // A flag without a value does not take the next option as one.
            ("srv --no-token --port 3000", "srv --no-token --port 3000"),
            ("srv --token", "srv --token"),
        ]);
    }

    #[test]
    fn assignments_env_style_and_in_query_strings() {
        check(&[
            ("srv token=SEKRET3", "srv token=***"),
            ("env GITHUB_TOKEN=abc node server.js", "env GITHUB_TOKEN=*** node server.js"),
            (
                "env OPENAI_API_KEY=abc AWS_SECRET_ACCESS_KEY=def x",
                "env OPENAI_API_KEY=*** AWS_SECRET_ACCESS_KEY=*** x",
            ),
            ("env MY_SECRET=abc PGPASSWORD=pw DB_PASS=pw x", "env MY_SECRET=*** PGPASSWORD=*** DB_PASS=*** x"),
            ("srv api_key=abc password=pw secret=s", "srv api_key=*** password=*** secret=***"),
            (
                "mcp-remote https://mcp.example.com/sse?token=abc&team=t1",
                "mcp-remote https://mcp.example.com/sse?token=***&team=t1",
            ),
            (
                "mcp-remote https://x.example/sse?team=t1&api_key=abc",
                "mcp-remote https://x.example/sse?team=t1&api_key=***",
            ),
            (
                "mcp-remote https://x.example/cb#access_token=abc&x=1",
                "mcp-remote https://x.example/cb#access_token=***&x=1",
            ),
            ("curl https://b.example/c?sv=1&sig=abc%2F", "curl https://b.example/c?sv=1&sig=***"),
            ("docker run -e GITHUB_TOKEN=abc -i mcp/github", "docker run -e GITHUB_TOKEN=*** -i mcp/github"),
            ("srv --basic-auth=u:p", "srv --basic-auth=***"),
        ]);
    }

    #[test]
    fn authorization_headers_and_bearer_tokens() {
        check(&[
            // `--header "Authorization: Bearer abc"`: one argv element holding spaces.
            (
                "mcp-remote https://x.example/mcp --header Authorization: Bearer SEKRET2",
                "mcp-remote https://x.example/mcp --header Authorization: Bearer ***",
            ),
            ("srv --header Authorization: Basic dXNlcjpwdw== -v", "srv --header Authorization: Basic *** -v"),
            ("srv -H authorization:bearer abc", "srv -H authorization:bearer ***"),
            ("srv --header=Authorization:Token abc", "srv --header=Authorization:Token ***"),
            ("srv --header Proxy-Authorization: xyz", "srv --header Proxy-Authorization: ***"),
            ("srv --header X-API-Key: abc", "srv --header X-API-Key: ***"),
            ("srv --header x-auth-token:abc", "srv --header x-auth-token:***"),
            ("srv --header Private-Token: abc", "srv --header Private-Token: ***"),
            ("srv --header Cookie: session=abc", "srv --header Cookie: ***"),
            ("srv --auth Bearer abc", "srv --auth Bearer ***"),
            ("srv --bearer-scheme BEARER abc", "srv --bearer-scheme BEARER ***"),
        ]);
    }

    #[test]
    fn json_in_argv() {
        check(&[
            (r#"srv --config {"apiKey":"abc","port":3000}"#, r#"srv --config {"apiKey":"***","port":3000}"#),
            (r#"srv {"GITHUB_TOKEN": "abc"}"#, r#"srv {"GITHUB_TOKEN": "***"}"#),
        ]);
    }

    #[test]
    fn url_userinfo() {
        check(&[
            (
                "mcp-server-postgres postgres://admin:hunter2@db.example:5432/app",
                "mcp-server-postgres postgres://admin:***@db.example:5432/app",
            ),
            ("git clone https://ghtoken123@github.com/o/r", "git clone https://***@github.com/o/r"),
            ("x https://u:p@ss@h.example/p", "x https://u:***@h.example/p"),
            // No userinfo: nothing to hide.
            ("x https://h.example:8080/p?next=a@b", "x https://h.example:8080/p?next=a@b"),
        ]);
    }

    #[test]
    fn well_known_token_shapes() {
        let gh = "ghp_0123456789abcdefABCDEF0123456789abcd";
        let pat = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789";
        let ant = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_xyz";
        let oai = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123";
        let oai_old = "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123";
        check(&[
            (&format!("srv {gh}"), "srv ghp_***"),
            (&format!("srv {pat} -v"), "srv github_pat_*** -v"),
            (&format!("srv {ant}"), "srv sk-ant-api03-***"),
            (&format!("srv {oai}"), "srv sk-proj-***"),
            (&format!("srv {oai_old}"), "srv sk-***"),
            ("srv xoxb-1234567890-abcdefghij", "srv xoxb-***"),
            ("srv xoxp-1234567890-abcdefghij", "srv xoxp-***"),
            ("aws AKIAIOSFODNN7EXAMPLE s3 ls", "aws AKIA*** s3 ls"),
            ("srv glpat-abcdefghij0123456789", "srv glpat-***"),
            ("srv AIzaSyA-0123456789abcdefghijklmnopqrstu", "srv AIza***"),
            ("srv npm_abcdefghijklmnopqrstuvwxyz0123456789", "srv npm_***"),
            ("srv hf_abcdefghijklmnopqrstuvwxyz012345", "srv hf_***"),
            ("srv sk_live_abcdefghij0123456789", "srv sk_live_***"),
            ("srv eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXNpZw", "srv ***"),
        ]);
        // Inside another secret-bearing form, the mask appears once.
        assert_eq!(r(&format!("srv --token={gh}")), "srv --token=***");
        assert_eq!(r(&format!("env GITHUB_TOKEN={gh} x")), "env GITHUB_TOKEN=*** x");
    }

    #[test]
    fn ordinary_command_lines_are_left_alone() {
        for cmd in [
            "node server.js --port 3000",
            "npx -y @playwright/mcp@latest",
            "npm exec @playwright/mcp@latest",
            "/home/u/tokenizer/run.py --tokens 5",
            "python /home/u/tokens/tokenize.py --max-tokens=4096 --max-tokens 4096",
            "node /usr/lib/node_modules/@modelcontextprotocol/server-github/dist/index.js",
            "python -m mcp_server_git --repository .",
            "docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN mcp/github",
            "docker run -v /home/u/token:/data -v /tmp/x-token:/y img",
            "node --max-old-space-size=4096 /x/cli.js --resume",
            "mcp-remote https://example.invalid/sse",
            "uvx mcp-server-fetch --user-agent=Mozilla/5.0",
            "/usr/share/code/code --type=utility --utility-sub-type=node.mojom.NodeService",
            "git@github.com:o/r.git ssh://github.com/o/r",
            "bash -c export PATH=/usr/bin:$PATH; exec node x.js",
            "srv --keychain --tokenizer=bpe --secrets-dir /run/s --passthrough yes --bypass=1 design=x",
            "python -m sklearn task-runner-with-a-long-name disk-usage-for-everyone",
            "claude --output-format stream-json",
            "",
        ] {
            assert_eq!(r(cmd), cmd, "{cmd:?} should show unchanged");
        }
    }

    #[test]
    fn non_secret_parts_stay_readable() {
        let cmd = "node /x/mcp-server-github --api-key=SEKRET1 --header Authorization: Bearer SEKRET2 token=SEKRET3 --port 3000";
        assert_eq!(
            r(cmd),
            "node /x/mcp-server-github --api-key=*** --header Authorization: Bearer *** token=*** --port 3000"
        );
    }

    #[test]
    fn capture_groups_decide_what_is_masked() {
        let red = Redactor::new(&["--a=(\\S+)|--b (\\S+)".into(), "WHOLE[0-9]+".into(), "(?:x)y(z)?".into()]).unwrap();
        assert_eq!(red.redact("p --a=1 --b 2 WHOLE42 xy xyz"), "p --a=*** --b *** *** xy xy***");
        assert!(matches!(red.redact("nothing here"), Cow::Borrowed(_)));
        // Overlapping spans from two patterns become one mask.
        let red = Redactor::new(&["k=(\\S+)".into(), "(abc\\S*)".into()]).unwrap();
        assert_eq!(red.redact("k=xabcdef y"), "k=*** y");
        assert_eq!(Redactor::disabled().redact("--token=abc"), "--token=abc");
        assert!(Redactor::new(&["(".into()]).unwrap_err().starts_with("invalid regex"));
    }

    #[test]
    fn the_installed_default_masks_what_processes_show() {
        // Nothing in this test binary installs a redactor: the embedded default applies.
        assert_eq!(redact("srv --token=abc"), "srv --token=***");
        assert!(current().is_enabled());
    }
}
