//! `toolgate serve` (MCP on stdio or streamable HTTP, with the console) and `toolgate console`.

use super::warn_ignored;
use anyhow::{Context, Result};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use toolgate::gate::Surface;
use toolgate::mcp::http::{HttpOptions, Listening};
use toolgate::{Gate, GateOptions};

/// `toolgate serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Listen for streamable HTTP on ADDR (e.g. 127.0.0.1:8765; port 0 picks one) instead
    /// of stdio. Only loopback addresses unless --allow-remote.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Allow --http on a non-loopback address (anyone who can reach it can run tools).
    #[arg(long, requires = "http")]
    allow_remote: bool,
    /// With --allow-remote: also accept this name in Host/Origin headers. Repeatable.
    #[arg(long = "allowed-host", value_name = "NAME", requires = "allow_remote")]
    allowed_hosts: Vec<String>,
    /// With --http: the bearer tokens clients must send, one a line (mode 0600; made with
    /// one fresh token if missing). Default: $XDG_STATE_HOME/toolgate/http-token.
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// Sign MCP 2026-07-28 approval states with the key in FILE (yours, mode 0600, e.g.
    /// `openssl rand -hex 32`), so several `serve` processes behind one load balancer
    /// accept each other's approval rounds. Default: a random key per process. Same as
    /// $TOOLGATE_MCP_STATE_KEY_FILE.
    #[arg(long, value_name = "FILE")]
    pub state_key_file: Option<PathBuf>,
    /// Shorthand for `--grant` of every write tool (write, edit, multiedit).
    #[arg(long)]
    allow_write: bool,
    /// Also serve the component in this file (a test or local tool).
    #[arg(long = "component", value_name = "FILE")]
    components: Vec<PathBuf>,
}

/// `toolgate console`.
#[derive(clap::Args)]
pub struct ConsoleArgs {
    /// Listen on ADDR (a loopback address; port 0 picks a free one). MCP clients may connect
    /// at http://ADDR/mcp too.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    http: SocketAddr,
    /// The bearer tokens, as for `serve --http` (the console's address carries the first).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print the address only; do not start a browser.
    #[arg(long)]
    no_open: bool,
}

/// Open the gate for serving: approvals come from each MCP client (elicitation) and the
/// console, never from this terminal.
async fn open(
    opts: GateOptions,
    surface: Surface,
    allow_writes: bool,
    components: Vec<PathBuf>,
) -> Result<Arc<Gate>> {
    let gate = Gate::open(GateOptions {
        approver: None,
        surface,
        allow_writes,
        extra_components: components,
        ..opts
    })
    .await
    .context("cannot open the gate")?;
    // A server knows every tool before its first client (and says now what it refused).
    gate.preload().await;
    warn_ignored(&gate);
    Ok(Arc::new(gate))
}

/// The HTTP options from the flags and the policy's `[http]` table.
fn http_options(gate: &Gate, addr: SocketAddr, token_file: Option<PathBuf>) -> HttpOptions {
    let mut options = HttpOptions::new(addr);
    options.token_file = token_file;
    let http = gate.policy().http;
    if let Some(n) = http.max_sessions {
        options.max_sessions = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(n) = http.max_connections {
        options.max_connections = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(secs) = http.session_idle_secs {
        options.session_idle = std::time::Duration::from_secs(secs);
    }
    options
}

/// What `serve --http` and `console` print once they listen.
fn announce(up: &Listening) {
    eprintln!(
        "toolgate: clients must send the header `Authorization: Bearer <token>`; the token is in {} ({})",
        up.token_file.display(),
        if up.created { "created now" } else { "the existing file" }
    );
    eprintln!(
        "toolgate: the console (keep this address private: it carries the token): {}",
        up.console
    );
    eprintln!(
        "toolgate: serving MCP on http://{}{}",
        up.addr,
        toolgate::mcp::http::MCP_PATH
    );
}

/// `toolgate serve`.
pub(super) async fn serve(opts: GateOptions, args: ServeArgs) -> Result<ExitCode> {
    let surface = match args.http {
        Some(_) => Surface::McpHttp,
        None => Surface::McpStdio,
    };
    let gate = open(opts, surface, args.allow_write, args.components).await?;
    match args.http {
        None => {
            if std::io::stdin().is_terminal() {
                eprintln!(
                    "toolgate: serving MCP on stdio for {}; start it from an MCP client (see the README, \"Use it from an agent\"), or press Ctrl-D to stop",
                    gate.workspace().root().display()
                );
            }
            toolgate::mcp::serve_stdio(gate).await?
        }
        Some(addr) => {
            let mut options = http_options(&gate, addr, args.token_file);
            options.allow_remote = args.allow_remote;
            options.allowed_hosts = args.allowed_hosts;
            toolgate::mcp::http::serve_http(gate, options, announce).await?
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `toolgate console`.
pub(super) async fn console(opts: GateOptions, args: ConsoleArgs) -> Result<ExitCode> {
    let gate = open(opts, Surface::McpHttp, false, Vec::new()).await?;
    let options = http_options(&gate, args.http, args.token_file);
    let no_open = args.no_open;
    toolgate::mcp::http::serve_http(gate, options, |up| {
        announce(up);
        if !no_open {
            open_browser(&up.console);
        }
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// Start the desktop's browser on `url` when there is a desktop (`$BROWSER`, else
/// `xdg-open`); say so when there is none, and never wait for it.
fn open_browser(url: &str) {
    let desktop =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    let program = std::env::var_os("BROWSER")
        .filter(|b| !b.is_empty())
        .or_else(|| desktop.then(|| "xdg-open".into()));
    let Some(program) = program else {
        eprintln!("toolgate: no desktop here to open a browser on; open the console's address above in yours");
        return;
    };
    let started = std::process::Command::new(&program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match started {
        // Reaped in the background: the browser may run for as long as the console does.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!(
            "toolgate: could not start {} ({e}); open the console's address above yourself",
            program.to_string_lossy()
        ),
    }
}
