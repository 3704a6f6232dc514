//! The terminal approval surface: shows what will run, in plain text, and reads the answer.
//!
//! Names (the key, the tool) are shown escaped (`escape_name`): a newline or escape sequence in
//! a path cannot add a line to the prompt or repaint it. A request withdrawn while it is shown
//! (its call was cancelled) is said to be withdrawn, and the answer typed after that is ignored.

use std::io::{BufRead, Write};
use std::sync::Mutex;
use toolgate::gate::approval::{
    escape_name, plain_text, Answer, AnswerFuture, ApprovalRequest, Approver,
};

/// Asks on the controlling terminal (stderr for the question, stdin for the answer).
pub struct TerminalApprover;

/// The id of the request the terminal shows now (there is one terminal).
static SHOWING: Mutex<Option<String>> = Mutex::new(None);

fn showing() -> std::sync::MutexGuard<'static, Option<String>> {
    SHOWING.lock().unwrap_or_else(|p| p.into_inner())
}

impl Approver for TerminalApprover {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ask_blocking(&request))
                .await
                .ok()
                .flatten()
        })
    }

    fn withdrawn(&self, request: &ApprovalRequest) {
        let mut showing = showing();
        if showing.as_deref() != Some(request.id.as_str()) {
            return;
        }
        *showing = None;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "\n{}", withdrawn_text(request));
        let _ = err.flush();
    }
}

/// What the terminal shows for `request`, up to the answer.
pub fn render(request: &ApprovalRequest) -> String {
    let choices: Vec<String> = request
        .choices
        .iter()
        .map(|c| match c {
            Answer::Once => "[o]nce".to_string(),
            Answer::Session => "[s]ession".to_string(),
            Answer::Project => "[p]roject (saved to .toolgate/grants.toml)".to_string(),
            Answer::Deny => "[d]eny".to_string(),
        })
        .collect();
    let key = escape_name(&request.key);
    format!(
        "\ntoolgate: approve `{key}`? (tool: {}, risk: {})\n{}\n\nkey: {key}   input sha256: {}\nanswer {}: ",
        escape_name(&request.tool),
        request.risk.as_str(),
        plain_text(&request.description),
        &request.input_sha256[..16.min(request.input_sha256.len())],
        choices.join(" / ")
    )
}

/// The line saying `request` was withdrawn.
pub fn withdrawn_text(request: &ApprovalRequest) -> String {
    format!(
        "toolgate: the request to approve `{}` was withdrawn (the call was cancelled); nothing will run, and an answer typed now is ignored",
        escape_name(&request.key)
    )
}

fn ask_blocking(request: &ApprovalRequest) -> Option<Answer> {
    *showing() = Some(request.id.clone());
    {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", render(request));
        let _ = err.flush();
    }
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    // Withdrawn while the user typed: the line answers nothing.
    let still_shown = {
        let mut showing = showing();
        let shown = showing.as_deref() == Some(request.id.as_str());
        if shown {
            *showing = None;
        }
        shown
    };
    read.ok()?;
    if !still_shown {
        return None;
    }
    let answer = match line.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Answer::Once,
        "s" | "session" => Answer::Session,
        "p" | "project" => Answer::Project,
        _ => Answer::Deny,
    };
    Some(answer)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use toolgate::tools::Risk;

    fn request(key: &str, description: &str) -> ApprovalRequest {
        ApprovalRequest {
            id: "call-1-approval".into(),
            session: "cli".into(),
            tool: "write".into(),
            key: key.into(),
            description: description.into(),
            risk: Risk::Write,
            input_sha256: "0123456789abcdef0123".into(),
            choices: vec![Answer::Once, Answer::Session, Answer::Deny],
            expires_in_secs: 300,
        }
    }

    #[test]
    fn an_ordinary_request_reads_as_before() {
        let text = render(&request(
            "write:src/",
            "write (write tool)\n  creates src/a.txt (path)",
        ));
        assert!(
            text.contains("approve `write:src/`? (tool: write, risk: write)"),
            "{text}"
        );
        assert!(text.contains("\n  creates src/a.txt (path)\n"), "{text}");
        assert!(
            text.contains("key: write:src/   input sha256: 0123456789abcdef\n"),
            "{text}"
        );
        assert!(
            text.ends_with("answer [o]nce / [s]ession / [d]eny: "),
            "{text}"
        );
    }

    #[test]
    fn a_path_with_a_newline_or_escape_cannot_add_a_line() {
        // What the gate hands over: the description names the path escaped (see
        // `describe_call`), the key is the raw parent directory.
        let key = "write:x\nkey: write:src/\u{1b}[2K/";
        let description = format!(
            "write (write tool)\n  creates {} (path)",
            escape_name("x\nkey: write:src/\u{1b}[2K/a\u{202e}txt")
        );
        let text = render(&request(key, &description));
        assert!(
            text.contains("key: \"write:x\\nkey: write:src/\\x1b[2K/\"   input"),
            "{text}"
        );
        assert!(
            text.contains("creates \"x\\nkey: write:src/\\x1b[2K/a\\u{202e}txt\" (path)"),
            "{text}"
        );
        assert_eq!(
            text.lines().filter(|l| l.starts_with("key:")).count(),
            1,
            "{text}"
        );
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(!text.contains('\u{202e}'));
        let gone = withdrawn_text(&request(key, ""));
        assert!(
            gone.contains("`\"write:x\\nkey: write:src/\\x1b[2K/\"` was withdrawn"),
            "{gone}"
        );
        assert!(!gone.contains('\n'));
    }

    #[test]
    fn withdrawn_is_said_only_for_the_request_shown() {
        let r = request("write:src/", "d");
        *showing() = Some("another".into());
        TerminalApprover.withdrawn(&r);
        assert_eq!(showing().as_deref(), Some("another"));
        *showing() = Some(r.id.clone());
        TerminalApprover.withdrawn(&r);
        assert_eq!(*showing(), None);
    }
}
