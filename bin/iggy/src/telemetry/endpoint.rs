//! An OTLP/HTTP endpoint: `http://host[:port]/path` (plain HTTP to a local or sidecar
//! collector; the server has no HTTP client TLS).

/// Where a batch is posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) path: String,
}

impl Endpoint {
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("`{url}` does not start with http://"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            // `[::1]:4318`, `host:4318`; a bare IPv6 address needs its brackets.
            Some((host, port)) if !port.contains(']') => {
                let port = port
                    .parse()
                    .map_err(|error| format!("`{port}` is not a port: {error}"))?;
                (host, port)
            }
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(format!("`{url}` names no host"));
        }
        if path.contains(char::is_whitespace) {
            return Err(format!("`{url}` has a space in its path"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_collectors() {
        let endpoint = Endpoint::parse("http://localhost:4318/v1/logs").unwrap();
        assert_eq!(
            endpoint,
            Endpoint {
                host: "localhost".into(),
                port: 4318,
                path: "/v1/logs".into()
            }
        );
        let v6 = Endpoint::parse("http://[::1]:4318/v1/traces").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 4318));
        let default_port = Endpoint::parse("http://collector").unwrap();
        assert_eq!((default_port.port, default_port.path.as_str()), (80, "/"));
        for bad in [
            "https://x:1/v1/logs",
            "x:1/v1",
            "http://:4318/",
            "http://x:port/",
            "http://x/a b",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
