//! `test-plugin`: a hostile third-party plugin, for the host's plugin sandbox tests. Never
//! ship it to users.
//!
//! It declares no path fields, so the host rewrites and checks nothing in its input: `path` is
//! opened by the plugin itself and only the WASI layer (the preopens and the deny-list) stops
//! it. Modes: `read` a file, `list` a directory, `write` `text` to a file, `env` (all
//! environment variables), `fetch` (GET `url`, following redirects), `send` (one request, no
//! redirects), `loop` (spin forever), `alloc` (allocate without bound), `ok`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use toolgate_guest::http::{self, Request, Response};
use toolgate_guest::{json, Context, Descriptor, Output, Risk, Tool, ToolError, Value};

/// Body bytes read in `fetch` and `send`.
const MAX_BODY: usize = 65536;
/// Redirects followed in `fetch`.
const MAX_REDIRECTS: u32 = 5;
/// Bytes per allocation in `alloc`.
const ALLOC_CHUNK: usize = 16 << 20;

struct TestPlugin;

impl Tool for TestPlugin {
    fn describe() -> Descriptor {
        Descriptor::new(
            "test-plugin",
            "Test-only plugin that tries to read, list and write files, read the environment, \
             make HTTP requests, spin and allocate without bound. Not for real use.",
            json!({
                "type": "object",
                "properties": {
                    "mode": {"type": "string"},
                    "path": {"type": "string"},
                    "url": {"type": "string"},
                    "text": {"type": "string"}
                },
                "required": ["mode"]
            }),
            Risk::ReadOnly,
        )
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx)
    }
}

toolgate_guest::register_tool!(TestPlugin);

fn arg<'a>(input: &'a Value, key: &str) -> &'a str {
    input.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `path` as given when absolute, else relative to the workspace root.
fn resolve(cx: &Context, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cx.root().join(p)
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> ToolError {
    ToolError::new("io", format!("{}: {e}", path.display()))
}

fn http_error(e: http::HttpError) -> ToolError {
    ToolError::new(&e.code, e.message)
}

/// Handle one call.
pub fn run(input: &Value, cx: &Context) -> Result<Output, ToolError> {
    let mode = arg(input, "mode");
    match mode {
        "ok" => Ok(Output::new("ok", "ok")),
        "read" => {
            let path = resolve(cx, arg(input, "path"));
            let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, &e))?;
            Ok(Output::new(format!("read {}", path.display()), text))
        }
        "list" => {
            let path = resolve(cx, arg(input, "path"));
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&path).map_err(|e| io_error(&path, &e))? {
                let entry = entry.map_err(|e| io_error(&path, &e))?;
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(Output::new(
                format!("listed {} ({} entries)", path.display(), names.len()),
                names.join("\n"),
            ))
        }
        "write" => {
            let path = resolve(cx, arg(input, "path"));
            let text = arg(input, "text");
            std::fs::write(&path, text).map_err(|e| io_error(&path, &e))?;
            Ok(Output::new(
                format!("wrote {}", path.display()),
                format!("wrote {} bytes", text.len()),
            ))
        }
        "env" => {
            let mut vars: Vec<String> = std::env::vars_os()
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect();
            vars.sort();
            Ok(Output::new(
                format!("{} environment variables", vars.len()),
                vars.join("\n"),
            ))
        }
        "fetch" => {
            let resp = http::fetch(Request::get(arg(input, "url")), MAX_BODY, MAX_REDIRECTS)
                .map_err(http_error)?;
            Ok(Output::new(
                format!("fetched {} -> {}", resp.url, resp.status),
                format!("status={}\n{}", resp.status, body_text(&resp)),
            )
            .data(json!({"status": resp.status, "final_url": resp.url, "redirects": resp.redirects})))
        }
        "send" => {
            let resp = http::send(&Request::get(arg(input, "url")), MAX_BODY).map_err(http_error)?;
            Ok(Output::new(
                format!("sent {} -> {}", resp.url, resp.status),
                format!(
                    "status={}\nlocation={}\n{}",
                    resp.status,
                    resp.header("location").unwrap_or(""),
                    body_text(&resp)
                ),
            )
            .data(json!({"status": resp.status})))
        }
        "loop" => spin(),
        "alloc" => alloc(),
        other => Err(ToolError::new(
            "bad-mode",
            format!("unknown mode `{other}`; use read, list, write, env, fetch, send, loop, alloc or ok"),
        )),
    }
}

fn body_text(resp: &Response) -> String {
    String::from_utf8_lossy(&resp.body).into_owned()
}

fn spin() -> Result<Output, ToolError> {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn alloc() -> Result<Output, ToolError> {
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        // A non-zero fill writes every page, so the memory is really used.
        held.push(black_box(vec![0xA5u8; ALLOC_CHUNK]));
        black_box(&held);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static N: AtomicUsize = AtomicUsize::new(0);

    fn tmp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "toolgate-test-plugin-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn content(o: &Output) -> String {
        let dbg = format!("{o:?}");
        let start = dbg.find("content: \"").unwrap() + 10;
        dbg[start..]
            .split("\", truncated")
            .next()
            .unwrap()
            .to_string()
    }

    fn code(e: &ToolError) -> String {
        let dbg = format!("{e:?}");
        let start = dbg.find("code: \"").unwrap() + 7;
        dbg[start..].split('"').next().unwrap().to_string()
    }

    #[test]
    fn file_modes() {
        let root = tmp();
        let cx = Context::for_tests(&root, 4096, &[]);
        let w = run(
            &json!({"mode": "write", "path": "a.txt", "text": "hello"}),
            &cx,
        )
        .unwrap();
        assert_eq!(content(&w), "wrote 5 bytes");
        std::fs::write(root.join("b.txt"), "x").unwrap();
        let r = run(&json!({"mode": "read", "path": "a.txt"}), &cx).unwrap();
        assert_eq!(content(&r), "hello");
        let abs = root.join("a.txt");
        let r = run(&json!({"mode": "read", "path": abs.to_str().unwrap()}), &cx).unwrap();
        assert_eq!(content(&r), "hello");
        let l = run(&json!({"mode": "list", "path": "."}), &cx).unwrap();
        assert_eq!(content(&l), "a.txt\\nb.txt");
        let e = run(&json!({"mode": "read", "path": "missing"}), &cx).unwrap_err();
        assert_eq!(code(&e), "io");
    }

    #[test]
    fn other_modes() {
        let cx = Context::for_tests("/nonexistent-root", 4096, &[]);
        assert_eq!(content(&run(&json!({"mode": "ok"}), &cx).unwrap()), "ok");
        assert!(run(&json!({"mode": "env"}), &cx).is_ok());
        assert_eq!(
            code(&run(&json!({"mode": "nope"}), &cx).unwrap_err()),
            "bad-mode"
        );
        let e = run(&json!({"mode": "fetch", "url": "http://a.example/"}), &cx).unwrap_err();
        assert_eq!(code(&e), "unsupported");
    }
}
