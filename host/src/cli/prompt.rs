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
#[path = "prompt_tests.rs"]
mod tests;
