//! The routes of the API (PROTOCOL.md §8.3): a method and a request target become a
//! [`Route`] with its identifiers decoded, and the query as pairs.
//!
//! A path segment is percent-decoded, then read as a numeric id if it parses as `u32`,
//! otherwise as a name (1 to 255 bytes of UTF-8).

use std::borrow::Cow;

use http::Method;
use percent_encoding::percent_decode_str;
use proto::codec::WireName;
use proto::primitives::Identifier;

use crate::error::ApiError;

/// Stream, topic (and group or user) identifiers of a route.
pub type Id = Identifier;

/// One operation of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Root,
    Ping,
    /// `GET` on `[http.metrics] endpoint` (matched by the API, not by [`route`]).
    Metrics,
    Stats,
    Options(String),
    Snapshot,
    ClusterMetadata,
    Clients,
    Client(u32),
    Users,
    CreateUser,
    User(Id),
    UpdateUser(Id),
    DeleteUser(Id),
    ChangePassword(Id),
    UpdatePermissions(Id),
    Login,
    RefreshToken,
    Logout,
    Tokens,
    CreateToken,
    DeleteToken(String),
    TokenLogin,
    Streams,
    CreateStream,
    Stream(Id),
    UpdateStream(Id),
    DeleteStream(Id),
    PurgeStream(Id),
    Topics(Id),
    CreateTopic(Id),
    Topic(Id, Id),
    UpdateTopic(Id, Id),
    DeleteTopic(Id, Id),
    PurgeTopic(Id, Id),
    CreatePartitions(Id, Id),
    DeletePartitions(Id, Id),
    DeleteSegments(Id, Id, u32),
    Groups(Id, Id),
    CreateGroup(Id, Id),
    Group(Id, Id, Id),
    DeleteGroup(Id, Id, Id),
    GetOffset(Id, Id),
    StoreOffset(Id, Id),
    DeleteOffset(Id, Id, String),
    Send(Id, Id),
    /// `GET …/messages` (the reference's route) and `…/messages/deferred` (the SDK's).
    Poll(Id, Id),
    /// This project's additions for the web UI (README, Web UI), each needing
    /// `read_servers`: recent server log lines, the effective configuration, a consumer
    /// group's lag per partition.
    Logs,
    Config,
    GroupLag(Id, Id, Id),
    /// `GET /ui` and its assets (feature `web`, when `http.web_ui = true`): public, as
    /// static files; what they show comes from the API with the user's token.
    Ui(String),
}

impl Route {
    /// Whether the route needs no credential.
    pub fn is_public(&self) -> bool {
        matches!(
            self,
            Self::Root
                | Self::Ping
                | Self::Login
                | Self::RefreshToken
                | Self::TokenLogin
                | Self::Ui(_)
        )
    }
}

/// A request target split into decoded path segments and query pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub segments: Vec<String>,
    pub query: Vec<(String, String)>,
}

impl Target {
    pub fn parse(target: &str) -> Result<Self, ApiError> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        // An absolute-form target (`http://host/path`) keeps only its path.
        let path = match path
            .strip_prefix("http://")
            .or(path.strip_prefix("https://"))
        {
            Some(rest) => rest.find('/').map_or("/", |slash| &rest[slash..]),
            None => path,
        };
        let segments = path
            .split('/')
            .filter(|segment| !segment.is_empty())
            .map(decode)
            .collect::<Result<_, _>>()?;
        let query = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                Ok((decode_query(key)?, decode_query(value)?))
            })
            .collect::<Result<_, ApiError>>()?;
        Ok(Self { segments, query })
    }

    /// The last value of query parameter `key`.
    pub fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }
}

fn decode(segment: &str) -> Result<String, ApiError> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(Cow::into_owned)
        .map_err(|_utf8| ApiError::invalid("a path segment is not UTF-8", "path"))
}

fn decode_query(part: &str) -> Result<String, ApiError> {
    decode(&part.replace('+', " "))
}

/// An identifier from a decoded path segment.
pub fn identifier(segment: &str) -> Result<Id, ApiError> {
    if let Ok(id) = segment.parse::<u32>() {
        return Ok(Identifier::Numeric(id));
    }
    WireName::new(segment)
        .map(Identifier::Name)
        .ok_or_else(|| ApiError::invalid("an identifier is 1 to 255 bytes", "identifier"))
}

fn number(segment: &str, field: &'static str) -> Result<u32, ApiError> {
    segment
        .parse()
        .map_err(|_parse| ApiError::invalid(format!("{field} must be a number"), field))
}

/// The route `method` and `segments` name: `NoRoute` for a path nothing serves,
/// `MethodNotAllowed` for one another method serves.
pub fn route(method: &Method, segments: &[String]) -> Result<Route, ApiError> {
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    if let Some(route) = match_route(method, &parts)? {
        return Ok(route);
    }
    let served = [Method::GET, Method::POST, Method::PUT, Method::DELETE]
        .iter()
        .any(|other| matches!(match_route(other, &parts), Ok(Some(_))));
    Err(if served {
        ApiError::MethodNotAllowed
    } else {
        ApiError::NoRoute
    })
}

fn match_route(m: &Method, parts: &[&str]) -> Result<Option<Route>, ApiError> {
    let get = *m == Method::GET;
    Ok(match parts {
        [] if get => Some(Route::Root),
        ["ping"] if get => Some(Route::Ping),
        ["stats"] if get => Some(Route::Stats),
        ["options", scope] if get => Some(Route::Options((*scope).to_owned())),
        ["snapshot"] if *m == Method::POST => Some(Route::Snapshot),
        ["cluster", "metadata"] if get => Some(Route::ClusterMetadata),
        ["clients"] if get => Some(Route::Clients),
        ["clients", id] if get => Some(Route::Client(number(id, "client_id")?)),
        ["system", "logs"] if get => Some(Route::Logs),
        ["system", "config"] if get => Some(Route::Config),
        ["ui"] if get => Some(Route::Ui(String::new())),
        ["ui", file] if get => Some(Route::Ui((*file).to_owned())),
        ["users", rest @ ..] => users(m, rest)?,
        ["personal-access-tokens", rest @ ..] => tokens(m, rest),
        ["streams", rest @ ..] => streams(m, rest)?,
        _ => None,
    })
}

fn users(m: &Method, rest: &[&str]) -> Result<Option<Route>, ApiError> {
    Ok(match rest {
        [] if m == Method::GET => Some(Route::Users),
        [] if m == Method::POST => Some(Route::CreateUser),
        ["login"] if m == Method::POST => Some(Route::Login),
        ["refresh-token"] if m == Method::POST => Some(Route::RefreshToken),
        ["logout"] if m == Method::DELETE => Some(Route::Logout),
        [user] if m == Method::GET => Some(Route::User(identifier(user)?)),
        [user] if m == Method::PUT => Some(Route::UpdateUser(identifier(user)?)),
        [user] if m == Method::DELETE => Some(Route::DeleteUser(identifier(user)?)),
        [user, "password"] if m == Method::PUT => Some(Route::ChangePassword(identifier(user)?)),
        [user, "permissions"] if m == Method::PUT => {
            Some(Route::UpdatePermissions(identifier(user)?))
        }
        _ => None,
    })
}

fn tokens(m: &Method, rest: &[&str]) -> Option<Route> {
    match rest {
        [] if m == Method::GET => Some(Route::Tokens),
        [] if m == Method::POST => Some(Route::CreateToken),
        ["login"] if m == Method::POST => Some(Route::TokenLogin),
        [name] if m == Method::DELETE => Some(Route::DeleteToken((*name).to_owned())),
        _ => None,
    }
}

fn streams(m: &Method, rest: &[&str]) -> Result<Option<Route>, ApiError> {
    let get = *m == Method::GET;
    let post = *m == Method::POST;
    let put = *m == Method::PUT;
    let delete = *m == Method::DELETE;
    let id = |segment: &&str| identifier(segment);
    Ok(match rest {
        [] if get => Some(Route::Streams),
        [] if post => Some(Route::CreateStream),
        [s] if get => Some(Route::Stream(id(s)?)),
        [s] if put => Some(Route::UpdateStream(id(s)?)),
        [s] if delete => Some(Route::DeleteStream(id(s)?)),
        [s, "purge"] if delete => Some(Route::PurgeStream(id(s)?)),
        [s, "topics"] if get => Some(Route::Topics(id(s)?)),
        [s, "topics"] if post => Some(Route::CreateTopic(id(s)?)),
        [s, "topics", t, rest @ ..] => topic(m, (id(s)?, id(t)?), rest)?,
        _ => None,
    })
}

fn topic(m: &Method, (s, t): (Id, Id), rest: &[&str]) -> Result<Option<Route>, ApiError> {
    let get = *m == Method::GET;
    let post = *m == Method::POST;
    let put = *m == Method::PUT;
    let delete = *m == Method::DELETE;
    Ok(match rest {
        [] if get => Some(Route::Topic(s, t)),
        [] if put => Some(Route::UpdateTopic(s, t)),
        [] if delete => Some(Route::DeleteTopic(s, t)),
        ["purge"] if delete => Some(Route::PurgeTopic(s, t)),
        ["partitions"] if post => Some(Route::CreatePartitions(s, t)),
        ["partitions"] if delete => Some(Route::DeletePartitions(s, t)),
        ["partitions", p] if delete => {
            Some(Route::DeleteSegments(s, t, number(p, "partition_id")?))
        }
        ["consumer-groups"] if get => Some(Route::Groups(s, t)),
        ["consumer-groups"] if post => Some(Route::CreateGroup(s, t)),
        ["consumer-groups", g] if get => Some(Route::Group(s, t, identifier(g)?)),
        ["consumer-groups", g] if delete => Some(Route::DeleteGroup(s, t, identifier(g)?)),
        ["consumer-groups", g, "lag"] if get => Some(Route::GroupLag(s, t, identifier(g)?)),
        ["consumer-offsets"] if get => Some(Route::GetOffset(s, t)),
        ["consumer-offsets"] if put => Some(Route::StoreOffset(s, t)),
        ["consumer-offsets", consumer] if delete => {
            Some(Route::DeleteOffset(s, t, (*consumer).to_owned()))
        }
        ["messages"] if post => Some(Route::Send(s, t)),
        ["messages"] if get => Some(Route::Poll(s, t)),
        ["messages", "deferred"] if get || post => Some(Route::Poll(s, t)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use http::Method;
    use proto::primitives::Identifier;

    use super::{Route, Target, route};
    use crate::error::ApiError;

    fn parse(method: &Method, target: &str) -> Result<Route, ApiError> {
        let target = Target::parse(target)?;
        route(method, &target.segments)
    }

    fn name(text: &str) -> Identifier {
        Identifier::name(text).expect("a valid name")
    }

    #[test]
    fn identifiers_are_numbers_or_decoded_names() {
        assert_eq!(
            parse(&Method::GET, "/streams/my%20stream/topics/7"),
            Ok(Route::Topic(name("my stream"), Identifier::Numeric(7)))
        );
        assert_eq!(
            parse(&Method::GET, "/streams/a%2Eb"),
            Ok(Route::Stream(name("a.b")))
        );
        assert_eq!(
            parse(&Method::GET, "/streams/4294967296"),
            Ok(Route::Stream(name("4294967296")))
        );
        assert!(matches!(
            parse(&Method::GET, &format!("/streams/{}", "x".repeat(256))),
            Err(ApiError::Invalid { .. })
        ));
        assert!(matches!(
            parse(&Method::GET, "/streams/%FF"),
            Err(ApiError::Invalid { .. })
        ));
    }

    #[test]
    fn unknown_paths_and_wrong_methods_differ() {
        assert_eq!(parse(&Method::GET, "/nope"), Err(ApiError::NoRoute));
        assert_eq!(
            parse(&Method::PATCH, "/streams"),
            Err(ApiError::MethodNotAllowed)
        );
        assert_eq!(
            parse(&Method::POST, "/ping"),
            Err(ApiError::MethodNotAllowed)
        );
        assert_eq!(parse(&Method::GET, "/ping?x=1"), Ok(Route::Ping));
        assert_eq!(parse(&Method::GET, "/"), Ok(Route::Root));
    }

    #[test]
    fn every_sdk_route_is_known() {
        let s = || Identifier::Numeric(1);
        let t = || Identifier::Numeric(2);
        let cases = [
            (Method::POST, "/users/login", Route::Login),
            (Method::DELETE, "/users/logout", Route::Logout),
            (Method::POST, "/users/refresh-token", Route::RefreshToken),
            (
                Method::POST,
                "/personal-access-tokens/login",
                Route::TokenLogin,
            ),
            (
                Method::DELETE,
                "/personal-access-tokens/ci",
                Route::DeleteToken("ci".into()),
            ),
            (
                Method::PUT,
                "/users/5/password",
                Route::ChangePassword(Identifier::Numeric(5)),
            ),
            (Method::DELETE, "/streams/1/purge", Route::PurgeStream(s())),
            (
                Method::POST,
                "/streams/1/topics/2/partitions",
                Route::CreatePartitions(s(), t()),
            ),
            (
                Method::DELETE,
                "/streams/1/topics/2/partitions/3",
                Route::DeleteSegments(s(), t(), 3),
            ),
            (
                Method::PUT,
                "/streams/1/topics/2/consumer-offsets",
                Route::StoreOffset(s(), t()),
            ),
            (
                Method::DELETE,
                "/streams/1/topics/2/consumer-offsets/c1?partition_id=1",
                Route::DeleteOffset(s(), t(), "c1".into()),
            ),
            (
                Method::POST,
                "/streams/1/topics/2/messages",
                Route::Send(s(), t()),
            ),
            (
                Method::GET,
                "/streams/1/topics/2/messages/deferred?a=b",
                Route::Poll(s(), t()),
            ),
            (
                Method::POST,
                "/streams/1/topics/2/messages/deferred",
                Route::Poll(s(), t()),
            ),
            (Method::GET, "/cluster/metadata", Route::ClusterMetadata),
        ];
        for (method, target, expected) in cases {
            assert_eq!(parse(&method, target), Ok(expected), "{target}");
        }
    }

    #[test]
    fn the_query_is_decoded() {
        let target = Target::parse("/x?consumer_id=a%20b&kind=offset&count=&k=1&k=2").expect("ok");
        assert_eq!(target.query("consumer_id"), Some("a b"));
        assert_eq!(target.query("count"), Some(""));
        assert_eq!(target.query("k"), Some("2"));
        assert_eq!(target.query("missing"), None);
    }
}
