//! Login (`LOGIN_REGISTER` 40, `LOGIN_REGISTER_WITH_PAT` 45), `BIND_SESSION` (15),
//! `LOGOUT_USER` (39) and the legacy logins 38/44 (PROTOCOL.md §2.2–§2.7).
//!
//! A login fixes the connection's dialect from its version prefix before anything else is
//! read; credentials failures are evictions, as the reference server answers them.

use proto::Dialect;
use proto::codec::WireName;
use proto::commands::Request;
use proto::commands::session::{BindSecret, BindSession, LoginReply, Secret};
use proto::dialect::VersionPrefix;
use proto::header::{EvictionReason, Operation, RequestHeader};

use super::operation_of;
use crate::connection::{BoundSession, Connection};
use crate::metadata::auth::{dummy_password_hash, token_digest};
use crate::outcome::Outcome;
use crate::refusal::{Login, Refusal};
use crate::server::{SERVER_VERSION, Server};
use crate::sessions::TokenDigest;

/// The codes of this family that arrive through dispatch (logins come through [`login`]).
pub(crate) fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let commit = server.commit_number();
    match request {
        Request::BindSession(bind) => bind_session(server, connection, &bind),
        Request::LogoutUser(_) => {
            // An attachment (`routing`) belonged to the session that ends.
            connection.consumer_session = None;
            if let Some(bound) = connection.session.take() {
                server.sessions.borrow_mut().end(bound.client_id);
                server
                    .data
                    .leave_all_groups(bound.client_id, server.now_us());
            }
            Outcome::empty(Operation::Logout, commit)
        }
        Request::LoginUser(_) | Request::LoginWithPersonalAccessToken(_) => {
            Outcome::Evict(EvictionReason::MalformedLogin)
        }
        _ => Outcome::refused(operation_of(header), Refusal::Malformed, commit),
    }
}

/// A `Register` request: version gate, credentials, session, then the bound connection.
pub(crate) async fn login(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    body: &[u8],
) -> Outcome {
    let Some(version) = VersionPrefix::peek_version(body) else {
        return evict(
            connection,
            EvictionReason::MalformedLogin,
            "no version prefix",
        );
    };
    let Some(dialect) = Dialect::for_version(version) else {
        return evict(connection, EvictionReason::IncompatibleProtocol, "version");
    };
    let credentials = match Request::decode_register(body, dialect) {
        Ok(Request::LoginRegister(login)) => {
            Credentials::Password(login.username, login.password, login.bind_secret)
        }
        Ok(Request::LoginRegisterWithPat(login)) => {
            Credentials::Token(login.token, login.bind_secret)
        }
        _ => {
            return evict(
                connection,
                EvictionReason::MalformedLogin,
                "undecodable body",
            );
        }
    };
    let token = login_token(&credentials);
    // The client speaks the dialect its version names: the answer, a refusal included, is
    // encoded in it at the edge.
    connection.dialect = dialect;
    if server
        .replication()
        .is_some_and(|replication| !replication.is_caught_up())
    {
        // A node still replaying the log may not know the user yet: not a final refusal.
        let refusal = Refusal::NotAccepted;
        return Outcome::rejected(Operation::Register, refusal, server.commit_number());
    }
    let (user_id, bind_secret) = match authenticate(server, connection, credentials).await {
        Ok(identity) => identity,
        Err(LoginFailure::Evict(reason)) => return evict(connection, reason, "credentials"),
        Err(LoginFailure::Refuse(code)) => {
            return Outcome::rejected(Operation::Register, code, server.commit_number());
        }
    };
    let client_id = header.client.get();
    let session = match register(server, client_id, user_id, bind_secret, token).await {
        Ok(session) => session,
        Err(Some(refusal)) => {
            return Outcome::rejected(Operation::Register, refusal, server.commit_number());
        }
        Err(None) => return Outcome::Evict(EvictionReason::SessionError),
    };
    bind(
        connection,
        BoundSession {
            client_id,
            session,
            user_id,
        },
    );
    let reply = login_reply(user_id, session, dialect);
    Outcome::value(Operation::Register, reply, server.commit_number())
}

/// The session of a login: from this node's table, or in cluster mode replicated to every
/// node first. `Err(None)`: the table refused it (a conflicting or exhausted session).
async fn register(
    server: &Server,
    client_id: u128,
    user_id: u32,
    bind_secret: BindSecret,
    token: Option<TokenDigest>,
) -> Result<u64, Option<Refusal>> {
    let Some(replication) = server.replication() else {
        let registered =
            server
                .sessions
                .borrow_mut()
                .register(client_id, user_id, bind_secret, token);
        return registered.map(|record| record.session).map_err(|error| {
            log::warn!("client id {client_id:#x}: register: {error}");
            None
        });
    };
    let op = crate::cluster::ReplicatedOp::Register {
        client_id,
        user_id,
        bind_secret: bind_secret.0,
        token,
    };
    match replication.submit(&op, true).await {
        Ok(crate::cluster::Applied::Session(session)) => Ok(session),
        Ok(_) | Err(Refusal::Internal) => Err(None),
        Err(refusal) => Err(Some(refusal)),
    }
}

enum Credentials {
    Password(WireName, Secret, BindSecret),
    Token(Secret, BindSecret),
}

/// How a failed login ends: the connection evicted (bad credentials, §1.14), or a refusal.
enum LoginFailure {
    Evict(EvictionReason),
    Refuse(Refusal),
}

/// The user the credentials prove, with the bind secret to register.
async fn authenticate(
    server: &Server,
    connection: &Connection,
    credentials: Credentials,
) -> Result<(u32, BindSecret), LoginFailure> {
    let (user, secret) = match credentials {
        Credentials::Password(username, password, secret) => {
            let user = password_login(server, connection, username.as_str(), password).await;
            (user, secret)
        }
        Credentials::Token(token, secret) => {
            let user = server.metadata.borrow().authenticate_token(
                token.expose(),
                server.now_us(),
                &server.credentials,
            );
            (user, secret)
        }
    };
    let refusal = |code| match code {
        Refusal::Login(Login::Credentials) => {
            LoginFailure::Evict(EvictionReason::InvalidCredentials)
        }
        Refusal::Login(Login::Token) => LoginFailure::Evict(EvictionReason::InvalidToken),
        Refusal::Login(Login::UserInactive) => LoginFailure::Evict(EvictionReason::UserInactive),
        other => LoginFailure::Refuse(other),
    };
    if user.is_err() {
        server.metrics().add(|metrics| &metrics.logins_failed, 1);
    }
    user.map(|user_id| (user_id, secret)).map_err(refusal)
}

/// A password login: refused at once while the address or user name is backing off;
/// otherwise the password is checked on the hashing threads against the user's hash, or
/// against a dummy hash for an unknown user so both refusals cost the same. The outcome
/// feeds the rate limiter.
async fn password_login(
    server: &Server,
    connection: &Connection,
    username: &str,
    password: Secret,
) -> Result<u32, Refusal> {
    let address = connection.address.ip();
    if let Err(until_us) = server
        .logins
        .borrow()
        .check(address, username, server.now_us())
    {
        log::info!(
            "client {} ({address}): login as {username:?} refused: backing off for {} ms",
            connection.client_number,
            until_us.saturating_sub(server.now_us()) / 1000
        );
        return Err(Refusal::Login(Login::Credentials));
    }
    // After a failure, counted as failed before the check (a success clears it), so parallel
    // guesses see each other.
    let suspect = server.logins.borrow().has_failures(address, username);
    if suspect {
        server
            .logins
            .borrow_mut()
            .failed(address, username, server.now_us());
    }
    let stored = server
        .metadata
        .borrow()
        .user_by_name(username)
        .map(|user| user.password_hash.clone());
    let known = stored.is_some();
    let hash = stored.unwrap_or_else(|| dummy_password_hash().to_owned());
    // A hash that does not open under this server's key matches nothing; the dummy hash
    // is checked instead so the refusal costs what any other does.
    let (opened, known) = match server.credentials.reveal(&hash) {
        Ok(opened) => (opened.into_owned(), known),
        Err(_sealed) => (dummy_password_hash().to_owned(), false),
    };
    let matched = server
        .node
        .hasher
        .verify(password.expose().to_owned(), opened)
        .await;
    // The metadata may have changed while the check ran: the user must still hold that hash.
    let result = {
        let metadata = server.metadata.borrow();
        match metadata.user_by_name(username) {
            Some(user) if known && matched && user.password_hash == hash => {
                metadata.active_user(user.id)
            }
            _ => Err(Refusal::Login(Login::Credentials)),
        }
    };
    match result {
        Ok(_) => server.logins.borrow_mut().succeeded(address, username),
        Err(_) if !suspect => server
            .logins
            .borrow_mut()
            .failed(address, username, server.now_us()),
        Err(_) => {}
    }
    result
}

/// `BIND_SESSION`: re-attaches this connection to a session its client already holds.
fn bind_session(server: &Server, connection: &mut Connection, bind: &BindSession) -> Outcome {
    let commit = server.commit_number();
    let Some(dialect) = Dialect::for_version(bind.version.protocol_version) else {
        return evict(
            connection,
            EvictionReason::IncompatibleProtocol,
            "bind version",
        );
    };
    if server
        .replication()
        .is_some_and(|replication| !replication.is_caught_up())
    {
        // A node still replaying may not have the session yet: `40` would make the client
        // drop a session that lives; `58` makes it try again or elsewhere.
        return Outcome::refused(Operation::NonReplicated, Refusal::NotAccepted, commit);
    }
    let record = server
        .sessions
        .borrow()
        .bind(bind.client_id, bind.session, &bind.bind_secret);
    let Some(record) = record else {
        return Outcome::refused(Operation::NonReplicated, Refusal::Unauthenticated, commit);
    };
    let identity = server.metadata.borrow().session_identity(
        record.user_id,
        record.token.as_ref(),
        server.now_us(),
        &server.credentials,
    );
    if identity.is_err() {
        // Its user or token lapsed (an expired token, say): the session ends here rather
        // than being bound again and again.
        server.sessions.borrow_mut().end(bind.client_id);
        server
            .data
            .leave_all_groups(bind.client_id, server.now_us());
        return Outcome::refused(Operation::NonReplicated, Refusal::Unauthenticated, commit);
    }
    connection.dialect = dialect;
    self::bind(
        connection,
        BoundSession {
            client_id: bind.client_id,
            session: record.session,
            user_id: record.user_id,
        },
    );
    let reply = login_reply(record.user_id, record.session, dialect);
    Outcome::value(Operation::NonReplicated, reply, commit)
}

fn login_reply(user_id: u32, session: u64, dialect: Dialect) -> LoginReply {
    LoginReply {
        user_id,
        session,
        server_protocol_version: dialect.protocol_version(),
        server_version: WireName::new(SERVER_VERSION).expect("the version is 1..=255 bytes"),
    }
}

fn evict(connection: &Connection, reason: EvictionReason, what: &str) -> Outcome {
    log::info!(
        "client {} ({}): login refused ({what}): {reason:?}",
        connection.client_number,
        connection.address
    );
    Outcome::Evict(reason)
}

/// Binds `connection` to `session`. An attachment made under another session (`routing`)
/// does not carry over.
fn bind(connection: &mut Connection, session: BoundSession) {
    connection.session = Some(session);
    connection.consumer_session = None;
}

/// The digest of the personal access token a login presents, if it presents one.
fn login_token(credentials: &Credentials) -> Option<TokenDigest> {
    match credentials {
        Credentials::Token(token, _) => Some(token_digest(token.expose())),
        Credentials::Password(..) => None,
    }
}
