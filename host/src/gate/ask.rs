//! Stage 9 of the ladder: ask. The request goes to the approval broker (every surface may
//! answer, the first answer wins); the answer allows once, for the session (saved in the state
//! database) or for the project (saved in the grants file, never past the tool's ceiling).

use super::approval::{
    escape_name, offered, plain_text, Answer, ApprovalRequest, Approver, Asked, Scope,
};
use super::decision::{Code, Decision, Refusal, Stage};
use super::observe;
use super::preview;
use super::validate::{Paths, Validated};
use super::{Gate, Surface};
use crate::cancel::CancelToken;
use crate::key::CallKey;
use crate::tools::registry::PathUse;
use crate::tools::{Builtin, Ceiling, ToolInfo};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::Arc;

impl Gate {
    /// Ask `approver` and every surface watching the broker's queue (none of either: headless,
    /// a refusal), and act on the answer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn ask(
        &self,
        session: &str,
        info: &ToolInfo,
        key: &CallKey,
        v: &Validated,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
        forced: bool,
    ) -> Result<Decision, Refusal> {
        let name = info.name.as_str();
        let key_text = key.to_string();
        // No surface of the call's own: a console watching the queue can still answer.
        // (Only a console that can see this session counts: another client's cannot answer.)
        if approver.is_none() && !self.broker.watched_for(session) {
            return Err(headless(self.surface, info, &key_text, forced, call_id));
        }
        let choices = choices(info, forced);
        let scopes = if info.builtin_kind() == Some(Builtin::Shell) {
            scopes::shell_scopes(key, &self.exec_host.confinement())
        } else {
            Vec::new()
        };
        let expiry = self.approval_expiry;
        let request = ApprovalRequest {
            id: format!("{call_id}-approval"),
            session: session.to_string(),
            tool: name.to_string(),
            key: key_text.clone(),
            description: plain_text(&describe_call(info, v)),
            risk: info.risk,
            input_sha256: hex::encode(Sha256::digest(v.input.to_string().as_bytes())),
            choices: choices.clone(),
            scopes: scopes.clone(),
            expires_in_secs: expiry.as_secs(),
        };
        let answer = match self
            .broker
            .ask(approver, request, expiry, cancel.clone())
            .await
        {
            Asked::Withdrawn => return Err(observe::cancelled(name, call_id, Stage::Ask, &format!("the call was cancelled while it waited for approval of `{key_text}`; the request was withdrawn and nothing ran"))),
            // The call was cancelled as the answer came: the answer approves nothing (no grant
            // is saved either).
            Asked::Answered(_) if cancel.is_cancelled() => {
                return Err(observe::cancelled(name, call_id, Stage::Ask, &format!("the call was cancelled as `{key_text}` was approved; the approval was not used and nothing ran")))
            }
            Asked::Answered(a) => Some(a),
            Asked::Expired => None,
        };
        let decided = answered_in(answer, &choices, &scopes, info, &key_text, call_id)?;
        let session_key = match answer {
            Some(Answer::Session) => Some(key_text.as_str()),
            // `answered_in` took it only when that scope was offered.
            Some(Answer::SessionScope(i)) => scopes.get(usize::from(i)).map(|s| s.key.as_str()),
            _ => None,
        };
        if let Some(grant) = session_key {
            if let Err(e) = self.state.add_session_grant(session, grant, None) {
                tracing::warn!(error = %e, session, key = %grant, "saving a session grant in the state database failed; this call runs, the next one asks again");
            }
        }
        if answer == Some(Answer::Project) {
            if let Err(problem) = self.project_grants.add(&key_text, "prompt") {
                return Err(observe::error(
                    name,
                    call_id,
                    Stage::Ask,
                    Code::GrantsFile,
                    problem.to_string(),
                    Some("fix .toolgate/grants.toml and answer again".into()),
                ));
            }
        }
        Ok(decided)
    }
}

/// The answers offered: once and session always, project only below a project ceiling and
/// when no `ask` rule forces the prompt.
pub(crate) fn choices(info: &ToolInfo, forced: bool) -> Vec<Answer> {
    let mut choices = vec![Answer::Once, Answer::Session];
    if info.ceiling == Ceiling::Project && !forced {
        choices.push(Answer::Project);
    }
    choices.push(Answer::Deny);
    choices
}

/// No one can approve here: a refusal whose hint says how to allow it instead.
pub(crate) fn headless(
    surface: Surface,
    info: &ToolInfo,
    key_text: &str,
    forced: bool,
    call_id: &str,
) -> Refusal {
    let rule = format!("[[rules]] key = \"{key_text}\" decision = \"allow\"");
    let hint = match surface {
        // A person at the command line: the flag to pass.
        Surface::Cli if info.ceiling == Ceiling::Session => format!(
            "no one can approve here (headless); allow it for this run with `--grant '{key_text}'`"
        ),
        Surface::Cli if forced => format!("an `ask` rule covers `{key_text}` and no one can approve here (headless); change that rule, or run where a person can answer"),
        Surface::Cli => format!(
            "no one can approve here (headless); allow it for this run with `--grant '{key_text}'`, or for the project with a rule in .toolgate/policy.toml: {rule}"
        ),
        // A model: what to ask its user for (it can pass no flag itself).
        Surface::McpHttp => format!(
            "this MCP client cannot ask its user (no elicitation) and no toolgate console is open; stop and ask the user to open the console (the address `toolgate serve --http` printed) and then retry, so they can approve `{key_text}` there{}",
            if forced { "".to_string() } else { format!(", or to restart the server with `--grant '{key_text}'`") }
        ),
        Surface::McpStdio if forced => format!("an `ask` rule covers `{key_text}` and this MCP client cannot ask its user (no elicitation); stop and tell the user, who can change that rule or use a client that supports elicitation"),
        Surface::McpStdio => format!(
            "this MCP client cannot ask its user (no elicitation); stop and ask the user to allow `{key_text}`: they can restart `toolgate serve` with `--grant '{key_text}'`{}, or use a client that supports elicitation",
            if info.ceiling == Ceiling::Session { String::new() } else { format!(", or add to .toolgate/policy.toml: {rule}") }
        ),
    };
    observe::deny(
        &info.name,
        call_id,
        Stage::Ask,
        "headless".into(),
        format!("`{key_text}` needs approval and there is no approval surface"),
        hint,
    )
}

/// [`answered_in`] for a request that offered no scopes.
#[cfg(test)]
pub(crate) fn answered(
    answer: Option<Answer>,
    choices: &[Answer],
    info: &ToolInfo,
    key_text: &str,
    call_id: &str,
) -> Result<Decision, Refusal> {
    answered_in(answer, choices, &[], info, key_text, call_id)
}

/// What an answer (`None`: the request expired) decides, for a request that offered `choices`
/// and the session `scopes`. Saving a grant is the caller's.
pub(crate) fn answered_in(
    answer: Option<Answer>,
    choices: &[Answer],
    scopes: &[Scope],
    info: &ToolInfo,
    key_text: &str,
    call_id: &str,
) -> Result<Decision, Refusal> {
    let name = info.name.as_str();
    let user = |how: &str| Ok(Decision::allow(Stage::Ask, format!("user: {how}")));
    match answer {
        Some(a) if !offered(a, choices, scopes) => {
            if a == Answer::Project && info.ceiling == Ceiling::Session {
                return Err(observe::ceiling_violation(
                    name,
                    call_id,
                    Stage::Ask,
                    "user".into(),
                    false,
                    format!("`{name}` runs real host processes and can only be allowed per session; `project` is not an answer for `{key_text}`"),
                    "answer `once` or `session`".into(),
                ));
            }
            Err(observe::deny(
                name,
                call_id,
                Stage::Ask,
                "user".into(),
                format!("`{}` was not one of the offered answers", a.name()),
                "answer with one of the offered choices".into(),
            ))
        }
        Some(Answer::Once) => user("once"),
        Some(Answer::Session) => user("session"),
        Some(Answer::SessionScope(i)) => match scopes.get(usize::from(i)) {
            Some(scope) => user(&format!("session ({})", escape_name(&scope.key))),
            None => user("session"),
        },
        Some(Answer::Project) => user("project"),
        Some(Answer::Deny) => Err(observe::deny(
            name,
            call_id,
            Stage::Ask,
            "user".into(),
            format!("the user denied `{key_text}`"),
            "do something else, or ask the user what they want".into(),
        )),
        None => Err(observe::deny(
            name,
            call_id,
            Stage::Ask,
            "expired".into(),
            format!("the approval request for `{key_text}` expired unanswered"),
            "ask again when the user is there".into(),
        )),
    }
}

/// Most bytes of a JSON input shown (the approval covers the whole input by its hash).
const MAX_INPUT_SHOWN: usize = 4000;

/// What the user is asked to approve: the tool, where (workspace-relative paths), and what
/// happens — for `write`, `edit` and `multiedit` the diff of the file (`preview.rs`), for other
/// tools the input with every path field shown workspace-relative (`.` for the root).
fn describe_call(info: &ToolInfo, v: &Validated) -> String {
    let mut text = describe_input(info, &v.input, &v.paths);
    // A git command that asks only because it could print committed content says so: the
    // person should know a "read-only looking" command can show a secret's history.
    if info.builtin_kind() == Some(Builtin::Shell) {
        let command = v.input.get("command").and_then(Value::as_str).unwrap_or("");
        if let crate::exec::lex::Lexed::Simple(argv) = crate::exec::lex::lex(command) {
            if let Some(why) = crate::exec::policy::git_blob_printer(&argv) {
                text.push_str(&format!("\n  asks because {why}"));
            }
        }
    }
    if let Some(plan) = &v.lsp_plan {
        text.push('\n');
        text.push_str(&super::lsp::describe_plan(plan));
    }
    text
}

/// [`describe_call`] for `input` (paths as the guest opens them) and its checked `paths`.
pub(crate) fn describe_input(info: &ToolInfo, input: &Value, paths: &Paths) -> String {
    let mut text = format!("{} ({} tool)", escape_name(&info.name), info.risk.as_str());
    for (field, usage, p) in paths {
        let verb = match usage {
            PathUse::Read => "reads",
            PathUse::Write if p.host.exists() => "overwrites/changes",
            PathUse::Write => "creates",
        };
        text.push_str(&format!(
            "\n  {verb} {} ({})",
            escape_name(&p.rel),
            escape_name(field)
        ));
    }
    let change = match info.builtin_kind() {
        Some(kind @ (Builtin::Write | Builtin::Edit | Builtin::MultiEdit)) => paths
            .iter()
            .find(|(field, _, _)| field == "path")
            .and_then(|(_, _, p)| preview::describe(kind, input, p)),
        _ => None,
    };
    if let Some(change) = change {
        text.push('\n');
        text.push_str(&change);
        return text;
    }
    // The model's input with the paths as the user knows them, not as the guest opens them.
    let mut input = input.clone();
    for (field, _, p) in paths {
        if let Some(value) = input.get_mut(field) {
            *value = Value::String(p.rel.clone());
        }
    }
    let mut input = serde_json::to_string_pretty(&input).unwrap_or_default();
    if input.len() > MAX_INPUT_SHOWN {
        let mut cut = MAX_INPUT_SHOWN;
        while !input.is_char_boundary(cut) {
            cut -= 1;
        }
        input.truncate(cut);
        input.push_str(
            "\n  … (input cut for display; the approval covers the whole input by its hash)",
        );
    }
    text.push_str(&format!("\ninput:\n{input}"));
    text
}

#[path = "scopes.rs"]
mod scopes;

#[cfg(test)]
#[path = "ask_tests.rs"]
mod tests;
