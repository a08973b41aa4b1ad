//! The embedded web UI (feature `web`): three static files from `crates/http/ui/`, built
//! into the binary, served at `/ui` when `http.web_ui = true`. They need no build step: the
//! page is plain HTML, CSS and JavaScript, and talks to this API only, with the JWT of its
//! login.
//!
//! Every response carries a content security policy that allows scripts from this origin
//! alone (no inline script, no `eval`), so a message payload that reaches the page as
//! markup could not run even if the page put it there; the page writes payloads as text.

use http::StatusCode;

use crate::wire::Response;

/// What the page may load and run: its own files, and requests to this API.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The files, by name under `/ui/` (`""` is the page itself).
#[cfg(feature = "web")]
const FILES: [(&str, &str, &[u8]); 3] = [
    (
        "",
        "text/html; charset=utf-8",
        include_bytes!("../ui/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../ui/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../ui/style.css"),
    ),
];

#[cfg(not(feature = "web"))]
const FILES: [(&str, &str, &[u8]); 0] = [];

/// The response for `/ui/<file>`; `None` for a file the UI does not have (or a build
/// without it).
pub fn asset(file: &str) -> Option<Response> {
    let file = if file == "index.html" { "" } else { file };
    let (_, content_type, bytes) = FILES.iter().find(|(name, _, _)| *name == file)?;
    let response = Response::with_body(StatusCode::OK, content_type, bytes.to_vec())
        .header(
            "content-security-policy",
            CONTENT_SECURITY_POLICY.to_owned(),
        )
        .header("x-content-type-options", "nosniff".to_owned())
        .header("referrer-policy", "no-referrer".to_owned())
        .header("x-frame-options", "DENY".to_owned())
        .header("cache-control", "no-cache".to_owned());
    Some(response)
}

/// Whether this build embeds the UI.
pub const fn built() -> bool {
    cfg!(feature = "web")
}

#[cfg(test)]
#[cfg(feature = "web")]
mod tests {
    use super::asset;

    #[test]
    fn the_page_and_its_files_are_served_with_a_strict_policy() {
        for file in ["", "index.html", "app.js", "style.css"] {
            let response = asset(file).unwrap();
            assert!(!response.body.is_empty(), "{file}");
            let policy = response
                .headers
                .iter()
                .find(|(name, _)| *name == "content-security-policy")
                .map(|(_, value)| value.as_str())
                .unwrap();
            assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe"));
        }
        assert!(asset("../Cargo.toml").is_none() && asset("secret").is_none());
        let page = String::from_utf8(asset("").unwrap().body).unwrap();
        // No inline script or handler attribute: the policy would block them.
        assert!(!page.contains("<script>") && !page.contains("onclick"));
    }
}
