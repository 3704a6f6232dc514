//! `download`: GET a URL into a workspace file. The body is streamed into a temporary file in
//! the target's directory (its name chosen by the host, which removes it after the call
//! whatever happened) and renamed over the target only when it arrived whole within the cap.
//!
//! The host decides everything else before this runs: the call is keyed `download:<host>`,
//! the target passed the same checks as a `write` (scope, deny-list, `.toolgate/`, read before
//! overwrite), and the network grant lets through only the approved host (and, on redirects,
//! hosts already allowed for `download`), resolving and connecting itself with the same
//! private-address rules as `fetch`.
//!
//! Error codes: `bad-input`, `bad-url`, `exists`, `is-directory`, `too-large`, `bad-status`,
//! `write-error`, and the `wasi:http` codes of network failures (`http-request-denied`,
//! `destination-ip-prohibited`, `connection-terminated`, `connection-read-timeout`, ...).

pub mod save;
pub mod transport;

use save::{download_to, Failed, Landed, Open};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use toolgate_guest::http::Url;
use toolgate_guest::{
    json, names, Context, Descriptor, Output, PathAccess, Report, Risk, Tool, ToolError, Value,
};

/// Body bytes allowed when `max_bytes` is not given (100 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 100 << 20;
/// The largest `max_bytes` accepted (1 GiB).
pub const MAX_MAX_BYTES: u64 = 1 << 30;
/// The variable naming the temporary file (a sandbox path beside the target), set by the host.
pub const TEMP_ENV: &str = "TOOLGATE_DOWNLOAD_TEMP";
/// How every temporary file's name starts (the host's and the fallback's).
pub const TEMP_PREFIX: &str = ".toolgate-download-";
/// Headers sent with every request: the bytes as stored (no compression the client would
/// have to undo), and a name, since some servers refuse requests without one.
const REQUEST_HEADERS: &[(&str, &str)] = &[
    ("accept-encoding", "identity"),
    ("user-agent", "toolgate-download/0.1"),
];

struct Download;

impl Tool for Download {
    fn describe() -> Descriptor {
        Descriptor::new(
            "download",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "Absolute http:// or https:// URL to GET."},
                    "path": {"type": "string", "description": "The workspace file to write (missing directories are created)."},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_BYTES, "description": "The most body bytes to accept; a longer body writes nothing. Default 104857600 (100 MiB)."},
                    "overwrite": {"type": "boolean", "description": "Replace an existing file (read it first). Default false."}
                },
                "required": ["url", "path"],
                "additionalProperties": false
            }),
            Risk::Network,
        )
        .path("path", PathAccess::Write)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let temp = std::env::var(TEMP_ENV).ok();
        run(&input, cx, temp.as_deref(), &mut transport::open).map(Report::into_output)
    }
}

toolgate_guest::register_tool!(Download);

fn bad_input(message: impl Into<String>) -> ToolError {
    ToolError::new("bad-input", message)
}

/// What one call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The URL, trimmed.
    pub url: String,
    /// The target as the sandbox sees it.
    pub path: PathBuf,
    /// The cap on the body.
    pub max_bytes: u64,
    /// Whether an existing file may be replaced.
    pub overwrite: bool,
}

/// The input, checked.
pub fn parse_input(input: &Value) -> Result<Ask, ToolError> {
    let url = match input.get("url").and_then(Value::as_str) {
        Some(u) if !u.trim().is_empty() => u.trim().to_string(),
        _ => {
            return Err(bad_input(
                "`url` is required: an absolute http:// or https:// URL",
            ))
        }
    };
    Url::parse(&url).map_err(|e| ToolError::new(&e.code, e.message))?;
    let path = match input.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => return Err(bad_input("`path` is required: the workspace file to write")),
    };
    let max_bytes = match input.get("max_bytes") {
        None | Some(Value::Null) => DEFAULT_MAX_BYTES,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_MAX_BYTES).contains(&n) => n,
            _ => {
                return Err(bad_input(format!(
                    "`max_bytes` must be an integer from 1 to {MAX_MAX_BYTES}, not {v}"
                )))
            }
        },
    };
    let overwrite = match input.get("overwrite") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(bad_input(format!(
                "`overwrite` must be true or false, not {other}"
            )))
        }
    };
    Ok(Ask {
        url,
        path,
        max_bytes,
        overwrite,
    })
}

/// The temporary file for `target`: the host's (`given`) when it is a plain name of ours in
/// the target's directory, else one made up here.
pub fn temp_path(target: &Path, given: Option<&str>) -> PathBuf {
    let dir = target.parent().unwrap_or(Path::new("."));
    if let Some(given) = given.map(Path::new) {
        let ours = given
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(TEMP_PREFIX) && n.ends_with(".part"));
        if ours && given.parent() == Some(dir) {
            return given.to_path_buf();
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    dir.join(format!("{TEMP_PREFIX}{:016x}.part", nanos as u64))
}

/// Whether `path` exists now: `Err` for a directory (or a failed look).
fn existing(path: &Path, rel: &str) -> Result<bool, ToolError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Err(ToolError::new(
            "is-directory",
            format!(
                "{} is a directory; give the path of the file to write, e.g. {}/NAME",
                names::display(rel),
                names::display(rel)
            ),
        )),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(ToolError::io(rel, &e)),
    }
}

fn exists_error(rel: &str) -> ToolError {
    ToolError::new(
        "exists",
        format!(
            "{} already exists and `overwrite` is not set; nothing was downloaded. Pass `overwrite: true` to replace it (it must have been read in this session), or choose another path",
            names::display(rel)
        ),
    )
}

/// The tool's logic over any transport (`open`); `temp` is the host's temporary file name.
pub fn run(
    input: &Value,
    cx: &Context,
    temp: Option<&str>,
    open: &mut Open<'_>,
) -> Result<Report, ToolError> {
    let ask = parse_input(input)?;
    let rel = cx.relative(&ask.path);
    let shown = names::display(&rel).into_owned();
    let existed = existing(&ask.path, &rel)?;
    if existed && !ask.overwrite {
        return Err(exists_error(&rel));
    }
    let temp = temp_path(&ask.path, temp);
    let landed = download_to(&ask.url, REQUEST_HEADERS, ask.max_bytes, &temp, open)
        .map_err(|f| failed(f, &ask, &shown))?;
    place(&temp, &ask, &rel, existed).inspect_err(|_| {
        let _ = fs::remove_file(&temp);
    })?;
    Ok(report(&ask, &rel, &shown, &landed, existed))
}

/// Rename the complete temporary file over the target (never over a file that appeared
/// meanwhile unless `overwrite`).
fn place(temp: &Path, ask: &Ask, rel: &str, existed: bool) -> Result<(), ToolError> {
    if !ask.overwrite && existing(&ask.path, rel)? {
        return Err(exists_error(rel));
    }
    if existed {
        // Keep the replaced file's permissions where the sandbox allows it.
        if let Ok(meta) = fs::metadata(&ask.path) {
            let _ = fs::set_permissions(temp, meta.permissions());
        }
    }
    fs::rename(temp, &ask.path).map_err(|e| {
        ToolError::new(
            "write-error",
            format!(
                "the download arrived whole but could not be put in place at {}: {}; nothing was changed",
                names::display(rel),
                toolgate_guest::plain_io_error(&e)
            ),
        )
    })
}

/// A failure as the model reads it: what went wrong, and that nothing was written.
fn failed(f: Failed, ask: &Ask, shown: &str) -> ToolError {
    let mut message = f.message;
    while message.ends_with('.') || message.ends_with(';') {
        message.pop();
    }
    message.push_str(&format!(". Nothing was written to {shown}."));
    match f.code.as_str() {
        "too-large" => message.push_str(&format!(
            " If the file is expected to be this large, raise `max_bytes` (up to {MAX_MAX_BYTES}); the policy's `[network] max_response_bytes`, when it sets one, caps it too."
        )),
        "connection-terminated" | "http-protocol-error" | "http-response-incomplete" => {
            message.push_str(" Try again; if it keeps breaking off, the server may be cutting long transfers.")
        }
        c if c.contains("timeout") => message.push_str(
            " Try again; a large file may need a higher `[limits] timeout_ms` in the policy (the whole download must fit in the call's time limit).",
        ),
        _ => {}
    }
    ToolError::new(&f.code, message).data(json!({
        "url": ask.url,
        "path": shown,
        "code": f.code,
        "status": f.status,
        "received_bytes": f.received,
        "max_bytes": ask.max_bytes,
        "written": false,
    }))
}

fn report(ask: &Ask, rel: &str, shown: &str, landed: &Landed, existed: bool) -> Report {
    let ctype = landed.header("content-type").map(str::to_string);
    let encoding = landed
        .header("content-encoding")
        .filter(|e| !e.trim().eq_ignore_ascii_case("identity"))
        .map(str::to_string);
    let mut summary = format!(
        "downloaded {} to {shown} ({} bytes, {})",
        ask.url,
        landed.bytes,
        ctype.as_deref().unwrap_or("no content-type")
    );
    if !landed.redirects.is_empty() {
        summary.push_str(&format!(
            " after {} redirect{} to {}",
            landed.redirects.len(),
            if landed.redirects.len() == 1 { "" } else { "s" },
            landed.final_url
        ));
    }
    if existed {
        summary.push_str(", replacing the old file");
    }
    let mut content = format!(
        "{} {shown}: {} bytes.\nsha256: {}\ncontent-type: {}\nfrom: {} (status {})\n",
        if existed { "Replaced" } else { "Created" },
        landed.bytes,
        landed.sha256,
        ctype.as_deref().unwrap_or("(none)"),
        landed.final_url,
        landed.status
    );
    if let Some(e) = &encoding {
        content.push_str(&format!(
            "Note: the server sent the body with content-encoding `{e}`; the file holds it as sent (still encoded).\n"
        ));
    }
    Report {
        summary,
        content,
        truncated: false,
        totals: vec![("bytes", landed.bytes, landed.bytes)],
        data: json!({
            "path": rel,
            "bytes": landed.bytes,
            "sha256": landed.sha256,
            "content_type": ctype,
            "content_encoding": encoding,
            "url": ask.url,
            "final_url": landed.final_url,
            "redirects": landed.redirects,
            "status": landed.status,
            "created": !existed,
            "overwritten": existed,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
