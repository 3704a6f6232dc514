//! The shell approval offers scopes from the exact command to the whole program (written by the scopes helper).

use crate::common::{cache_dir, Ws, SESSION};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use toolgate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::{Gate, GateOptions, Observation, Status};

/// Answers every request with one answer and keeps what it was asked.
struct Scripted {
    answer: Answer,
    asked: AtomicUsize,
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Scripted {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.requests.lock().unwrap().push(request);
        let answer = self.answer;
        Box::pin(async move { Some(answer) })
    }
}

async fn setup(answer: Answer) -> (Ws, Gate, Arc<Scripted>) {
    let ws = Ws::new();
    ws.write(".toolgate/policy.toml", "mode = \"ask\"\n");
    for name in ["a", "b"] {
        ws.write(
            &format!("tests/test_{name}.py"),
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        self.assertTrue(True)\n",
        );
    }
    let approver = Arc::new(Scripted {
        answer,
        asked: AtomicUsize::new(0),
        requests: Mutex::new(Vec::new()),
    });
    let gate = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        approver: Some(approver.clone() as Arc<dyn Approver>),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap();
    (ws, gate, approver)
}

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(SESSION, "shell", json!({ "command": command }))
        .await
}

fn ran(o: &Observation) {
    assert_eq!(
        o.status,
        Status::Ok,
        "{}",
        serde_json::to_string(o).unwrap()
    );
}

#[tokio::test]
async fn the_middle_scope_allows_other_runs_of_the_module_only() {
    let (_ws, gate, approver) = setup(Answer::SessionScope(1)).await;
    ran(&sh(&gate, "python3 -m unittest tests/test_a.py").await);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    {
        let requests = approver.requests.lock().unwrap();
        let keys: Vec<&str> = requests[0].scopes.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "shell:python3 -m unittest tests/test_a.py",
                "shell:python3 -m unittest **",
                "shell:python3"
            ]
        );
        assert_eq!(requests[0].key, "shell:python3");
    }
    // Another unittest run: no question.
    ran(&sh(&gate, "python3 -m unittest tests/test_b.py").await);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    // The same program with other words is outside the pattern: asked again.
    ran(&sh(&gate, "python3 -m py_compile tests/test_a.py").await);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    let o = sh(&gate, "python3 -c pass").await;
    assert_eq!(approver.asked.load(Ordering::SeqCst), 3, "{o:?}");
}

#[tokio::test]
async fn the_exact_scope_allows_only_the_identical_command() {
    let (_ws, gate, approver) = setup(Answer::SessionScope(0)).await;
    ran(&sh(&gate, "python3 -m unittest tests/test_a.py").await);
    ran(&sh(&gate, "python3 -m unittest tests/test_a.py").await);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    ran(&sh(&gate, "python3 -m unittest tests/test_b.py").await);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
}
