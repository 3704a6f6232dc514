//! `fetch`: one HTTP(S) request, following up to [`MAX_REDIRECTS`] redirects, with the body
//! as text.
//!
//! The host only lets requests to the hosts on this tool's network allowlist through and
//! refuses private, loopback and link-local addresses; a refused request is a tool error with
//! the `wasi:http` error code (`http-request-denied`, `destination-ip-prohibited`, ...). At
//! most `max_bytes` of the body are read. An HTML page is converted to Markdown (or plain
//! text, or left as HTML: `format`) here, inside the component, so a hostile page is parsed
//! under the call's memory and time limits; other text (JSON, plain text, ...) passes through
//! unchanged; a binary body is described, never shown. The result is cut to the output
//! budget and says when it was cut. A non-2xx status is still a successful call: the status is
//! in the summary, the content and `data`.

mod body;
mod html;
mod plain;
mod sink;

pub use body::Kind;
pub use html::{
    convert, convert_by, Converted, Cut, Limit, Mode, MAX_DEPTH, MAX_ELEMENTS, MAX_PARSE_DEPTH,
    PARSE_TIME,
};

use std::time::{Duration, Instant};

/// How long into a call an HTML parse may go on (the call's default deadline is 30 s, and the
/// Markdown still has to be written after the parse).
pub const CALL_PARSE_LIMIT: Duration = Duration::from_secs(16);
/// The least time a parse gets, however long the download took.
pub const MIN_PARSE_TIME: Duration = Duration::from_secs(1);

/// When the parse of a page fetched by a call that started at `call_started` must stop:
/// [`PARSE_TIME`] from now, but no later than [`CALL_PARSE_LIMIT`] into the call, and never
/// sooner than [`MIN_PARSE_TIME`] from now.
pub fn parse_deadline(call_started: Instant) -> Instant {
    let now = Instant::now();
    (now + PARSE_TIME)
        .min(call_started + CALL_PARSE_LIMIT)
        .max(now + MIN_PARSE_TIME)
}

use toolgate_guest::http::{self, Request, Response};
use toolgate_guest::{json, serde_json, Context, Descriptor, Output, Risk, Tool, ToolError, Value};

/// Body bytes read when `max_bytes` is not given.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 20;
/// The largest `max_bytes` accepted.
pub const MAX_MAX_BYTES: u64 = 10 << 20;
/// Redirects followed before giving up.
pub const MAX_REDIRECTS: u32 = 5;
/// The methods accepted.
pub const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/// The `format` values accepted.
pub const FORMATS: &[&str] = &["markdown", "text", "raw"];
/// Bytes kept free in the output budget for the closing notes.
const NOTE_RESERVE: usize = 512;

struct Fetch;

impl Tool for Fetch {
    fn describe() -> Descriptor {
        Descriptor::new(
            "fetch",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "Absolute http:// or https:// URL."},
                    "method": {"type": "string", "enum": METHODS, "description": "HTTP method. Default GET."},
                    "headers": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Request headers, e.g. {\"accept\": \"application/json\"}."
                    },
                    "body": {"type": "string", "description": "Request body (for POST, PUT, PATCH, DELETE)."},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_BYTES, "description": "The most body bytes to read. Default 1048576."},
                    "format": {"type": "string", "enum": FORMATS, "description": "How an HTML page is returned: `markdown` (default), `text` (plain text, no markup) or `raw` (the HTML as sent). Other bodies are returned as they are."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
            Risk::Network,
        )
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx).map(Report::into_output)
    }
}

toolgate_guest::register_tool!(Fetch);

pub use toolgate_guest::Report;

fn bad_input(message: impl Into<String>) -> ToolError {
    ToolError::new("bad-input", message)
}

/// The request and `max_bytes` an input asks for.
pub fn parse_input(input: &Value) -> Result<(Request, usize), ToolError> {
    let url = match input.get("url").and_then(Value::as_str) {
        Some(u) if !u.trim().is_empty() => u.trim().to_string(),
        _ => {
            return Err(bad_input(
                "`url` is required: an absolute http:// or https:// URL",
            ))
        }
    };
    http::Url::parse(&url).map_err(|e| ToolError::new(&e.code, e.message))?;
    let method = match input.get("method") {
        None | Some(Value::Null) => "GET".to_string(),
        Some(Value::String(m)) if METHODS.contains(&m.to_ascii_uppercase().as_str()) => {
            m.to_ascii_uppercase()
        }
        Some(other) => {
            return Err(bad_input(format!(
                "`method` {other} is not supported; use one of {}",
                METHODS.join(", ")
            )))
        }
    };
    let mut headers = Vec::new();
    match input.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, value) in map {
                match value.as_str() {
                    Some(v) => headers.push((name.clone(), v.to_string())),
                    None => {
                        return Err(bad_input(format!(
                            "header `{name}` must be a string, not {value}"
                        )))
                    }
                }
            }
        }
        Some(other) => {
            return Err(bad_input(format!(
                "`headers` must be an object of strings, not {other}"
            )))
        }
    }
    let body = match input.get("body") {
        None | Some(Value::Null) => None,
        Some(Value::String(b)) => Some(b.clone().into_bytes()),
        Some(other) => return Err(bad_input(format!("`body` must be a string, not {other}"))),
    };
    if body.is_some() && (method == "GET" || method == "HEAD") {
        return Err(bad_input(format!(
            "a {method} request cannot carry a body; use POST, PUT, PATCH or DELETE, or drop `body`"
        )));
    }
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
    let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    Ok((
        Request {
            method,
            url,
            headers,
            body,
        },
        max_bytes,
    ))
}

/// How an HTML page is to be returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Converted to Markdown (the default).
    Markdown,
    /// Converted to plain text.
    Text,
    /// The HTML as it came.
    Raw,
}

/// The `format` an input asks for (`None`: not given, Markdown for HTML).
pub fn parse_format(input: &Value) -> Result<Option<Format>, ToolError> {
    match input.get("format") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(f)) => match f.trim().to_ascii_lowercase().as_str() {
            "markdown" | "md" => Ok(Some(Format::Markdown)),
            "text" | "txt" => Ok(Some(Format::Text)),
            "raw" | "html" => Ok(Some(Format::Raw)),
            _ => Err(bad_input(format!(
                "`format` \"{f}\" is not known; use one of {}",
                FORMATS.join(", ")
            ))),
        },
        Some(other) => Err(bad_input(format!(
            "`format` must be a string (one of {}), not {other}",
            FORMATS.join(", ")
        ))),
    }
}

/// The tool's logic, callable outside a component (where every request fails with
/// `unsupported`).
pub fn run(input: &Value, cx: &Context) -> Result<Report, ToolError> {
    let started = Instant::now();
    let (req, max_bytes) = parse_input(input)?;
    let format = parse_format(input)?;
    let (method, url) = (req.method.clone(), req.url.clone());
    let resp = http::fetch(req, max_bytes, MAX_REDIRECTS).map_err(|e| {
        ToolError::new(&e.code, e.message.clone())
            .data(json!({"url": url, "method": method, "code": e.code}))
    })?;
    Ok(render_by(
        &method,
        &url,
        max_bytes,
        &resp,
        format,
        cx.max_output_bytes(),
        parse_deadline(started),
    ))
}

/// Whether a body looks binary: a NUL byte in its first 8 KiB, or mostly bytes that are not
/// UTF-8 text.
pub fn looks_binary(body: &[u8]) -> bool {
    body::looks_binary(body, false)
}

/// The media type of a `content-type` value, without parameters: `text/html`.
pub fn media_type(content_type: Option<&str>) -> Option<String> {
    let t = content_type?.split(';').next()?.trim().to_ascii_lowercase();
    (!t.is_empty()).then_some(t)
}

/// The end of the longest prefix of `body` that fits in `budget` bytes, cut before a UTF-8
/// continuation byte and, when there is one in the second half, just after a newline.
pub fn cut_point(body: &[u8], budget: usize) -> usize {
    if body.len() <= budget {
        return body.len();
    }
    let mut cut = budget;
    while cut > 0 && body.get(cut).is_some_and(|b| b & 0xC0 == 0x80) {
        cut -= 1;
    }
    match body[..cut].iter().rposition(|&b| b == b'\n') {
        Some(i) if i + 1 >= cut / 2 => i + 1,
        _ => cut,
    }
}

/// The body as text cut to `budget` bytes: `(text, body bytes kept, whether it was cut)`.
fn passthrough(resp: &Response, charset: Option<&str>, budget: usize) -> (String, u64, bool) {
    if body::is_latin1(charset) && std::str::from_utf8(&resp.body).is_err() {
        let text = body::decode(&resp.body, charset);
        let cut = cut_point(text.as_bytes(), budget);
        let kept = text[..cut].chars().count() as u64;
        return (text[..cut].to_string(), kept, cut < text.len());
    }
    let cut = cut_point(&resp.body, budget);
    let mut text = String::from_utf8_lossy(&resp.body[..cut]).into_owned();
    let mut kept = cut as u64;
    if text.len() > budget {
        // Invalid UTF-8 grew into replacement characters: cut the text itself.
        let mut end = budget;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        kept = kept.min(end as u64);
    }
    (text, kept, cut < resp.body.len())
}

fn push_note(content: &mut String, note: &str) {
    if !content.is_empty() && !content.ends_with('\n') {
        content.push('\n');
    }
    content.push_str(note);
    content.push('\n');
}

/// Turn a response into the tool's output for a `method` request to `url`, an HTML page in
/// `format` (`None`: Markdown).
pub fn render(
    method: &str,
    url: &str,
    max_bytes: usize,
    resp: &Response,
    format: Option<Format>,
    max_output_bytes: usize,
) -> Report {
    let deadline = Instant::now() + PARSE_TIME;
    render_by(
        method,
        url,
        max_bytes,
        resp,
        format,
        max_output_bytes,
        deadline,
    )
}

/// [`render`], an HTML parse stopping at `parse_deadline`.
pub fn render_by(
    method: &str,
    url: &str,
    max_bytes: usize,
    resp: &Response,
    format: Option<Format>,
    max_output_bytes: usize,
    parse_deadline: Instant,
) -> Report {
    let seen = resp.body_bytes_seen.max(resp.body.len() as u64);
    let ctype = media_type(resp.header("content-type"));
    let charset = body::declared_charset(resp.header("content-type"), &resp.body);
    let kind = if resp.body.is_empty() {
        Kind::Text
    } else {
        body::classify(ctype.as_deref(), charset.as_deref(), &resp.body)
    };
    let binary = matches!(kind, Kind::Binary(_));
    let budget = max_output_bytes.saturating_sub(NOTE_RESERVE).max(1);

    let mut content;
    let returned: u64;
    let mut cut_by_budget = false;
    let mut applied = "raw";
    let mut converted: Option<Converted> = None;
    let mut totals = Vec::new();
    match &kind {
        Kind::Binary(what) => {
            content = format!(
                "[binary body: {seen} bytes of {what}; not shown (fetch returns text only)]\n"
            );
            returned = 0;
        }
        _ if resp.body.is_empty() => {
            content = if resp.truncated {
                String::new()
            } else {
                "[empty body]\n".to_string()
            };
            returned = 0;
        }
        Kind::Html if format != Some(Format::Raw) => {
            let mode = if format == Some(Format::Text) {
                applied = "text";
                Mode::Text
            } else {
                applied = "markdown";
                Mode::Markdown
            };
            let page = body::decode(&resp.body, charset.as_deref());
            let conv = html::convert_by(&page, &resp.url, mode, parse_deadline);
            let total = conv.text.len();
            let cut = cut_point(conv.text.as_bytes(), budget);
            content = conv.text[..cut].to_string();
            cut_by_budget = cut < total;
            if cut_by_budget {
                push_note(
                    &mut content,
                    &format!(
                        "[truncated: showing the first {cut} of {total} bytes of the page as {applied} (output limit {max_output_bytes} bytes)]"
                    ),
                );
            }
            if let Some(c) = conv.cut {
                let why = match c.limit {
                    Limit::Depth => format!("nests HTML elements more than {MAX_PARSE_DEPTH} deep"),
                    Limit::Elements => format!("builds more than {MAX_ELEMENTS} HTML elements"),
                    Limit::Time => "took too long to parse".to_string(),
                };
                push_note(
                    &mut content,
                    &format!(
                        "[page cut: it {why}, so only its first {} of {} bytes were converted]",
                        c.parsed_bytes,
                        resp.body.len()
                    ),
                );
            }
            returned = conv.cut.map_or(resp.body.len(), |c| c.parsed_bytes) as u64;
            totals.push(("output_bytes", total as u64, cut as u64));
            converted = Some(conv);
        }
        _ => {
            let (text, kept, cut) = passthrough(resp, charset.as_deref(), budget);
            content = text;
            returned = kept;
            cut_by_budget = cut;
            if cut {
                push_note(
                    &mut content,
                    &format!(
                        "[truncated: showing the first {returned} of {} body bytes (output limit {max_output_bytes} bytes)]",
                        resp.body.len()
                    ),
                );
            }
        }
    }
    if resp.truncated {
        push_note(
            &mut content,
            &format!(
                "[body cut at max_bytes={max_bytes}: the response is longer; read {seen} bytes. Raise max_bytes (up to {MAX_MAX_BYTES}) to read more]"
            ),
        );
    }
    let page_cut = converted.as_ref().is_some_and(|c| c.cut.is_some());
    let truncated = resp.truncated || cut_by_budget || page_cut || (binary && seen > 0);

    let mut summary = format!(
        "{method} {url} -> {} ({seen}{} bytes, {})",
        resp.status,
        if resp.truncated { "+" } else { "" },
        ctype.as_deref().unwrap_or("no content-type")
    );
    if converted.is_some() {
        summary.push_str(&format!(" as {applied}"));
    }
    if !resp.redirects.is_empty() {
        summary.push_str(&format!(
            " after {} redirect{} to {}",
            resp.redirects.len(),
            if resp.redirects.len() == 1 { "" } else { "s" },
            resp.url
        ));
    }
    if truncated {
        summary.push_str(if binary {
            ", binary not shown"
        } else {
            ", cut"
        });
    }

    let mut headers = serde_json::Map::new();
    for (name, value) in &resp.headers {
        let name = name.to_ascii_lowercase();
        match headers.get_mut(&name) {
            Some(Value::String(prev)) => {
                prev.push_str(", ");
                prev.push_str(value);
            }
            _ => {
                headers.insert(name, Value::String(value.clone()));
            }
        }
    }
    totals.insert(0, ("bytes", seen, returned));
    let conv = converted.unwrap_or_default();
    Report {
        summary,
        content,
        truncated,
        totals,
        data: json!({
            "status": resp.status,
            "method": method,
            "url": url,
            "final_url": resp.url,
            "redirects": resp.redirects,
            "headers": headers,
            "content_type": ctype,
            "binary": binary,
            "format": if binary { "binary" } else { applied },
            "title": conv.title,
            "body_bytes": seen,
            "returned_bytes": returned,
            "cut_at_max_bytes": resp.truncated,
            "page_cut_at_bytes": conv.cut.map(|c| c.parsed_bytes),
            "nesting_flattened": conv.flattened,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod convert_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod hostile_tests;
