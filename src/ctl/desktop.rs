//! `reaperctl desktop-notify` (hidden): the one freedesktop `Notify` that
//! the daemon's desktop notifications ([`crate::report::desktop`]) send, run
//! by mcp-reaperd as a child. The D-Bus client lives here, in reaperctl, so
//! that the daemon does not carry it: resident memory is mostly the daemon's
//! own text, and zbus was ~422 KiB of it.
//!
//! Dependency: `zbus` (default features off, `tokio` only: the message layer
//! on a current-thread runtime, no proxies or object server). Pure Rust, so
//! the packages need no libdbus.
//!
//! Exit status: 0 sent; 69 no session bus (or the bus refused the call, e.g.
//! no notification service); 75 no answer within 1 s. A one-line reason on
//! stderr, which the daemon logs.

use std::collections::HashMap;
use std::process::ExitCode;

use crate::exit;
use crate::report::desktop::{CAP, PREFIX};

const SERVICE: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

/// The subcommand's name (the first argument, before anything else).
pub const SUBCOMMAND: &str = "desktop-notify";

/// `reaperctl desktop-notify` (run by mcp-reaperd for `[notify] desktop`):
/// sends one desktop notification over the session D-Bus. Exits 0 sent, 69
/// no session bus, 75 no answer within 1 s.
#[derive(clap::Parser, Debug)]
pub struct DesktopNotifyCli {
    #[command(flatten)]
    pub args: DesktopNotifyArgs,
}

#[derive(clap::Args, Debug)]
pub struct DesktopNotifyArgs {
    /// The notification's summary (its title).
    #[arg(long)]
    pub summary: String,
    /// The notification's body.
    #[arg(long, default_value = "")]
    pub body: String,
}

/// Why a notification was not sent.
enum Failure {
    /// Connecting to or authenticating on the session bus failed.
    NoBus(zbus::Error),
    /// The bus answered `Notify` with an error (no notification service).
    Refused(zbus::Error),
}

pub fn run(args: &DesktopNotifyArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(exit::OSERR, &format!("cannot start a runtime: {e}")),
    };
    match rt.block_on(async { tokio::time::timeout(CAP, notify(&args.summary, &args.body)).await }) {
        Ok(Ok(_id)) => ExitCode::from(exit::OK),
        Ok(Err(Failure::NoBus(e))) => fail(exit::UNAVAILABLE, &format!("no session bus: {e}")),
        Ok(Err(Failure::Refused(e))) => fail(exit::UNAVAILABLE, &format!("Notify failed: {e}")),
        Err(_) => fail(exit::TEMPFAIL, &format!("no answer within {} s", CAP.as_secs())),
    }
}

fn fail(code: u8, reason: &str) -> ExitCode {
    // One line: the daemon logs the last line of it.
    crate::say_err!("{PREFIX}{}", reason.replace('\n', " "));
    ExitCode::from(code)
}

/// One `Notify` on the session bus; the notification's id.
async fn notify(summary: &str, body: &str) -> Result<u32, Failure> {
    let bus = zbus::Connection::session().await.map_err(Failure::NoBus)?;
    let hints: HashMap<&str, zbus::Variant<'_>> = HashMap::new();
    let (summary, body) = (crate::names::printable(summary), crate::names::printable_lines(body));
    let args = ("mcp-reaper", 0u32, "", &*summary, &*body, Vec::<&str>::new(), hints, -1i32);
    let reply = bus.call_method(Some(SERVICE), PATH, Some(SERVICE), "Notify", &args).await.map_err(Failure::Refused)?;
    reply.body().deserialize::<u32>().map_err(Failure::Refused)
}
