use super::api::param;
use super::*;

#[test]
fn query_parameters_are_percent_decoded() {
    assert_eq!(
        param("path=src%2Fa%20b.rs", "path").as_deref(),
        Some("src/a b.rs")
    );
    assert_eq!(param("a=1&path=x+y", "path").as_deref(), Some("x y"));
    assert_eq!(param("limit=5", "path"), None);
    // A stray `%` is kept; bytes that are not UTF-8 are not a value.
    assert_eq!(param("path=100%", "path").as_deref(), Some("100%"));
    assert_eq!(param("path=%ff", "path"), None);
}

#[test]
fn the_page_is_served_with_a_policy_that_forbids_inline_script_and_framing() {
    let req = Request::get("/").body(()).unwrap();
    let page = page(&req).unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    // The page's files hold no inline script or style the policy would block.
    assert!(
        !INDEX.contains("<script>") && !INDEX.contains("style="),
        "inline code in index.html"
    );
    assert!(
        !SCRIPT.contains("innerHTML"),
        "console.js must build the page with textContent"
    );
    let post = Request::post("/").body(()).unwrap();
    assert_eq!(page_status(&post), Some(StatusCode::METHOD_NOT_ALLOWED));
    assert!(super::page(&Request::get("/api/overview").body(()).unwrap()).is_none());
    assert!(super::page(&Request::get("/mcp").body(()).unwrap()).is_none());
}

fn page_status(req: &Request<()>) -> Option<StatusCode> {
    super::page(req).map(|r| r.status())
}
