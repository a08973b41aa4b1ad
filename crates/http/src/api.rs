//! One HTTP request through the API: route, credential, binary request on the credential's
//! session, typed reply, JSON response (PROTOCOL.md §8).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::rc::Rc;

use http::StatusCode;
use proto::ErrorCode;
use proto::codes::CommandCode;
use proto::commands::Empty;
use proto::commands::groups::{
    ConsumerGroupDetails, ConsumerGroups, CreateConsumerGroup, DeleteConsumerGroup,
    GetConsumerGroup, GetConsumerGroups,
};
use proto::commands::messages::{PollMessagesDeferred, PolledMessages, SendConfirmations};
use proto::commands::offsets::{
    ConsumerOffset, DeleteConsumerOffset, GetConsumerOffset, OffsetSelector, StoreConsumerOffset,
};
use proto::commands::partitions::{CreatePartitions, DeletePartitions, DeleteSegments};
use proto::commands::streams::{CreateStream, DeleteStream, GetStream, StreamDetails, Streams};
use proto::commands::system::{
    ClientDetails, Clients, ClusterMetadata, DescribeOptions, GetClient, OptionDescriptors,
    OptionScope, ResetKeys, ResourceTarget, SnapshotCompression, SnapshotFile, SnapshotRequest,
    SnapshotType, Stats, UpdateResource,
};
use proto::commands::tokens::{
    CreatePersonalAccessToken, DeletePersonalAccessToken, PersonalAccessTokens,
    RawPersonalAccessToken,
};
use proto::commands::topics::{
    CreateTopic, DeleteTopic, GetTopic, GetTopics, TopicDetails, Topics,
};
use proto::commands::users::{
    ChangePassword, CreateUser, DeleteUser, GetUser, UpdatePermissions, UserDetails, UserStatus,
    Users,
};
use proto::primitives::{AckLevel, HeaderKind, OptionsBlock};
use serde::Deserialize;
use serde_json::{Value, json};
use transport::ConnectionHandler;

use crate::auth::{AccessToken, Credentials};
use crate::console::{Console, NoConsole};
use crate::error::ApiError;
use crate::reply_json as out;
use crate::request_json::{self as body, parse};
use crate::route::{Id, Route, Target, route};
use crate::session::{Bound, Login, decode, encode};
use crate::values::to_tlv;
use crate::wire::{Request, Response};

/// The largest body of a request without a known credential: a client that proved nothing
/// holds at most this much (as `message_bus.max_unauthenticated_message_size` on the binary
/// transports).
pub const UNAUTHENTICATED_BODY_MAX: usize = 16 * 1024;

/// The Prometheus text exposition format, version 0.0.4.
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The time of a request, read by the listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub unix_us: u64,
}

impl Now {
    pub fn unix_s(self) -> u64 {
        self.unix_us / 1_000_000
    }
}

/// The API of one listener: the shard's handler and the credentials issued here.
pub struct Api<H: ConnectionHandler> {
    handler: Rc<H>,
    credentials: Credentials<H>,
    /// Option kinds per scope, from `DESCRIBE_OPTIONS` (the catalog does not change).
    kinds: RefCell<HashMap<u8, Vec<(String, HeaderKind)>>>,
    /// The metrics endpoint's path segments; `None` when metrics are off.
    metrics_endpoint: Option<Vec<String>>,
    /// The server's log and configuration, for the console routes.
    pub(crate) console: Rc<dyn Console>,
    /// Whether `/ui` serves the embedded web UI (`http.web_ui`, feature `web`).
    web_ui: bool,
}

impl<H: ConnectionHandler> std::fmt::Debug for Api<H> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Api")
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    Response::with_body(status, "application/json", value.to_string().into_bytes())
}

pub(crate) fn ok(value: &Value) -> Response {
    json_response(StatusCode::OK, value)
}

fn no_content() -> Response {
    Response::new(StatusCode::NO_CONTENT)
}

fn found(value: Option<Value>) -> Result<Response, ApiError> {
    value.map(|value| ok(&value)).ok_or(ApiError::NotFound)
}

fn identity(user_id: u32, token: &AccessToken) -> Response {
    ok(&json!({
        "user_id": user_id,
        "access_token": {"token": token.token, "expiry": token.expiry_s},
    }))
}

fn scope(name: &str) -> Result<OptionScope, ApiError> {
    match name {
        "topic" | "topics" => Ok(OptionScope::Topic),
        "stream" | "streams" => Ok(OptionScope::Stream),
        "user" | "users" => Ok(OptionScope::User),
        other => Err(ApiError::invalid(
            format!("unknown scope {other:?}"),
            "scope",
        )),
    }
}

impl<H: ConnectionHandler> Api<H> {
    pub fn new(handler: Rc<H>, credentials: Credentials<H>) -> Self {
        Self {
            handler,
            credentials,
            kinds: RefCell::default(),
            metrics_endpoint: None,
            console: Rc::new(NoConsole),
            web_ui: false,
        }
    }

    /// The same API, answering the console routes from `console`.
    pub fn with_console(mut self, console: Rc<dyn Console>) -> Self {
        self.console = console;
        self
    }

    /// The same API, serving the embedded web UI at `/ui` when `enabled` (and built with
    /// feature `web`).
    pub fn with_web_ui(mut self, enabled: bool) -> Self {
        self.web_ui = enabled;
        self
    }

    /// The same API, answering `GET endpoint` with the handler's metrics (`None`: off).
    pub fn with_metrics_endpoint(mut self, endpoint: Option<&str>) -> Self {
        self.metrics_endpoint = endpoint
            .and_then(|endpoint| Target::parse(endpoint).ok())
            .map(|target| target.segments);
        self
    }

    /// The largest body a request with `head` may send: the listener's limit for a known
    /// credential, [`UNAUTHENTICATED_BODY_MAX`] otherwise (logins and refreshes are small).
    /// A personal access token not seen before is logged in first when the body needs more
    /// than the small limit, so it is known by the time the request is answered (a failed
    /// login counts as one, and the request is refused as too large).
    pub async fn body_max(
        &self,
        head: &crate::wire::Head,
        (peer, now): (SocketAddr, Now),
        limit: usize,
    ) -> usize {
        let now_s = now.unix_s();
        let authorization = head.header("authorization");
        if self.credentials.known(authorization, now_s) {
            return limit;
        }
        // A body within the small limit (none at all included: no length and not chunked)
        // needs no login here; `dispatch` logs the credential in once, as for any request.
        let small = match head.header("content-length") {
            Some(length) => length
                .trim()
                .parse::<usize>()
                .is_ok_and(|length| length <= UNAUTHENTICATED_BODY_MAX),
            None => head.header("transfer-encoding").is_none(),
        };
        let token = crate::auth::bearer(authorization)
            .is_ok_and(|credential| credential.split('.').count() != 3);
        if small || !token {
            return UNAUTHENTICATED_BODY_MAX;
        }
        let session = self
            .credentials
            .session(&self.handler, peer, authorization, now_s)
            .await;
        if session.is_ok() {
            limit
        } else {
            UNAUTHENTICATED_BODY_MAX
        }
    }

    /// The response to `request` from `peer`.
    pub async fn handle(&self, peer: SocketAddr, request: &Request, now: Now) -> Response {
        match self.dispatch(peer, request, now).await {
            Ok(response) => response,
            Err(error) => {
                if matches!(error, ApiError::Internal(_)) {
                    log::error!("http: {} {}: {error}", request.method, request.target);
                } else {
                    log::debug!("http: {} {}: {error}", request.method, request.target);
                }
                error.response()
            }
        }
    }

    async fn dispatch(
        &self,
        peer: SocketAddr,
        request: &Request,
        now: Now,
    ) -> Result<Response, ApiError> {
        let target = Target::parse(&request.target)?;
        let method = if request.method == http::Method::HEAD {
            http::Method::GET
        } else {
            request.method.clone()
        };
        let metrics =
            method == http::Method::GET && self.metrics_endpoint.as_ref() == Some(&target.segments);
        let route = if metrics {
            Route::Metrics
        } else {
            match route(&method, &target.segments) {
                Ok(route) => route,
                // Without a credential, a malformed id in a route's path is not the client's
                // first problem: it is told it lacks one, as for any other private route.
                Err(ApiError::Invalid { .. }) if request.header("authorization").is_none() => {
                    return Err(ApiError::Code(ErrorCode::AccessTokenMissing.as_u32()));
                }
                Err(error) => return Err(error),
            }
        };
        // HEAD answers a read without its body; a poll may commit offsets, so it is refused.
        if request.method == http::Method::HEAD && matches!(route, Route::Poll(..)) {
            return Err(ApiError::MethodNotAllowed);
        }
        let body = request.body.as_slice();
        if route.is_public() {
            return self.public(peer, &route, body, now).await;
        }
        let authorization = request.header("authorization");
        let session = self
            .credentials
            .session(&self.handler, peer, authorization, now.unix_s())
            .await?;
        if route == Route::Logout {
            let _ = session.call(CommandCode::LogoutUser, &[]).await;
            self.credentials.revoke(authorization, now.unix_s());
            return Ok(no_content());
        }
        let call = Call {
            api: self,
            session: &session,
            target: &target,
            body,
            now,
        };
        call.route(route).await
    }

    /// The routes that need no credential.
    async fn public(
        &self,
        peer: SocketAddr,
        route: &Route,
        body: &[u8],
        now: Now,
    ) -> Result<Response, ApiError> {
        let (user, token) = match route {
            Route::Login => {
                let login: body::LoginBody = parse(body)?;
                let credentials = Login::Password {
                    username: &login.username,
                    password: &login.password,
                };
                let login = self
                    .credentials
                    .login(&self.handler, peer, credentials, now.unix_s());
                login.await?
            }
            Route::TokenLogin => {
                let login: body::TokenBody = parse(body)?;
                let credentials = Login::Token(&login.token);
                let login = self
                    .credentials
                    .login(&self.handler, peer, credentials, now.unix_s());
                login.await?
            }
            Route::RefreshToken => {
                let refresh: body::TokenBody = parse(body)?;
                self.credentials.refresh(&refresh.token, now.unix_s())?
            }
            Route::Ping => {
                let pong = b"pong".to_vec();
                return Ok(Response::with_body(StatusCode::OK, "text/plain", pong));
            }
            Route::Ui(file) if self.web_ui => {
                return crate::ui::asset(file).ok_or(ApiError::NoRoute);
            }
            Route::Ui(_) => return Err(ApiError::NoRoute),
            _ => {
                let text = b"Iggy HTTP API".to_vec();
                return Ok(Response::with_body(StatusCode::OK, "text/plain", text));
            }
        };
        Ok(identity(user, &token))
    }

    /// The kinds of the options of `scope`.
    async fn kinds(
        &self,
        session: &Bound<H>,
        scope: OptionScope,
    ) -> Result<Vec<(String, HeaderKind)>, ApiError> {
        if let Some(kinds) = self.kinds.borrow().get(&scope.as_u8()) {
            return Ok(kinds.clone());
        }
        let descriptors: OptionDescriptors = session
            .request(CommandCode::DescribeOptions, &DescribeOptions { scope })
            .await?;
        let kinds: Vec<(String, HeaderKind)> = descriptors
            .0
            .iter()
            .map(|descriptor| (descriptor.key.as_str().to_owned(), descriptor.kind))
            .collect();
        self.kinds.borrow_mut().insert(scope.as_u8(), kinds.clone());
        Ok(kinds)
    }
}

/// One authenticated request.
pub(crate) struct Call<'c, H: ConnectionHandler> {
    pub(crate) api: &'c Api<H>,
    pub(crate) session: &'c Bound<H>,
    pub(crate) target: &'c Target,
    body: &'c [u8],
    now: Now,
}

impl<H: ConnectionHandler> Call<'_, H> {
    pub(crate) async fn get<T: for<'a> proto::Codec<'a>>(
        &self,
        code: CommandCode,
        request: &impl for<'a> proto::Codec<'a>,
    ) -> Result<T, ApiError> {
        self.session.request(code, request).await
    }

    /// A request whose reply is empty: 204.
    async fn done(
        &self,
        code: CommandCode,
        request: &impl for<'a> proto::Codec<'a>,
    ) -> Result<Response, ApiError> {
        self.session.call(code, &encode(request)).await?;
        Ok(no_content())
    }

    async fn route(&self, route: Route) -> Result<Response, ApiError> {
        match route {
            Route::Metrics => match self.api.handler.metrics().await {
                Some(text) => Ok(Response::with_body(
                    StatusCode::OK,
                    METRICS_CONTENT_TYPE,
                    text.into_bytes(),
                )),
                None => Err(ApiError::Unavailable("metrics")),
            },
            Route::Stats => {
                let stats: Stats = self.get(CommandCode::GetStats, &Empty).await?;
                Ok(ok(&out::stats(&stats)))
            }
            Route::Options(name) => {
                let request = DescribeOptions {
                    scope: scope(&name)?,
                };
                let specs: OptionDescriptors =
                    self.get(CommandCode::DescribeOptions, &request).await?;
                Ok(ok(&out::option_specs(&specs)))
            }
            Route::Snapshot => self.snapshot().await,
            Route::ClusterMetadata => {
                let metadata: ClusterMetadata =
                    self.get(CommandCode::GetClusterMetadata, &Empty).await?;
                Ok(ok(&out::cluster(&metadata)))
            }
            Route::Clients => {
                let clients: Clients = self.get(CommandCode::GetClients, &Empty).await?;
                Ok(ok(&clients.0.iter().map(out::client).collect()))
            }
            Route::Client(client_id) => {
                let client: Option<ClientDetails> = self
                    .get(CommandCode::GetClient, &GetClient { client_id })
                    .await?;
                found(client.as_ref().map(out::client_details))
            }
            route @ (Route::Tokens | Route::CreateToken | Route::DeleteToken(_)) => {
                self.tokens(route).await
            }
            route @ (Route::Users
            | Route::CreateUser
            | Route::User(_)
            | Route::UpdateUser(_)
            | Route::DeleteUser(_)
            | Route::ChangePassword(_)
            | Route::UpdatePermissions(_)) => self.users(route).await,
            Route::Send(s, t) => self.send(&s, &t).await,
            Route::Poll(s, t) => self.poll(s, t).await,
            Route::GetOffset(..) | Route::StoreOffset(..) | Route::DeleteOffset(..) => {
                self.offsets(route).await
            }
            route @ (Route::Groups(..)
            | Route::CreateGroup(..)
            | Route::Group(..)
            | Route::DeleteGroup(..)) => self.groups(route).await,
            route @ (Route::Logs | Route::Config | Route::GroupLag(..)) => {
                self.console(route).await
            }
            route => self.streams(route).await,
        }
    }

    async fn tokens(&self, route: Route) -> Result<Response, ApiError> {
        match route {
            Route::Tokens => {
                let tokens: PersonalAccessTokens = self
                    .get(CommandCode::GetPersonalAccessTokens, &Empty)
                    .await?;
                Ok(ok(&tokens.0.iter().map(out::token_info).collect()))
            }
            Route::CreateToken => {
                let create: body::CreateTokenBody = parse(self.body)?;
                let request = CreatePersonalAccessToken {
                    name: body::name(&create.name, "name")?,
                    expiry: create.expiry,
                };
                let token: RawPersonalAccessToken = self
                    .get(CommandCode::CreatePersonalAccessToken, &request)
                    .await?;
                Ok(ok(&out::raw_token(&token)))
            }
            Route::DeleteToken(name) => {
                let request = DeletePersonalAccessToken {
                    name: body::name(&name, "name")?,
                };
                self.done(CommandCode::DeletePersonalAccessToken, &request)
                    .await
            }
            _ => Err(ApiError::NoRoute),
        }
    }

    async fn users(&self, route: Route) -> Result<Response, ApiError> {
        match route {
            Route::Users => {
                let users: Users = self.get(CommandCode::GetUsers, &Empty).await?;
                Ok(ok(&users.0.iter().map(out::user).collect()))
            }
            Route::CreateUser => {
                let create: body::CreateUserBody = parse(self.body)?;
                let status = match create.status.as_deref().unwrap_or("active") {
                    "active" => UserStatus::Active,
                    "inactive" => UserStatus::Inactive,
                    other => {
                        return Err(ApiError::invalid(
                            format!("unknown status {other:?}"),
                            "status",
                        ));
                    }
                };
                let request = CreateUser {
                    username: body::name(&create.username, "username")?,
                    password: body::secret(&create.password, "password")?,
                    status,
                    permissions: create
                        .permissions
                        .map(body::PermissionsBody::into_permissions)
                        .transpose()?,
                    options: self.options(OptionScope::User, create.options).await?,
                };
                let user: UserDetails = self.get(CommandCode::CreateUser, &request).await?;
                Ok(ok(&out::user_details(&user)))
            }
            Route::User(user_id) => {
                let user: Option<UserDetails> =
                    self.get(CommandCode::GetUser, &GetUser { user_id }).await?;
                found(user.as_ref().map(out::user_details))
            }
            Route::UpdateUser(user_id) => self.update(ResourceTarget::User { user_id }).await,
            Route::DeleteUser(user_id) => {
                self.done(CommandCode::DeleteUser, &DeleteUser { user_id })
                    .await
            }
            Route::ChangePassword(user_id) => {
                let change: body::ChangePasswordBody = parse(self.body)?;
                let request = ChangePassword {
                    user_id,
                    current_password: body::secret(&change.current_password, "current_password")?,
                    new_password: body::secret(&change.new_password, "new_password")?,
                };
                self.done(CommandCode::ChangePassword, &request).await
            }
            Route::UpdatePermissions(user_id) => {
                let update: body::UpdatePermissionsBody = parse(self.body)?;
                let permissions = update
                    .permissions
                    .map(body::PermissionsBody::into_permissions)
                    .transpose()?;
                let request = UpdatePermissions {
                    user_id,
                    permissions,
                };
                self.done(CommandCode::UpdatePermissions, &request).await
            }
            _ => Err(ApiError::NoRoute),
        }
    }

    async fn streams(&self, route: Route) -> Result<Response, ApiError> {
        match route {
            Route::Streams => {
                let streams: Streams = self.get(CommandCode::GetStreams, &Empty).await?;
                Ok(ok(&streams.0.iter().map(out::stream).collect()))
            }
            Route::CreateStream => {
                let create: body::CreateStreamBody = parse(self.body)?;
                let request = CreateStream {
                    name: body::name(&create.name, "name")?,
                    options: self.options(OptionScope::Stream, create.options).await?,
                };
                let stream: StreamDetails = self.get(CommandCode::CreateStream, &request).await?;
                Ok(ok(&out::stream_details(&stream)))
            }
            Route::Stream(stream_id) => {
                let stream: Option<StreamDetails> = self
                    .get(CommandCode::GetStream, &GetStream { stream_id })
                    .await?;
                found(stream.as_ref().map(out::stream_details))
            }
            Route::UpdateStream(stream_id) => {
                self.update(ResourceTarget::Stream { stream_id }).await
            }
            Route::DeleteStream(stream_id) => {
                self.done(CommandCode::DeleteStream, &DeleteStream { stream_id })
                    .await
            }
            Route::PurgeStream(stream_id) => {
                let request = proto::commands::legacy::PurgeStream { stream_id };
                self.done(CommandCode::PurgeStream, &request).await
            }
            Route::PurgeTopic(stream_id, topic_id) => {
                let request = proto::commands::legacy::PurgeTopic {
                    stream_id,
                    topic_id,
                };
                self.done(CommandCode::PurgeTopic, &request).await
            }
            route => self.topics(route).await,
        }
    }

    async fn topics(&self, route: Route) -> Result<Response, ApiError> {
        match route {
            Route::Topics(stream_id) => {
                let topics: Topics = self
                    .get(CommandCode::GetTopics, &GetTopics { stream_id })
                    .await?;
                Ok(ok(&topics.0.iter().map(out::topic).collect()))
            }
            Route::CreateTopic(stream_id) => {
                let create: body::CreateTopicBody = parse(self.body)?;
                let request = CreateTopic {
                    stream_id,
                    partitions_count: create.partitions_count,
                    name: body::name(&create.name, "name")?,
                    options: self.options(OptionScope::Topic, create.options).await?,
                };
                let topic: TopicDetails = self.get(CommandCode::CreateTopic, &request).await?;
                Ok(ok(&out::topic_details(&topic)))
            }
            Route::Topic(stream_id, topic_id) => {
                let request = GetTopic {
                    stream_id,
                    topic_id,
                };
                let topic: Option<TopicDetails> = self.get(CommandCode::GetTopic, &request).await?;
                found(topic.as_ref().map(out::topic_details))
            }
            Route::UpdateTopic(stream_id, topic_id) => {
                self.update(ResourceTarget::Topic {
                    stream_id,
                    topic_id,
                })
                .await
            }
            Route::DeleteTopic(stream_id, topic_id) => {
                self.done(
                    CommandCode::DeleteTopic,
                    &DeleteTopic {
                        stream_id,
                        topic_id,
                    },
                )
                .await
            }
            route => self.partitions(route).await,
        }
    }

    async fn partitions(&self, route: Route) -> Result<Response, ApiError> {
        let count = |key: &'static str| -> Result<u32, ApiError> {
            self.target
                .query(key)
                .ok_or_else(|| ApiError::invalid(format!("{key} is required"), key))?
                .parse()
                .map_err(|_e| ApiError::invalid(format!("{key} must be a number"), key))
        };
        match route {
            Route::CreatePartitions(stream_id, topic_id) => {
                let create: body::PartitionsBody = parse(self.body)?;
                let request = CreatePartitions {
                    stream_id,
                    topic_id,
                    partitions_count: create.partitions_count,
                };
                self.session
                    .call(CommandCode::CreatePartitions, &encode(&request))
                    .await?;
                Ok(Response::new(StatusCode::OK))
            }
            Route::DeletePartitions(stream_id, topic_id) => {
                let request = DeletePartitions {
                    stream_id,
                    topic_id,
                    partitions_count: count("partitions_count")?,
                };
                self.done(CommandCode::DeletePartitions, &request).await
            }
            Route::DeleteSegments(stream_id, topic_id, partition_id) => {
                let request = DeleteSegments {
                    stream_id,
                    topic_id,
                    partition_id,
                    segments_count: count("segments_count")?,
                };
                self.done(CommandCode::DeleteSegments, &request).await
            }
            _ => Err(ApiError::NoRoute),
        }
    }

    async fn groups(&self, route: Route) -> Result<Response, ApiError> {
        match route {
            Route::Groups(stream_id, topic_id) => {
                let request = GetConsumerGroups {
                    stream_id,
                    topic_id,
                };
                let groups: ConsumerGroups =
                    self.get(CommandCode::GetConsumerGroups, &request).await?;
                Ok(ok(&groups.0.iter().map(out::group).collect()))
            }
            Route::CreateGroup(stream_id, topic_id) => {
                let create: body::NameBody = parse(self.body)?;
                let request = CreateConsumerGroup {
                    stream_id,
                    topic_id,
                    name: body::name(&create.name, "name")?,
                };
                let group: ConsumerGroupDetails =
                    self.get(CommandCode::CreateConsumerGroup, &request).await?;
                Ok(ok(&out::group_details(&group)))
            }
            Route::Group(stream_id, topic_id, group_id) => {
                let request = GetConsumerGroup {
                    stream_id,
                    topic_id,
                    group_id,
                };
                let group: Option<ConsumerGroupDetails> =
                    self.get(CommandCode::GetConsumerGroup, &request).await?;
                found(group.as_ref().map(out::group_details))
            }
            Route::DeleteGroup(stream_id, topic_id, group_id) => {
                let request = DeleteConsumerGroup {
                    stream_id,
                    topic_id,
                    group_id,
                };
                self.done(CommandCode::DeleteConsumerGroup, &request).await
            }
            _ => Err(ApiError::NoRoute),
        }
    }

    async fn offsets(&self, route: Route) -> Result<Response, ApiError> {
        match route {
            Route::GetOffset(stream_id, topic_id) => {
                let (consumer, partition) = body::offset_query(self.target, None)?;
                let selector = OffsetSelector {
                    consumer,
                    stream_id,
                    topic_id,
                    partition,
                };
                let offset: Option<ConsumerOffset> = self
                    .get(
                        CommandCode::GetConsumerOffset,
                        &GetConsumerOffset { selector },
                    )
                    .await?;
                found(offset.as_ref().map(out::offset))
            }
            Route::StoreOffset(stream_id, topic_id) => {
                let store: body::StoreOffsetBody = parse(self.body)?;
                let consumer = body::consumer(store.consumer_kind.as_deref(), &store.consumer_id)?;
                let partition = proto::primitives::OptionalPartition(store.partition_id);
                let selector = OffsetSelector {
                    consumer,
                    stream_id,
                    topic_id,
                    partition,
                };
                let request = StoreConsumerOffset {
                    selector,
                    offset: store.offset,
                    ack: AckLevel::Quorum,
                };
                self.done(CommandCode::StoreConsumerOffset, &request).await
            }
            Route::DeleteOffset(stream_id, topic_id, consumer_id) => {
                let (consumer, partition) = body::offset_query(self.target, Some(&consumer_id))?;
                let selector = OffsetSelector {
                    consumer,
                    stream_id,
                    topic_id,
                    partition,
                };
                let request = DeleteConsumerOffset {
                    selector,
                    ack: AckLevel::Quorum,
                };
                self.done(CommandCode::DeleteConsumerOffset, &request).await
            }
            _ => Err(ApiError::NoRoute),
        }
    }

    async fn send(&self, stream_id: &Id, topic_id: &Id) -> Result<Response, ApiError> {
        let send: body::SendBody = parse(self.body)?;
        let request = body::send_request(&send, stream_id, topic_id, self.now.unix_us)?;
        let payload = self
            .session
            .call(CommandCode::SendMessages, &request)
            .await?;
        if self.target.query("ack") == Some("none") {
            return Ok(Response::new(StatusCode::ACCEPTED));
        }
        let confirmations: SendConfirmations = decode(&payload)?;
        Ok(json_response(
            StatusCode::CREATED,
            &out::confirmations(&confirmations),
        ))
    }

    async fn poll(&self, stream_id: Id, topic_id: Id) -> Result<Response, ApiError> {
        let (selector, deferral) = body::poll_query(self.target, stream_id, topic_id)?;
        let deferred = self
            .target
            .segments
            .last()
            .is_some_and(|last| last == "deferred");
        let payload = if deferred {
            let request = PollMessagesDeferred {
                selector,
                wait_us: deferral.wait_us,
                min_count: deferral.min_count,
                max_bytes: deferral.max_bytes,
                request_timeout_us: deferral.request_timeout_us,
            };
            self.session
                .call(CommandCode::PollMessagesDeferred, &encode(&request))
                .await?
        } else {
            self.session
                .call(CommandCode::PollMessages, &encode(&selector))
                .await?
        };
        let polled: PolledMessages<'_> =
            proto::codec::decode_exact(&payload, proto::Dialect::V0_12_2)
                .map_err(|error| ApiError::Internal(format!("poll reply: {error}")))?;
        let json = out::polled(&polled)?;
        Ok(Response::with_body(
            StatusCode::OK,
            "application/json",
            json,
        ))
    }

    async fn snapshot(&self) -> Result<Response, ApiError> {
        #[derive(Deserialize)]
        struct SnapshotBody {
            #[serde(default)]
            compression: Option<String>,
            #[serde(default)]
            snapshot_types: Vec<String>,
        }
        let snapshot: SnapshotBody = parse(self.body)?;
        let compression = match snapshot.compression.as_deref().unwrap_or("Deflated") {
            "Stored" | "stored" => SnapshotCompression::Stored,
            "Deflated" | "deflated" => SnapshotCompression::Deflated,
            other => {
                return Err(ApiError::invalid(
                    format!("unsupported compression {other:?}"),
                    "compression",
                ));
            }
        };
        let types = snapshot
            .snapshot_types
            .iter()
            .map(|name| match name.as_str() {
                "FilesystemOverview" | "filesystem_overview" => {
                    Ok(SnapshotType::FilesystemOverview)
                }
                "ProcessList" | "process_list" => Ok(SnapshotType::ProcessList),
                "ResourceUsage" | "resource_usage" => Ok(SnapshotType::ResourceUsage),
                "Test" | "test" => Ok(SnapshotType::Test),
                "ServerLogs" | "server_logs" => Ok(SnapshotType::ServerLogs),
                "ServerConfig" | "server_config" => Ok(SnapshotType::ServerConfig),
                "All" | "all" => Ok(SnapshotType::All),
                other => Err(ApiError::invalid(
                    format!("unknown snapshot type {other:?}"),
                    "snapshot_types",
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let request = SnapshotRequest { compression, types };
        let file: SnapshotFile = self.get(CommandCode::GetSnapshotFile, &request).await?;
        Ok(Response::with_body(
            StatusCode::OK,
            "application/zip",
            file.0,
        ))
    }

    /// `UPDATE_RESOURCE` from a flat update body (§8.4): every non-null key but `reset` is
    /// an option to set; `reset` lists keys to return to their defaults.
    async fn update(&self, target: ResourceTarget) -> Result<Response, ApiError> {
        let fields: BTreeMap<String, Value> = parse(self.body)?;
        let mut reset = Vec::new();
        let mut set = BTreeMap::new();
        for (key, value) in fields {
            match (key.as_str(), value) {
                (_, Value::Null) => {}
                ("reset", Value::Array(keys)) => {
                    for key in keys {
                        let key = key
                            .as_str()
                            .ok_or_else(|| ApiError::invalid("reset lists keys", "reset"))?;
                        reset.push(body::name(key, "reset")?);
                    }
                }
                ("reset", _) => return Err(ApiError::invalid("reset lists keys", "reset")),
                (_, value) => {
                    set.insert(key, value);
                }
            }
        }
        let reset =
            ResetKeys::new(reset).ok_or_else(|| ApiError::invalid("reset keys repeat", "reset"))?;
        let options = self.options(target.scope(), Some(set)).await?;
        let request = UpdateResource {
            target,
            reset,
            options,
        };
        self.done(CommandCode::UpdateResource, &request).await
    }

    /// The options of a body as a block, each value converted to its key's kind. A key the
    /// catalog does not have is sent as a string (or its JSON type) for the core to refuse.
    async fn options(
        &self,
        scope: OptionScope,
        options: Option<BTreeMap<String, Value>>,
    ) -> Result<OptionsBlock, ApiError> {
        let options = options.unwrap_or_default();
        let mut block = OptionsBlock::default();
        if options.is_empty() {
            return Ok(block);
        }
        let kinds = self.api.kinds(self.session, scope).await?;
        for (key, value) in options {
            if value.is_null() {
                continue;
            }
            let kind = kinds.iter().find(|(name, _)| *name == key).map_or(
                match value {
                    Value::Bool(_) => HeaderKind::Bool,
                    Value::Number(_) => HeaderKind::Uint64,
                    _ => HeaderKind::String,
                },
                |(_, kind)| *kind,
            );
            let entry = to_tlv(kind, &value).map_err(|reason| ApiError::Invalid {
                reason: format!("option {key}: {reason}"),
                field: Some("options"),
            })?;
            let name = body::name(&key, "options")?;
            block.0.push((name, entry));
        }
        Ok(block)
    }
}
