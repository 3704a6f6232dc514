//! The approval broker: first answer wins, expiry, withdrawal, the console's queue.
#![allow(clippy::unwrap_used)]
use super::*;
use crate::text::unshowable;

fn request(id: &str) -> ApprovalRequest {
    ApprovalRequest {
        id: id.into(),
        session: "s".into(),
        tool: "write".into(),
        key: "write:src/".into(),
        description: "d".into(),
        risk: Risk::Write,
        input_sha256: "h".into(),
        choices: vec![Answer::Once, Answer::Deny],
        scopes: Vec::new(),
        expires_in_secs: 5,
    }
}

#[test]
fn ordinary_names_are_unchanged() {
    for name in [
        "src/a.txt",
        "./",
        "write:src/",
        "dir with space/ü.rs",
        "a\"b",
        "a\\b",
    ] {
        assert_eq!(escape_name(name), name);
    }
}

#[test]
fn names_with_controls_are_escaped_and_quoted() {
    assert_eq!(escape_name("a\nb"), "\"a\\nb\"");
    assert_eq!(escape_name("a\tb\r"), "\"a\\tb\\r\"");
    assert_eq!(escape_name("x\u{1b}[31my"), "\"x\\x1b[31my\"");
    assert_eq!(escape_name("del\u{7f}"), "\"del\\x7f\"");
    assert_eq!(escape_name("abc\u{202e}txt.exe"), "\"abc\\u{202e}txt.exe\"");
    assert_eq!(escape_name("a\u{2028}b"), "\"a\\u{2028}b\"");
    assert_eq!(escape_name("nel\u{85}"), "\"nel\\u{85}\"");
    assert_eq!(escape_name("zw\u{200b}j"), "\"zw\\u{200b}j\"");
    // The same set as the tools' rendering: soft hyphen, invisible operators, tags.
    assert_eq!(escape_name("shy\u{ad}"), "\"shy\\u{ad}\"");
    assert_eq!(escape_name("a\u{206a}b"), "\"a\\u{206a}b\"");
    assert_eq!(escape_name("tag\u{e0041}"), "\"tag\\u{e0041}\"");
    assert_eq!(escape_name("anno\u{fff9}"), "\"anno\\u{fff9}\"");
    // Once quoted, quotes and backslashes are escaped too, so the form is unambiguous.
    assert_eq!(escape_name("a\\n\"\n"), "\"a\\\\n\\\"\\n\"");
    // A name that looks quoted is quoted again.
    assert_eq!(escape_name("\"a\\nb\""), "\"\\\"a\\\\nb\\\"\"");
    // The result is one line of visible characters.
    for name in ["a\nb", "\u{1b}]0;t\u{7}", "\u{2066}x\u{2069}"] {
        let shown = escape_name(name);
        assert!(!shown.chars().any(unshowable), "{shown}");
    }
}

#[test]
fn ansi_and_controls_are_removed() {
    assert_eq!(plain_text("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
    assert_eq!(plain_text("x\u{1b}]0;title\u{7}y"), "xy");
    assert_eq!(plain_text("bell\u{7}\r"), "bell\\u{0007}\\u{000d}");
    assert_eq!(plain_text("a\u{202e}b"), "a\\u{202e}b");
}

#[tokio::test]
async fn first_answer_wins_and_later_ones_are_noops() {
    let broker = Arc::new(Broker::default());
    let b = broker.clone();
    let task = tokio::spawn(async move {
        b.ask(
            None,
            request("r1"),
            Duration::from_secs(5),
            CancelToken::never(),
        )
        .await
    });
    while broker.pending().is_empty() {
        tokio::task::yield_now().await;
    }
    let first = broker.answer("r1", Answer::Deny);
    let second = broker.answer("r1", Answer::Once);
    assert!(first);
    assert!(!second);
    assert_eq!(task.await.unwrap(), Asked::Answered(Answer::Deny));
}

#[tokio::test]
async fn racing_answers_exactly_one_wins() {
    let broker = Arc::new(Broker::default());
    let b = broker.clone();
    let task = tokio::spawn(async move {
        b.ask(
            None,
            request("r2"),
            Duration::from_secs(5),
            CancelToken::never(),
        )
        .await
    });
    while broker.pending().is_empty() {
        tokio::task::yield_now().await;
    }
    let handles: Vec<_> = [Answer::Once, Answer::Deny, Answer::Session, Answer::Once]
        .into_iter()
        .map(|a| {
            let b = broker.clone();
            std::thread::spawn(move || b.answer("r2", a))
        })
        .collect();
    let wins = handles
        .into_iter()
        .filter(|_| true)
        .map(|h| h.join().unwrap())
        .filter(|w| *w)
        .count();
    assert_eq!(wins, 1);
    assert!(matches!(task.await.unwrap(), Asked::Answered(_)));
}

#[tokio::test]
async fn unanswered_request_expires() {
    let broker = Arc::new(Broker::default());
    let answer = broker
        .ask(
            None,
            request("r3"),
            Duration::from_millis(50),
            CancelToken::never(),
        )
        .await;
    assert_eq!(answer, Asked::Expired);
    assert!(!broker.answer("r3", Answer::Once));
}

/// Records what it was asked and what was withdrawn; never answers.
#[derive(Default)]
struct Silent {
    withdrawn: Mutex<Vec<String>>,
}

impl Approver for Silent {
    fn ask(&self, _request: ApprovalRequest) -> AnswerFuture {
        Box::pin(std::future::pending())
    }
    fn withdrawn(&self, request: &ApprovalRequest) {
        self.withdrawn.lock().unwrap().push(request.id.clone());
    }
}

#[tokio::test]
async fn a_withdrawn_request_approves_nothing_and_tells_the_surface() {
    let broker = Arc::new(Broker::default());
    let silent = Arc::new(Silent::default());
    let (b, s) = (broker.clone(), silent.clone());
    let task = tokio::spawn(async move {
        b.ask(
            Some(s),
            request("r4"),
            Duration::from_secs(5),
            CancelToken::never(),
        )
        .await
    });
    while broker.pending().is_empty() {
        tokio::task::yield_now().await;
    }
    assert!(broker.withdraw("r4"));
    assert_eq!(task.await.unwrap(), Asked::Withdrawn);
    assert!(
        !broker.answer("r4", Answer::Once),
        "a late answer is a no-op"
    );
    assert!(!broker.withdraw("r4"));
    assert_eq!(*silent.withdrawn.lock().unwrap(), vec!["r4".to_string()]);
}

#[tokio::test]
async fn the_calls_cancel_flag_withdraws_its_request() {
    let broker = Arc::new(Broker::default());
    let silent = Arc::new(Silent::default());
    let flag = CancelToken::new();
    let (b, s, f) = (broker.clone(), silent.clone(), flag.clone());
    let task = tokio::spawn(async move {
        b.ask(Some(s), request("r5"), Duration::from_secs(5), f)
            .await
    });
    while broker.pending().is_empty() {
        tokio::task::yield_now().await;
    }
    flag.cancel();
    assert_eq!(task.await.unwrap(), Asked::Withdrawn);
    assert!(broker.pending().is_empty());
    assert!(!broker.answer("r5", Answer::Once));
    assert_eq!(silent.withdrawn.lock().unwrap().len(), 1);
    // A call already cancelled is never asked.
    let answer = broker
        .ask(None, request("r6"), Duration::from_secs(5), flag)
        .await;
    assert_eq!(answer, Asked::Withdrawn);
}

#[tokio::test]
async fn the_console_answer_is_taken_only_for_the_input_it_was_shown() {
    let broker = Arc::new(Broker::default());
    let mut changes = broker.subscribe();
    assert!(!broker.watched());
    let watching = broker.watch();
    assert!(broker.watched());
    let b = broker.clone();
    let task = tokio::spawn(async move {
        b.ask(
            None,
            request("r1"),
            Duration::from_secs(5),
            CancelToken::never(),
        )
        .await
    });
    changes.changed().await.unwrap();
    let queue = broker.queue();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].request.id, "r1");
    assert_eq!(
        broker.answer_bound("r1", "other", Answer::Once),
        Err(BoundRefusal::Mismatch("r1".into()))
    );
    // `session` was not offered (the request offers once and deny).
    assert!(matches!(
        broker.answer_bound("r1", "h", Answer::Session),
        Err(BoundRefusal::NotOffered { .. })
    ));
    assert_eq!(
        broker.queue().len(),
        1,
        "a refused answer leaves the request waiting"
    );
    assert_eq!(broker.answer_bound("r1", "h", Answer::Once), Ok(()));
    assert_eq!(task.await.unwrap(), Asked::Answered(Answer::Once));
    assert_eq!(
        broker.answer_bound("r1", "h", Answer::Once),
        Err(BoundRefusal::Gone("r1".into()))
    );
    assert!(broker.queue().is_empty());
    drop(watching);
    assert!(!broker.watched());
}

#[test]
fn answers_read_and_write_their_wire_names() {
    for a in [
        Answer::Once,
        Answer::Session,
        Answer::Project,
        Answer::Deny,
        Answer::SessionScope(0),
        Answer::SessionScope(7),
    ] {
        assert_eq!(Answer::parse(&a.name()), Some(a));
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            serde_json::json!(a.name())
        );
        let back: Answer = serde_json::from_value(serde_json::json!(a.name())).unwrap();
        assert_eq!(back, a);
    }
    assert_eq!(Answer::SessionScope(2).as_str(), "session");
    assert_eq!(Answer::SessionScope(2).name(), "session:2");
    for bad in [
        "session:",
        "session:-1",
        "session: 1",
        "session:x",
        "session:300",
        "Once",
        "",
    ] {
        assert_eq!(Answer::parse(bad), None, "{bad}");
    }
    assert!(serde_json::from_value::<Answer>(serde_json::json!("sessionscope")).is_err());
}

#[tokio::test]
async fn a_scope_answer_is_taken_only_when_offered() {
    let scoped = |id: &str, choices: Vec<Answer>| ApprovalRequest {
        choices,
        scopes: vec![
            Scope {
                key: "shell:ls -la".into(),
                allows: "only this exact command".into(),
            },
            Scope {
                key: "shell:ls".into(),
                allows: "any ls command".into(),
            },
        ],
        ..request(id)
    };
    let broker = Arc::new(Broker::default());
    let _watching = broker.watch();
    let mut changes = broker.subscribe();
    let b = broker.clone();
    let r = scoped("r1", vec![Answer::Once, Answer::Session, Answer::Deny]);
    let task = tokio::spawn(async move {
        b.ask(None, r, Duration::from_secs(5), CancelToken::never())
            .await
    });
    changes.changed().await.unwrap();
    assert!(matches!(
        broker.answer_bound("r1", "h", Answer::SessionScope(2)),
        Err(BoundRefusal::NotOffered { .. })
    ));
    assert_eq!(
        broker.answer_bound("r1", "h", Answer::SessionScope(1)),
        Ok(())
    );
    assert_eq!(
        task.await.unwrap(),
        Asked::Answered(Answer::SessionScope(1))
    );
    // Without `session` among the choices, no scope is offered either.
    let b = broker.clone();
    let r = scoped("r2", vec![Answer::Once, Answer::Deny]);
    let task = tokio::spawn(async move {
        b.ask(None, r, Duration::from_secs(5), CancelToken::never())
            .await
    });
    while broker.queue().is_empty() {
        changes.changed().await.unwrap();
    }
    assert!(matches!(
        broker.answer_bound("r2", "h", Answer::SessionScope(0)),
        Err(BoundRefusal::NotOffered { .. })
    ));
    // No scopes at all: nothing to pick.
    assert!(!Answer::SessionScope(0).offered(&request("r3")));
    assert!(broker.withdraw("r2"));
    assert_eq!(task.await.unwrap(), Asked::Withdrawn);
}

#[test]
fn a_sessions_owner_is_the_tag_a_server_put_in_its_name() {
    let tag = "0123456789abcdef";
    assert_eq!(session_owner(&format!("mcp-{tag}-00ff")), Some(tag));
    assert_eq!(session_owner(&format!("conv-{tag}-1234")), Some(tag));
    assert_eq!(session_owner(&format!("console-{tag}-undo")), Some(tag));
    // Untagged names belong to no client token.
    for s in [
        "mcp-0123456789abcdef",
        "console",
        "cli-1",
        &format!("call-{tag}-x"),
        &format!("mcp-{}-x", "0123456789ABCDEF"),
        &format!("mcp-{tag}0-x"),
        &format!("mcp-{tag}-"),
    ] {
        assert_eq!(session_owner(s), None, "{s}");
    }
}

#[test]
fn a_client_console_watches_only_its_own_sessions() {
    let broker = Broker::default();
    let (mine, theirs) = ("a".repeat(16), "b".repeat(16));
    let (s_mine, s_theirs) = (format!("mcp-{mine}-1"), format!("mcp-{theirs}-1"));
    assert!(!broker.watched_for(&s_mine));
    let w = broker.watch_owner(&mine);
    assert!(broker.watched() && broker.watched_for(&s_mine));
    assert!(!broker.watched_for(&s_theirs) && !broker.watched_for("cli-1"));
    let p = broker.watch();
    assert!(broker.watched_for(&s_theirs) && broker.watched_for("cli-1"));
    drop(p);
    drop(w);
    assert!(!broker.watched() && !broker.watched_for(&s_mine));
}
