//! The credential store's bounds, against a handler that logs in anyone: username `user<N>`
//! (or a personal access token `pat<N>`) becomes user N.

use std::cell::Cell;
use std::future::{Future, pending};
use std::net::SocketAddr;
use std::rc::Rc;

use proto::Dialect;
use proto::codec::{Codec, WireName, Writer, decode_exact};
use proto::commands::session::{LoginRegister, LoginRegisterWithPat, LoginReply};
use proto::dialect::ProtocolVersion;
use proto::header::{EvictionReason, HEADER_SIZE, Operation};
use proto::result::ResultSection;
use transport::{Answer, ConnectionHandler};

use crate::auth::{Credentials, SessionLimits};
use crate::error::ApiError;
use crate::jwt::{Jwt, JwtSettings};
use crate::session::Login;

const DIALECT: Dialect = Dialect::V0_12_2;
const LIFETIME_S: u64 = 3600;

#[derive(Default)]
pub(crate) struct AnyoneLogsIn {
    sessions: Cell<u64>,
    open: Cell<usize>,
}

impl ConnectionHandler for AnyoneLogsIn {
    type Connection = ();

    fn open(&self, _peer: SocketAddr) {
        self.open.set(self.open.get() + 1);
    }

    async fn handle(&self, (): &(), _header: &[u8; HEADER_SIZE], body: &[u8]) -> Answer {
        let name = match decode_exact::<LoginRegister>(body, DIALECT) {
            Ok(login) => login.username.as_str().to_owned(),
            Err(_) => decode_exact::<LoginRegisterWithPat>(body, DIALECT)
                .map(|login| login.token.expose().to_owned())
                .unwrap_or_default(),
        };
        let user_id = name
            .trim_start_matches(char::is_alphabetic)
            .parse()
            .unwrap_or(0);
        self.sessions.set(self.sessions.get() + 1);
        let reply = LoginReply {
            user_id,
            session: self.sessions.get(),
            server_protocol_version: ProtocolVersion::V0_12_2,
            server_version: WireName::new("test").expect("a short name"),
        };
        let mut payload = Vec::new();
        let mut writer = Writer::new(&mut payload, DIALECT);
        ResultSection::Ok.encode(&mut writer);
        reply.encode(&mut writer);
        Answer::Reply {
            committed_op: 0,
            operation: Operation::Register,
            status: 0,
            commit: 0,
            body: payload,
            tail: Vec::new(),
        }
    }

    async fn evicted(&self, (): &()) -> EvictionReason {
        pending().await
    }

    fn dialect(&self, (): &()) -> Dialect {
        DIALECT
    }

    fn authenticated(&self, (): &()) -> bool {
        true
    }

    fn close(&self, (): ()) {
        self.open.set(self.open.get() - 1);
    }
}

pub(crate) fn jwt_settings() -> JwtSettings {
    JwtSettings {
        issuer: "iggy".into(),
        audience: "iggy".into(),
        valid_issuers: Vec::new(),
        valid_audiences: Vec::new(),
        lifetime_s: LIFETIME_S,
        clock_skew_s: 0,
        not_before_s: 0,
        encoding_secret: b"secret".to_vec(),
        decoding_secret: b"secret".to_vec(),
    }
}

fn store(total: usize, per_user: usize) -> Credentials<AnyoneLogsIn> {
    Credentials::new(Jwt::new(jwt_settings()), SessionLimits { total, per_user })
}

fn peer() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 1))
}

fn run<T>(future: impl Future<Output = T>) -> T {
    compio::runtime::Runtime::new()
        .expect("a compio runtime")
        .block_on(future)
}

async fn login(
    credentials: &Credentials<AnyoneLogsIn>,
    handler: &Rc<AnyoneLogsIn>,
    user: u32,
    now_s: u64,
) -> Result<String, ApiError> {
    let username = format!("user{user}");
    let password = Login::Password {
        username: &username,
        password: "secret",
    };
    let (_, token) = credentials.login(handler, peer(), password, now_s).await?;
    Ok(format!("Bearer {}", token.token))
}

fn works(credentials: &Credentials<AnyoneLogsIn>, handler: &Rc<AnyoneLogsIn>, token: &str) -> bool {
    run(credentials.session(handler, peer(), Some(token), 10)).is_ok()
}

#[test]
fn a_user_past_its_limit_retires_its_own_oldest_token_only() {
    let handler = Rc::new(AnyoneLogsIn::default());
    let credentials = store(100, 3);
    let other = run(login(&credentials, &handler, 2, 1)).expect("user 2 logs in");
    let tokens: Vec<String> = (0..5)
        .map(|at| run(login(&credentials, &handler, 1, 1 + at)).expect("user 1 logs in"))
        .collect();
    assert!(!works(&credentials, &handler, &tokens[0]));
    assert!(!works(&credentials, &handler, &tokens[1]));
    assert!(
        tokens[2..]
            .iter()
            .all(|token| works(&credentials, &handler, token))
    );
    assert!(works(&credentials, &handler, &other));
    // The retired sessions' handler connections are closed.
    assert_eq!(handler.open.get(), 4);
}

#[test]
fn a_full_store_evicts_the_coldest_bearer_and_then_refuses() {
    let handler = Rc::new(AnyoneLogsIn::default());
    let credentials = store(3, 10);
    for (pat, at) in [("Bearer pat1", 1), ("Bearer pat2", 2)] {
        run(credentials.session(&handler, peer(), Some(pat), at)).expect("a bearer session");
    }
    run(credentials.session(&handler, peer(), Some("Bearer pat1"), 3)).expect("pat1 again");
    let first = run(login(&credentials, &handler, 7, 4)).expect("room for a token");
    // Full: the coldest bearer (pat2, last used at 2) makes way; pat1 stays.
    let second = run(login(&credentials, &handler, 8, 5)).expect("pat2 evicted for it");
    assert_eq!(handler.open.get(), 3);
    assert!(credentials.known(Some("Bearer pat1"), 5));
    assert!(!credentials.known(Some("Bearer pat2"), 5));
    run(login(&credentials, &handler, 9, 6)).expect("pat1 evicted for it");
    // Only live tokens left: refused, transiently.
    let refused = run(login(&credentials, &handler, 10, 7));
    let transient = proto::status::ErrorCode::TransientNotAccepted.as_u32();
    assert!(matches!(refused, Err(ApiError::Code(code)) if code == transient));
    assert!(works(&credentials, &handler, &first) && works(&credentials, &handler, &second));
    // An evicted bearer simply logs in again at its next use (once there is room).
    let later = 7 + LIFETIME_S;
    run(credentials.session(&handler, peer(), Some("Bearer pat2"), later)).expect("re-made");
}

#[test]
fn expired_tokens_and_idle_bearers_are_swept_without_a_login() {
    let handler = Rc::new(AnyoneLogsIn::default());
    let credentials = store(100, 10);
    let token = run(login(&credentials, &handler, 1, 0)).expect("a token");
    run(credentials.session(&handler, peer(), Some("Bearer pat5"), 0)).expect("a bearer");
    assert_eq!(handler.open.get(), 2);
    // A request with another credential a token's lifetime later sweeps both.
    let fresh = run(login(&credentials, &handler, 2, 1)).expect("another token");
    run(credentials.session(&handler, peer(), Some(&fresh), LIFETIME_S)).expect("live");
    assert_eq!(handler.open.get(), 1);
    assert!(!credentials.known(Some(&token), LIFETIME_S));
}
