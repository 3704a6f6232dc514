//! The `fetch` built-in: keyed on the host, allowed hosts only, redirects re-checked, private
//! addresses refused unless the policy names them (with the port: an entry without one means
//! port 80/443 only). Every request stays on loopback.

use crate::common::*;
use crate::plugins::serve_http;
use serde_json::json;
use toolgate::{Gate, Status};

async fn gate(ws: &Ws, grants: &[&str]) -> Gate {
    gate_granting(ws, grants).await
}

#[tokio::test]
async fn fetch_is_keyed_on_the_host_and_asks_for_it() {
    let port = serve_http();
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\n"),
    );
    let g = gate(&ws, &[]).await;
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert!(
        o.hint.as_deref().unwrap().contains("fetch:127.0.0.1"),
        "{o:#?}"
    );
    let o = call(&g, "fetch", json!({"url": "file:///etc/passwd"})).await;
    assert_eq!(code(&o), "bad-url", "{o:#?}");
}

#[tokio::test]
async fn fetch_gets_an_allowed_loopback_url_when_the_policy_names_it() {
    let port = serve_http();
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\n"),
    );
    let g = gate(&ws, &["fetch:127.0.0.1"]).await;
    let o = ok(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(o.content, "hello");
    assert_eq!(o.data["status"], 200);
    // A body over `max_bytes` is cut, and says so.
    let o = ok(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/big"), "max_bytes": 1000}),
    )
    .await;
    assert!(o.truncated, "{o:#?}");
    assert!(o.content.len() < 2000, "{}", o.content.len());
    assert_eq!(o.totals["bytes"].returned, 1000, "{o:#?}");
    assert!(o.totals["bytes"].seen > 1000, "{o:#?}");
    // A redirect to the same host is followed.
    let o = ok(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/to?/ok")}),
    )
    .await;
    assert_eq!(o.content, "hello");
}

#[tokio::test]
async fn fetch_refuses_redirects_to_hosts_not_allowed_and_private_addresses() {
    let port = serve_http();
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\", \"localhost:{port}\"]\n"),
    );
    let g = gate(&ws, &["fetch:127.0.0.1"]).await;
    // `localhost` may resolve privately, but `fetch:localhost` was never allowed.
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/to?http://localhost:{port}/ok")}),
    )
    .await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "http-request-denied", "{o:#?}");
    assert!(
        o.data["network_refused"][0]
            .as_str()
            .unwrap()
            .contains("localhost"),
        "{o:#?}"
    );
    // Cloud metadata and a private address the policy does not name.
    let g = gate(&ws, &["fetch:169.254.169.254", "fetch:10.0.0.1"]).await;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
    ] {
        let o = call(&g, "fetch", json!({"url": url})).await;
        assert_eq!(code(&o), "destination-ip-prohibited", "{url}: {o:#?}");
    }
    // Without `allow_private`, loopback is refused even with the host granted.
    let ws = Ws::new();
    let g = gate(&ws, &["fetch:127.0.0.1"]).await;
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(code(&o), "destination-ip-prohibited", "{o:#?}");
}

#[tokio::test]
async fn the_policy_caps_the_response_size() {
    let port = serve_http();
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\nmax_response_bytes = 1024\n"),
    );
    let g = gate(&ws, &["fetch:127.0.0.1"]).await;
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/big")}),
    )
    .await;
    // Either an error naming the size or a visibly cut body: never 64 KiB passed through.
    assert!(o.content.len() <= 1024 + 200, "{o:#?}");
    assert!(o.status == Status::Error || o.truncated, "{o:#?}");
}

#[tokio::test]
async fn a_server_that_stops_sending_cannot_hold_the_call() {
    let port = serve_http();
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\ntimeout_ms = 300\n"),
    );
    let g = gate(&ws, &["fetch:127.0.0.1"]).await;
    // One call first, so the timed one measures the stalled server and not the fetch
    // component's first compile on a cold cache (seconds on a busy machine).
    let warm = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(warm.status, Status::Ok, "{warm:#?}");
    let started = std::time::Instant::now();
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/stall")}),
    )
    .await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The host keeps serving.
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(o.content, "hello", "{o:#?}");
}
