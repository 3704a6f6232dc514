//! The terminal approval surface: shows what will run, in plain text, and reads the answer.

use std::io::{BufRead, Write};
use toolgate::gate::approval::{plain_text, Answer, AnswerFuture, ApprovalRequest, Approver};

/// Asks on the controlling terminal (stderr for the question, stdin for the answer).
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ask_blocking(&request))
                .await
                .ok()
                .flatten()
        })
    }
}

fn ask_blocking(request: &ApprovalRequest) -> Option<Answer> {
    let mut err = std::io::stderr().lock();
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
    let _ = writeln!(
        err,
        "\ntoolgate: approve `{}`? (risk: {})\n{}\n\nkey: {}   input sha256: {}\nanswer {}: ",
        plain_text(&request.key),
        request.risk.as_str(),
        plain_text(&request.description),
        plain_text(&request.key),
        &request.input_sha256[..16.min(request.input_sha256.len())],
        choices.join(" / ")
    );
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    let answer = match line.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Answer::Once,
        "s" | "session" => Answer::Session,
        "p" | "project" => Answer::Project,
        _ => Answer::Deny,
    };
    Some(answer)
}
