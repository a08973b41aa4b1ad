//! Cross-origin requests (`[http.cors]`): which browser origins may call the API, and the
//! answer to their preflight requests.

use http::StatusCode;

use crate::wire::{Request, Response};

/// The CORS policy; disabled, no CORS header is sent and preflights get 405 like any
/// unserved method.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    pub enabled: bool,
    /// Origins allowed; `*` allows any.
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    /// Request headers allowed; empty allows those the preflight asks for.
    pub allowed_headers: Vec<String>,
    pub exposed_headers: Vec<String>,
    pub allow_credentials: bool,
    pub allow_private_network: bool,
}

impl Cors {
    /// The `Access-Control-Allow-Origin` value for the request's origin, if allowed.
    fn allowed_origin(&self, request: &Request) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let origin = request.header("origin")?;
        let any = self.allowed_origins.iter().any(|allowed| allowed == "*");
        if any && !self.allow_credentials {
            return Some("*".to_owned());
        }
        let listed = self.allowed_origins.iter().any(|allowed| allowed == origin);
        (any || listed).then(|| origin.to_owned())
    }

    /// Whether `request` is a preflight this policy answers.
    pub fn is_preflight(&self, request: &Request) -> bool {
        self.enabled
            && request.method == http::Method::OPTIONS
            && request.header("access-control-request-method").is_some()
    }

    /// The answer to a preflight: 204 with the allowed methods and headers, or 403 for an
    /// origin not allowed.
    pub fn preflight(&self, request: &Request) -> Response {
        let Some(origin) = self.allowed_origin(request) else {
            return Response::new(StatusCode::FORBIDDEN);
        };
        let headers = if self.allowed_headers.is_empty() {
            request
                .header("access-control-request-headers")
                .unwrap_or_default()
                .to_owned()
        } else {
            self.allowed_headers.join(", ")
        };
        let mut response = self
            .decorate(Response::new(StatusCode::NO_CONTENT), origin)
            .header(
                "access-control-allow-methods",
                self.allowed_methods.join(", "),
            )
            .header("access-control-max-age", "3600".to_owned());
        if !headers.is_empty() {
            response = response.header("access-control-allow-headers", headers);
        }
        let private = request.header("access-control-request-private-network") == Some("true");
        if private && self.allow_private_network {
            response = response.header("access-control-allow-private-network", "true".into());
        }
        response
    }

    /// `response` with the CORS headers `request`'s origin gets.
    pub fn apply(&self, request: &Request, response: Response) -> Response {
        match self.allowed_origin(request) {
            Some(origin) => {
                let response = self.decorate(response, origin);
                if self.exposed_headers.is_empty() {
                    response
                } else {
                    response.header(
                        "access-control-expose-headers",
                        self.exposed_headers.join(", "),
                    )
                }
            }
            None => response,
        }
    }

    fn decorate(&self, response: Response, origin: String) -> Response {
        let response = response
            .header("access-control-allow-origin", origin)
            .header("vary", "origin".to_owned());
        if self.allow_credentials {
            response.header("access-control-allow-credentials", "true".to_owned())
        } else {
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{Method, StatusCode};

    use super::Cors;
    use crate::wire::Request;

    fn request(method: Method, headers: &[(&str, &str)]) -> Request {
        Request {
            method,
            target: "/streams".into(),
            headers: headers
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            body: Vec::new(),
            keep_alive: true,
        }
    }

    fn policy(origins: &[&str]) -> Cors {
        Cors {
            enabled: true,
            allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            allowed_methods: vec!["GET".into(), "POST".into()],
            ..Cors::default()
        }
    }

    #[test]
    fn listed_origins_get_headers_and_others_do_not() {
        let cors = policy(&["https://ui.example"]);
        let allowed = request(
            Method::OPTIONS,
            &[
                ("origin", "https://ui.example"),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "authorization"),
            ],
        );
        assert!(cors.is_preflight(&allowed));
        let response = cors.preflight(&allowed);
        assert_eq!(response.status, StatusCode::NO_CONTENT);
        let header = |name| {
            response
                .headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            header("access-control-allow-origin").as_deref(),
            Some("https://ui.example")
        );
        assert_eq!(
            header("access-control-allow-headers").as_deref(),
            Some("authorization")
        );

        let other = request(
            Method::OPTIONS,
            &[
                ("origin", "https://evil.example"),
                ("access-control-request-method", "POST"),
            ],
        );
        assert_eq!(cors.preflight(&other).status, StatusCode::FORBIDDEN);
        let plain = crate::wire::Response::new(StatusCode::OK);
        assert!(cors.apply(&other, plain).headers.is_empty());
    }

    #[test]
    fn disabled_sends_nothing() {
        let cors = Cors::default();
        let preflight = request(
            Method::OPTIONS,
            &[
                ("origin", "https://ui.example"),
                ("access-control-request-method", "GET"),
            ],
        );
        assert!(!cors.is_preflight(&preflight));
        let any = policy(&["*"]);
        let response = any.apply(&preflight, crate::wire::Response::new(StatusCode::OK));
        assert!(
            response
                .headers
                .iter()
                .any(|(n, v)| *n == "access-control-allow-origin" && v == "*")
        );
    }
}
