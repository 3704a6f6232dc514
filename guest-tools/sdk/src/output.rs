//! What a tool says about itself and what it returns.

use crate::__wit::toolgate::tool::types as wit;
use serde_json::Value;

/// The most dangerous thing a tool does. The host derives annotations and the permission stage
/// from it; it never grants anything by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Risk {
    /// Reads or searches the workspace and never changes it.
    ReadOnly,
    /// Creates or changes files in the workspace.
    Write,
    /// Runs host processes.
    Exec,
    /// Talks to the network.
    Network,
}

/// How a tool uses a path argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathAccess {
    /// The tool reads the path.
    Read,
    /// The tool creates or changes the file at the path.
    Write,
}

/// A tool's self-description.
#[derive(Clone, Debug)]
pub struct Descriptor {
    name: String,
    description: String,
    schema: Value,
    risk: Risk,
    paths: Vec<(String, PathAccess)>,
}

impl Descriptor {
    /// A descriptor with no path fields.
    pub fn new(name: &str, description: &str, schema: Value, risk: Risk) -> Self {
        Descriptor {
            name: name.to_string(),
            description: description.to_string(),
            schema,
            risk,
            paths: Vec::new(),
        }
    }

    /// Declare that the top-level input field `field` holds a path used with `access`.
    pub fn path(mut self, field: &str, access: PathAccess) -> Self {
        self.paths.push((field.to_string(), access));
        self
    }

    pub(crate) fn into_wit(self) -> wit::Descriptor {
        wit::Descriptor {
            name: self.name,
            description: self.description,
            input_schema: self.schema.to_string(),
            risk: match self.risk {
                Risk::ReadOnly => wit::Risk::ReadOnly,
                Risk::Write => wit::Risk::Write,
                Risk::Exec => wit::Risk::Exec,
                Risk::Network => wit::Risk::Network,
            },
            path_fields: self
                .paths
                .into_iter()
                .map(|(name, access)| wit::PathField {
                    name,
                    access: match access {
                        PathAccess::Read => wit::PathAccess::Read,
                        PathAccess::Write => wit::PathAccess::Write,
                    },
                })
                .collect(),
        }
    }
}

/// A successful call's result.
#[derive(Clone, Debug)]
pub struct Output {
    summary: String,
    content: String,
    truncated: bool,
    totals: Vec<(String, u64, u64)>,
    data: Value,
}

impl Output {
    /// An output with a one-line summary and the text the model reads.
    pub fn new(summary: impl Into<String>, content: impl Into<String>) -> Self {
        Output {
            summary: summary.into(),
            content: content.into(),
            truncated: false,
            totals: Vec::new(),
            data: Value::Null,
        }
    }

    /// Mark the content as a preview of something larger.
    pub fn truncated(mut self, truncated: bool) -> Self {
        self.truncated = truncated;
        self
    }

    /// Record that `seen` units were seen and `returned` of them are in the content.
    pub fn total(mut self, unit: &str, seen: u64, returned: u64) -> Self {
        self.totals.push((unit.to_string(), seen, returned));
        self
    }

    /// Attach tool-specific structured data.
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// The output as [`ERROR_OUTPUT_KEY`] carries it: `summary`, `content`, `truncated`,
    /// `totals` (`[{unit, seen, returned}]`) and `data`.
    pub(crate) fn to_json(&self) -> Value {
        let totals: Vec<Value> = self
            .totals
            .iter()
            .map(|(unit, seen, returned)| {
                serde_json::json!({"unit": unit, "seen": seen, "returned": returned})
            })
            .collect();
        serde_json::json!({
            "summary": self.summary,
            "content": self.content,
            "truncated": self.truncated,
            "totals": totals,
            "data": self.data,
        })
    }

    pub(crate) fn into_wit(self) -> wit::Output {
        wit::Output {
            summary: self.summary,
            content: self.content,
            truncated: self.truncated,
            totals: self
                .totals
                .into_iter()
                .map(|(unit, seen, returned)| wit::Total {
                    unit,
                    seen,
                    returned,
                })
                .collect(),
            data: self.data.to_string(),
        }
    }
}

/// The key of a tool error's `data` under which it carries the output of a call that failed
/// after producing it ([`ToolError::with_output`]). The host shows that output in the `error`
/// observation as it would have on success.
pub(crate) const ERROR_OUTPUT_KEY: &str = "$output";

/// A failed call: a stable code and a message that tells the model what to do.
#[derive(Clone, Debug)]
pub struct ToolError {
    code: String,
    message: String,
    data: Value,
    /// Boxed: most errors carry none, and a `Result`'s error should stay small.
    output: Option<Box<Output>>,
}

impl ToolError {
    /// An error with a machine-readable `code` and a message for the model.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ToolError {
            code: code.to_string(),
            message: message.into(),
            data: Value::Null,
            output: None,
        }
    }

    /// An error for a call that failed after producing `output` (a command that exited
    /// non-zero): the observation is an `error` with this `code` and `message` (the reason),
    /// and it shows `output` — summary, content, `truncated`, totals and data — exactly as a
    /// successful call would, so the model still sees what the call printed.
    pub fn with_output(code: &str, message: impl Into<String>, output: Output) -> Self {
        ToolError {
            output: Some(Box::new(output)),
            ..ToolError::new(code, message)
        }
    }

    /// An error for a failed filesystem operation on `path` (workspace-relative, exact): the
    /// message names it as [`crate::names::display`] prints it.
    pub fn io(path: &str, err: &std::io::Error) -> Self {
        let code = match err.kind() {
            std::io::ErrorKind::NotFound => "not-found",
            std::io::ErrorKind::PermissionDenied => "permission-denied",
            std::io::ErrorKind::AlreadyExists => "already-exists",
            _ => "io",
        };
        let shown = crate::names::display(path);
        let message = match err.kind() {
            std::io::ErrorKind::NotFound => format!("not found: {shown}"),
            _ => format!("{shown}: {}", crate::ioerr::plain_io_error(err)),
        };
        ToolError::new(code, message)
    }

    /// [`ToolError::io`] for the sandbox path `at` (workspace-relative `path`): when it is
    /// missing and a sibling has a close name, the message ends `(did you mean <sibling>?)`.
    pub fn io_at(
        cx: &crate::Context,
        at: &std::path::Path,
        path: &str,
        err: &std::io::Error,
    ) -> Self {
        let mut e = ToolError::io(path, err);
        if err.kind() == std::io::ErrorKind::NotFound {
            e.message.push_str(&crate::ioerr::hint(cx, at, path));
        }
        e
    }

    /// Attach structured detail. With [`ToolError::with_output`] it is the output's data that
    /// the observation shows; set it there instead.
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    pub(crate) fn into_wit(self) -> wit::ToolError {
        // The released WIT's tool-error has no room for output: it travels in `data`, under a
        // key the host knows (an older host shows it as plain data, which is still honest).
        let data = match self.output {
            Some(out) => serde_json::json!({ ERROR_OUTPUT_KEY: out.to_json() }),
            None => self.data,
        };
        wit::ToolError {
            code: self.code,
            message: self.message,
            data: data.to_string(),
        }
    }
}

/// Collects whole lines of content up to a byte budget, so a tool can stop early and say so.
#[derive(Debug)]
pub struct Budget {
    max: usize,
    buf: String,
    full: bool,
}

impl Budget {
    /// A budget of `max` bytes.
    pub fn new(max: usize) -> Self {
        Budget {
            max,
            buf: String::new(),
            full: false,
        }
    }

    /// Append `line` and a newline if it fits; returns false (and stays full) when it does not.
    pub fn push_line(&mut self, line: &str) -> bool {
        if self.full || self.buf.len() + line.len() + 1 > self.max {
            self.full = true;
            return false;
        }
        self.buf.push_str(line);
        self.buf.push('\n');
        true
    }

    /// Whether a line has been refused.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Bytes collected so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing has been collected.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The collected text.
    pub fn into_string(self) -> String {
        self.buf
    }
}

/// A call's result as plain fields, before it becomes an [`Output`] (whose fields are private):
/// a tool's logic can return it so native unit tests can look at every part.
#[derive(Debug, Clone)]
pub struct Report {
    /// One line saying what happened.
    pub summary: String,
    /// The text the model reads.
    pub content: String,
    /// Whether `content` is a preview of something larger.
    pub truncated: bool,
    /// `(unit, seen, returned)`.
    pub totals: Vec<(&'static str, u64, u64)>,
    /// Tool-specific structured data.
    pub data: serde_json::Value,
}

impl Report {
    /// The [`Output`] the host receives.
    pub fn into_output(self) -> Output {
        let mut out = Output::new(self.summary, self.content).truncated(self.truncated);
        for (unit, seen, returned) in self.totals {
            out = out.total(unit, seen, returned);
        }
        out.data(self.data)
    }
}
