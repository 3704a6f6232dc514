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
            Answer::Session | Answer::SessionScope(_) => "[s]ession".to_string(),
            Answer::Project => "[p]roject (saved to .toolgate/grants.toml)".to_string(),
            Answer::Deny => "[d]eny".to_string(),
        })
        .collect();
    let mut choices = choices.join(" / ");
    // The narrower session scopes, numbered, then the widest (`s`).
    let offers_session = request.choices.contains(&Answer::Session);
    if offers_session && request.scopes.len() > 1 {
        let n = request.scopes.len() - 1;
        let mut lines = String::from("\nfor the session:");
        for (i, scope) in request.scopes.iter().enumerate() {
            let tag = if i == n {
                "[s]ession".to_string()
            } else {
                format!("[{}]", i + 1)
            };
            lines.push_str(&format!(
                "\n  {tag} {} — {}",
                escape_name(&scope.key),
                plain_text(&scope.allows)
            ));
        }
        choices = format!("{}\nanswer {choices} / 1-{n}", &lines[1..]);
    } else {
        choices = format!("answer {choices}");
    }
    let key = escape_name(&request.key);
    format!(
        "\ntoolgate: approve `{key}`? (tool: {}, risk: {})\n{}\n\nkey: {key}   input sha256: {}\n{choices}: ",
        escape_name(&request.tool),
        request.risk.as_str(),
        plain_text(&request.description),
        &request.input_sha256[..16.min(request.input_sha256.len())],
    )
}

/// The answer typed on the terminal for `request` (anything unknown is `deny`): `1`, `2`, …
/// pick the narrower session scopes shown.
pub fn parse_typed(request: &ApprovalRequest, line: &str) -> Answer {
    let typed = line.trim().to_ascii_lowercase();
    match typed.as_str() {
        "o" | "once" | "y" | "yes" => return Answer::Once,
        "s" | "session" => return Answer::Session,
        "p" | "project" => return Answer::Project,
        _ => {}
    }
    let narrower = request.scopes.len().saturating_sub(1);
    match typed.parse::<usize>() {
        Ok(n) if n >= 1 && n <= narrower && request.choices.contains(&Answer::Session) => {
            u8::try_from(n - 1)
                .map(Answer::SessionScope)
                .unwrap_or(Answer::Deny)
        }
        _ => Answer::Deny,
    }
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
    Some(parse_typed(request, &line))
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
            scopes: Vec::new(),
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
    fn a_shell_request_numbers_its_narrower_scopes() {
        use toolgate::gate::approval::Scope;
        let mut r = request("shell:python3", "shell (exec tool)");
        r.scopes = vec![
            Scope {
                key: "shell:python3 -m unittest t.py".into(),
                allows: "only this exact command".into(),
            },
            Scope {
                key: "shell:python3 -m unittest **".into(),
                allows: "also any other unittest run".into(),
            },
            Scope {
                key: "shell:python3".into(),
                allows: "any python3 command".into(),
            },
        ];
        let text = render(&r);
        assert!(
            text.contains("\n  [1] shell:python3 -m unittest t.py — only this exact command\n"),
            "{text}"
        );
        assert!(
            text.contains("\n  [2] shell:python3 -m unittest ** — also any other unittest run\n"),
            "{text}"
        );
        assert!(
            text.contains("\n  [s]ession shell:python3 — any python3 command\n"),
            "{text}"
        );
        assert!(
            text.ends_with("answer [o]nce / [s]ession / [d]eny / 1-2: "),
            "{text}"
        );
        assert_eq!(parse_typed(&r, "1\n"), Answer::SessionScope(0));
        assert_eq!(parse_typed(&r, " 2 "), Answer::SessionScope(1));
        assert_eq!(parse_typed(&r, "3"), Answer::Deny);
        assert_eq!(parse_typed(&r, "0"), Answer::Deny);
        assert_eq!(parse_typed(&r, "s"), Answer::Session);
        assert_eq!(parse_typed(&request("write:src/", "d"), "1"), Answer::Deny);
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
