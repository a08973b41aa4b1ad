//! The metadata families end to end through [`super::dispatch`] on a real data plane in a
//! temporary directory: replies decode as the SDK decodes them, refusals travel in the
//! channel their operation uses.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use proto::codec::{WireName, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::legacy::{PurgeTopic, UpdateStream, UpdateUser};
use proto::commands::partitions::{CreatePartitions, DeletePartitions, DeleteSegments};
use proto::commands::session::Secret;
use proto::commands::streams::{CreateStream, DeleteStream, GetStream};
use proto::commands::system::{ResetKeys, ResourceTarget, UpdateResource};
use proto::commands::tokens::{CreatePersonalAccessToken, DeletePersonalAccessToken};
use proto::commands::topics::{CreateTopic, GetTopic, GetTopics};
use proto::commands::users::{ChangePassword, CreateUser, GetUser, UserStatus};
use proto::commands::{Empty, Reply, ReplyOutcome, Request};
use proto::header::RequestHeader;
use proto::primitives::{Identifier, OptionsBlock, TlvEntry};
use proto::{Codec, Dialect};

use crate::connection::{BoundSession, Connection, TransportKind};
use crate::metadata::Metadata;
use crate::metadata::auth::hash_password;
use crate::outcome::Outcome;
use crate::refusal::{Missing, Protected, Refusal, Taken};
use crate::server::{Server, ServerInfo};

pub(super) const CLIENT: u128 = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10;

/// A server on a fresh directory with the root user (`iggy`/`secret`), removed on drop.
pub(super) struct Fixture {
    pub(super) server: std::rc::Rc<Server>,
    pub(super) root: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub(super) fn fixture() -> Fixture {
    fixture_with(info())
}

/// [`fixture`] with the settings `info`.
pub(super) fn fixture_with(info: ServerInfo) -> Fixture {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let root = std::env::temp_dir().join(format!(
        "shard-handler-tests-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let server = Server::new(info, Metadata::default(), root.clone());
    Fixture { server, root }
}

/// A single node's settings, with the defaults the tests need.
pub(super) fn info() -> ServerInfo {
    ServerInfo {
        roster: crate::cluster::Roster::one_node("iggy-cluster", "iggy-node", "127.0.0.1"),
        tcp_port: 8090,
        websocket_port: 0,
        http_port: 0,
        quic_port: 0,
        started_at_us: 0,
        logins: crate::login_limit::LoginLimits::default(),
        groups: crate::data::GroupConfig::default(),
        validate_checksum: false,
        enforce_fsync: false,
        sync_interval_us: segment::log::SYNC_INTERVAL_DEFAULT_US,
        accept_metadata_loss: false,
    }
}

/// A connection logged in as `user_id` in `dialect`.
pub(super) fn connection(server: &Server, user_id: u32, dialect: Dialect) -> Connection {
    let mut connection =
        server.open_connection("127.0.0.1:5000".parse().unwrap(), TransportKind::Tcp);
    connection.dialect = dialect;
    connection.session = Some(BoundSession {
        client_id: CLIENT,
        session: 1,
        user_id,
    });
    connection
}

/// Dispatches `body` as `code` and returns the reply as the edge gets it.
pub(super) async fn reply_to<T: for<'a> Codec<'a>>(
    server: &Server,
    connection: &mut Connection,
    code: CommandCode,
    body: &T,
) -> crate::outcome::Reply {
    numbered_reply_to(server, connection, code, body, 0).await
}

/// As [`reply_to`], the header numbered `request` (an SDK's retry repeats the number).
pub(super) async fn numbered_reply_to<T: for<'a> Codec<'a>>(
    server: &Server,
    connection: &mut Connection,
    code: CommandCode,
    body: &T,
    request: u64,
) -> crate::outcome::Reply {
    let encoded = encode_to_vec(body, connection.dialect);
    let mut header = RequestHeader::new(CLIENT, code.operation(), encoded.len());
    header.code = code.as_u32().into();
    header.request = request.into();
    let request = Request::decode(code, &encoded, connection.dialect).unwrap();
    let outcome = super::dispatch(server, connection, &header, request).await;
    let Outcome::Reply(reply) = outcome else {
        panic!("{code:?}: no reply: {outcome:?}");
    };
    reply
}

/// Dispatches `body` as `code`, then decodes the reply as the SDK would.
pub(super) async fn call<T: for<'a> Codec<'a>>(
    server: &Server,
    connection: &mut Connection,
    code: CommandCode,
    body: &T,
) -> Result<Option<Vec<u8>>, u32> {
    let operation = code.operation();
    let reply = reply_to(server, connection, code, body).await;
    assert_eq!(reply.operation, operation, "{code:?} echoes its operation");
    let body = reply.encode_body(connection.dialect);
    if reply.status_code() != 0 {
        assert!(body.is_empty());
        return Err(reply.status_code());
    }
    let decoded = Reply::decode_body(code, operation, &body, connection.dialect);
    match decoded.unwrap() {
        ReplyOutcome::Refused(code) => Err(code),
        ReplyOutcome::Ok(_) => {
            let framed = if operation.is_result_framed() { 4 } else { 0 };
            let payload = body.get(framed..).unwrap_or_default().to_vec();
            Ok((!payload.is_empty()).then_some(payload))
        }
    }
}

pub(super) fn decode<T: for<'a> Codec<'a>>(payload: &[u8], dialect: Dialect) -> T {
    proto::codec::decode_exact(payload, dialect).unwrap()
}

pub(super) fn name(text: &str) -> WireName {
    WireName::new(text).unwrap()
}

pub(super) fn id(text: &str) -> Identifier {
    Identifier::name(text).unwrap()
}

pub(super) fn code(refusal: Refusal) -> u32 {
    refusal.code().as_u32()
}

pub(super) async fn root_user(server: &Server) {
    let created = server
        .ensure_root_user("iggy", hash_password("secret").unwrap())
        .await;
    assert_eq!(created, Ok(true));
}

pub(super) fn create_topic(stream: &str, topic: &str, partitions_count: u32) -> CreateTopic {
    CreateTopic {
        stream_id: id(stream),
        partitions_count,
        name: name(topic),
        options: OptionsBlock::default(),
    }
}

#[test]
fn streams_topics_and_partitions_round_trip() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        root_user(server).await;
        let dialect = Dialect::V0_12_2;
        let mut root = connection(server, 0, dialect);
        let create = CreateStream {
            name: name("orders"),
            options: OptionsBlock::default(),
        };
        let created = call(server, &mut root, CommandCode::CreateStream, &create).await;
        let details: proto::commands::streams::StreamDetails =
            decode(&created.unwrap().unwrap(), dialect);
        assert_eq!((details.stream.id, details.stream.topics_count), (0, 0));
        let again = call(server, &mut root, CommandCode::CreateStream, &create).await;
        assert_eq!(again, Err(code(Refusal::Taken(Taken::StreamName))));

        let topic = create_topic("orders", "events", 2);
        let created = call(server, &mut root, CommandCode::CreateTopic, &topic).await;
        let details: proto::commands::topics::TopicDetails =
            decode(&created.unwrap().unwrap(), dialect);
        assert_eq!(details.partitions.len(), 2);
        assert_eq!(details.partitions[0].segments_count, 1);

        let get = GetTopic {
            stream_id: id("orders"),
            topic_id: id("missing"),
        };
        let missing = call(server, &mut root, CommandCode::GetTopic, &get).await;
        assert_eq!(missing, Ok(None));
        let unknown_stream = GetTopics {
            stream_id: id("nope"),
        };
        let listed = call(server, &mut root, CommandCode::GetTopics, &unknown_stream).await;
        let topics: proto::commands::topics::Topics = decode(&listed.unwrap().unwrap(), dialect);
        assert!(topics.0.is_empty());

        let grow = CreatePartitions {
            stream_id: id("orders"),
            topic_id: id("events"),
            partitions_count: 2,
        };
        let grown = call(server, &mut root, CommandCode::CreatePartitions, &grow).await;
        assert_eq!(grown, Ok(None));
        let shrink = DeletePartitions {
            stream_id: id("orders"),
            topic_id: id("events"),
            partitions_count: 1,
        };
        let removed = call(server, &mut root, CommandCode::DeletePartitions, &shrink).await;
        assert_eq!(removed, Ok(None));
        let get = GetTopic {
            stream_id: 0.into(),
            topic_id: 0.into(),
        };
        let found = call(server, &mut root, CommandCode::GetTopic, &get).await;
        let details: proto::commands::topics::TopicDetails =
            decode(&found.unwrap().unwrap(), dialect);
        let ids: Vec<u32> = details.partitions.iter().map(|p| p.id).collect();
        assert_eq!(ids, [0, 1, 2]);

        let segments = DeleteSegments {
            stream_id: id("orders"),
            topic_id: id("events"),
            partition_id: 1,
            segments_count: 3,
        };
        let deleted = call(server, &mut root, CommandCode::DeleteSegments, &segments).await;
        assert_eq!(deleted, Ok(None));
        let nowhere = DeleteSegments {
            partition_id: 9,
            ..segments
        };
        let refused = call(server, &mut root, CommandCode::DeleteSegments, &nowhere).await;
        assert_eq!(refused, Err(code(Refusal::Missing(Missing::Partition))));

        let mut rename = OptionsBlock::default();
        rename.set("name", TlvEntry::string("renamed").unwrap());
        let patch = UpdateResource {
            target: ResourceTarget::Stream {
                stream_id: id("orders"),
            },
            reset: ResetKeys::new(Vec::new()).unwrap(),
            options: rename,
        };
        let patched = call(server, &mut root, CommandCode::UpdateResource, &patch).await;
        assert_eq!(patched, Ok(None));
        assert_eq!(server.metadata.borrow().streams[&0].name, "renamed");

        let delete = DeleteStream {
            stream_id: id("renamed"),
        };
        let deleted = call(server, &mut root, CommandCode::DeleteStream, &delete).await;
        assert_eq!(deleted, Ok(None));
        let get = GetStream {
            stream_id: 0.into(),
        };
        let gone = call(server, &mut root, CommandCode::GetStream, &get).await;
        assert_eq!(gone, Ok(None));
        server.close().await.unwrap();
    });
}

#[test]
fn users_tokens_and_refusals() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        root_user(server).await;
        let dialect = Dialect::V0_12_2;
        let mut root = connection(server, 0, dialect);
        let create = CreateUser {
            username: name("alice"),
            password: Secret::new("wonderland").unwrap(),
            status: UserStatus::Active,
            permissions: None,
            options: OptionsBlock::default(),
        };
        let created = call(server, &mut root, CommandCode::CreateUser, &create).await;
        let details: proto::commands::users::UserDetails =
            decode(&created.unwrap().unwrap(), dialect);
        assert_eq!((details.user.id, details.permissions), (1, None));
        let get = GetUser {
            user_id: id("nobody"),
        };
        let missing = call(server, &mut root, CommandCode::GetUser, &get).await;
        assert_eq!(missing, Ok(None));

        let mut alice = connection(server, 1, dialect);
        let users = call(server, &mut alice, CommandCode::GetUsers, &Empty).await;
        assert_eq!(
            users,
            Err(code(Refusal::Forbidden)),
            "reads refuse in status"
        );
        let stream = CreateStream {
            name: name("mine"),
            options: OptionsBlock::default(),
        };
        let refused = call(server, &mut alice, CommandCode::CreateStream, &stream).await;
        assert_eq!(
            refused,
            Err(code(Refusal::Forbidden)),
            "in the result section"
        );
        let change = ChangePassword {
            user_id: id("alice"),
            current_password: Secret::new("wonderland").unwrap(),
            new_password: Secret::new("looking-glass").unwrap(),
        };
        let changed = call(server, &mut alice, CommandCode::ChangePassword, &change).await;
        assert_eq!(changed, Ok(None));
        assert_eq!(
            server
                .metadata
                .borrow()
                .authenticate("alice", "looking-glass", &server.credentials),
            Ok(1)
        );

        let token = CreatePersonalAccessToken {
            name: name("ci-token"),
            expiry: CreatePersonalAccessToken::EXPIRY_NEVER,
        };
        let minted = call(
            server,
            &mut alice,
            CommandCode::CreatePersonalAccessToken,
            &token,
        );
        let minted: proto::commands::tokens::RawPersonalAccessToken =
            decode(&minted.await.unwrap().unwrap(), dialect);
        let owner = server.metadata.borrow().authenticate_token(
            minted.token.expose(),
            0,
            &server.credentials,
        );
        assert_eq!(owner, Ok(1));
        let listed = call(
            server,
            &mut alice,
            CommandCode::GetPersonalAccessTokens,
            &Empty,
        );
        let tokens: proto::commands::tokens::PersonalAccessTokens =
            decode(&listed.await.unwrap().unwrap(), dialect);
        assert_eq!(tokens.0.len(), 1);
        let delete = DeletePersonalAccessToken {
            name: name("ci-token"),
        };
        let code_43 = CommandCode::DeletePersonalAccessToken;
        assert_eq!(call(server, &mut alice, code_43, &delete).await, Ok(None));
        let again = call(server, &mut alice, code_43, &delete).await;
        assert_eq!(again, Err(code(Refusal::Missing(Missing::Resource))));
    });
}

#[test]
fn legacy_updates_and_purges_answer_result_sections() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        root_user(server).await;
        let dialect = Dialect::V0_11_0;
        let mut root = connection(server, 0, dialect);
        let create = CreateStream {
            name: name("legacy"),
            options: OptionsBlock::default(),
        };
        let created = call(server, &mut root, CommandCode::CreateStream, &create).await;
        assert!(created.is_ok());
        let topic = create_topic("legacy", "t", 1);
        assert!(
            call(server, &mut root, CommandCode::CreateTopic, &topic)
                .await
                .is_ok()
        );
        let update = UpdateStream {
            stream_id: id("legacy"),
            name: name("old-school"),
            options: OptionsBlock::default(),
        };
        let updated = call(server, &mut root, CommandCode::UpdateStream, &update).await;
        assert_eq!(updated, Ok(None));
        let purge = PurgeTopic {
            stream_id: id("old-school"),
            topic_id: id("t"),
        };
        let purged = call(server, &mut root, CommandCode::PurgeTopic, &purge).await;
        assert_eq!(purged, Ok(None));
        let rename_root = UpdateUser {
            user_id: 0.into(),
            username: Some(name("admin")),
            status: None,
            options: OptionsBlock::default(),
        };
        let refused = call(server, &mut root, CommandCode::UpdateUser, &rename_root).await;
        assert_eq!(
            refused,
            Err(Refusal::Protected(Protected::RootUser)
                .code()
                .for_dialect(dialect)
                .as_u32())
        );
        server.close().await.unwrap();
    });
}
