//! `Server::handle` end to end on frames: the unauthenticated rules, login, bind, logout,
//! the system commands a client sends first, and the eviction of stale group members.

use std::future::Future;

use proto::Dialect;
use proto::codec::{WireName, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::session::{BindSecret, BindSession, LoginRegister, LoginReply, Secret};
use proto::commands::system::ClusterMetadata;
use proto::commands::{Reply, ReplyOutcome};
use proto::dialect::{ProtocolVersion, VersionPrefix};
use proto::header::{EvictionReason, Operation, RequestHeader};
use zerocopy::IntoBytes;

use super::{Server, ServerInfo};
use crate::clock::system_now_us as now_us;
use crate::connection::{Connection, TransportKind};
use crate::data::GroupKey;
use crate::metadata::Metadata;
use crate::metadata::auth::hash_password;
use crate::outcome::Outcome;
use crate::refusal::{Missing, Refusal, Unavailable};

const CLIENT: u128 = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10;

/// Runs a future that never waits on I/O (the handlers of these tests do not).
fn block_on<F: Future>(future: F) -> F::Output {
    compio::runtime::Runtime::new()
        .expect("a compio runtime starts")
        .block_on(future)
}

fn server() -> std::rc::Rc<Server> {
    let info = ServerInfo {
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
    };
    let root = std::env::temp_dir().join("shard-server-tests-unused");
    let server = Server::new(info, Metadata::default(), root);
    let created = block_on(server.ensure_root_user("iggy", hash_password("secret").unwrap()));
    assert_eq!(created, Ok(true));
    server
}

fn open(server: &Server) -> Connection {
    server.open_connection("127.0.0.1:5000".parse().unwrap(), TransportKind::Tcp)
}

fn header(operation: Operation, code: CommandCode, body: &[u8], bound: Option<u64>) -> [u8; 256] {
    header_of(CLIENT, operation, code, body, bound)
}

fn header_of(
    client: u128,
    operation: Operation,
    code: CommandCode,
    body: &[u8],
    bound: Option<u64>,
) -> [u8; 256] {
    let mut header = RequestHeader::new(client, operation, body.len());
    if operation == Operation::NonReplicated {
        header.code = code.as_u32().into();
    }
    if let Some(session) = bound {
        header.session = session.into();
        header.request = 1.into();
    }
    header.as_bytes().try_into().unwrap()
}

fn send(
    server: &Server,
    connection: &mut Connection,
    operation: Operation,
    code: CommandCode,
    body: &[u8],
) -> Outcome {
    let bound = connection.session.map(|session| session.session);
    let client = connection
        .session
        .map_or(CLIENT, |session| session.client_id);
    let frame = header_of(client, operation, code, body, bound);
    block_on(server.handle(connection, &frame, body))
}

fn login_body(password: &str, dialect: Dialect) -> Vec<u8> {
    let login = LoginRegister {
        version: VersionPrefix::rust_sdk(dialect),
        bind_secret: BindSecret([0xab; 32]),
        username: WireName::new("iggy").unwrap(),
        password: Secret::new(password).unwrap(),
        context: String::new(),
    };
    encode_to_vec(&login, dialect)
}

fn login(server: &Server, connection: &mut Connection) -> LoginReply {
    login_as(server, connection, CLIENT)
}

/// Logs `connection` in as the root user under the VSR client id `client`.
fn login_as(server: &Server, connection: &mut Connection, client: u128) -> LoginReply {
    login_in(server, connection, client, Dialect::V0_12_2)
}

/// [`login_as`] in `dialect`.
fn login_in(
    server: &Server,
    connection: &mut Connection,
    client: u128,
    dialect: Dialect,
) -> LoginReply {
    let body = login_body("secret", dialect);
    let code = CommandCode::LoginRegister;
    let frame = header_of(client, Operation::Register, code, &body, None);
    let outcome = block_on(server.handle(connection, &frame, &body));
    let Outcome::Reply(reply) = outcome else {
        panic!("login evicted: {outcome:?}");
    };
    let body = reply.encode_body(dialect);
    let decoded = Reply::decode_body(
        CommandCode::LoginRegister,
        Operation::Register,
        &body,
        dialect,
    );
    match decoded.unwrap() {
        ReplyOutcome::Ok(Reply::LoginRegister(login)) => login,
        other => panic!("unexpected login reply {other:?}"),
    }
}

fn status(outcome: &Outcome) -> u32 {
    match outcome {
        Outcome::Reply(reply) => reply.status_code(),
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[test]
fn before_login_only_ping_works() {
    let server = server();
    let mut connection = open(&server);
    let ping = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        CommandCode::Ping,
        &[],
    );
    assert_eq!(status(&ping), 0);
    let streams = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        CommandCode::GetStreams,
        &[],
    );
    assert_eq!(status(&streams), Refusal::Unauthenticated.code().as_u32());
    let create = send(
        &server,
        &mut connection,
        Operation::CreateStream,
        CommandCode::CreateStream,
        &[],
    );
    assert_eq!(create, Outcome::Evict(EvictionReason::NoSession));
    let legacy = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        CommandCode::LoginUser,
        &[],
    );
    assert_eq!(legacy, Outcome::Evict(EvictionReason::MalformedLogin));
}

#[test]
fn login_binds_and_retry_keeps_the_session() {
    let server = server();
    let mut connection = open(&server);
    let first = login(&server, &mut connection);
    assert_eq!(first.user_id, 0);
    assert_ne!(first.session, 0);
    assert_eq!(first.server_protocol_version, ProtocolVersion::V0_12_2);
    let mut other = open(&server);
    assert_eq!(login(&server, &mut other).session, first.session);
    let roster = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        CommandCode::GetClusterMetadata,
        &[],
    );
    let Outcome::Reply(reply) = roster else {
        panic!()
    };
    let roster: ClusterMetadata =
        proto::codec::decode_exact(&reply.encode_body(Dialect::V0_12_2), Dialect::V0_12_2).unwrap();
    assert_eq!(roster.nodes.len(), 1);
    assert_eq!(roster.nodes[0].tcp_port, 8090);
}

#[test]
fn bad_credentials_and_versions_are_evictions() {
    let server = server();
    let mut connection = open(&server);
    let body = login_body("wrong", Dialect::V0_12_2);
    let outcome = send(
        &server,
        &mut connection,
        Operation::Register,
        CommandCode::LoginRegister,
        &body,
    );
    assert_eq!(outcome, Outcome::Evict(EvictionReason::InvalidCredentials));
    let mut body = login_body("secret", Dialect::V0_12_2);
    body[..4].copy_from_slice(&ProtocolVersion::pack(0, 13, 0).0.to_le_bytes());
    let outcome = send(
        &server,
        &mut connection,
        Operation::Register,
        CommandCode::LoginRegister,
        &body,
    );
    assert_eq!(
        outcome,
        Outcome::Evict(EvictionReason::IncompatibleProtocol)
    );
    let body = login_body("secret", Dialect::V0_12_2);
    let outcome = send(
        &server,
        &mut connection,
        Operation::Register,
        CommandCode::LoginRegister,
        &body[..6],
    );
    assert_eq!(outcome, Outcome::Evict(EvictionReason::MalformedLogin));
}

#[test]
fn old_dialect_login_fixes_the_connection_dialect() {
    let server = server();
    let mut connection = open(&server);
    let body = login_body("secret", Dialect::V0_11_0);
    let outcome = send(
        &server,
        &mut connection,
        Operation::Register,
        CommandCode::LoginRegister,
        &body,
    );
    assert!(matches!(outcome, Outcome::Reply(ref reply) if reply.status_code() == 0));
    assert_eq!(connection.dialect, Dialect::V0_11_0);
}

#[test]
fn bind_then_logout() {
    let server = server();
    let mut first = open(&server);
    let session = login(&server, &mut first).session;
    let bind = BindSession {
        version: VersionPrefix::rust_sdk(Dialect::V0_12_2),
        client_id: CLIENT,
        session,
        metadata_watermark: 0,
        bind_secret: BindSecret([0xab; 32]),
    };
    let body = encode_to_vec(&bind, Dialect::V0_12_2);
    let mut second = open(&server);
    let outcome = send(
        &server,
        &mut second,
        Operation::NonReplicated,
        CommandCode::BindSession,
        &body,
    );
    assert_eq!(status(&outcome), 0);
    assert_eq!(second.session.map(|s| s.session), Some(session));
    let logout = send(
        &server,
        &mut second,
        Operation::Logout,
        CommandCode::LogoutUser,
        &[],
    );
    assert_eq!(status(&logout), 0);
    assert!(second.session.is_none());
    let mut third = open(&server);
    let again = send(
        &server,
        &mut third,
        Operation::NonReplicated,
        CommandCode::BindSession,
        &body,
    );
    assert_eq!(status(&again), Refusal::Unauthenticated.code().as_u32());
}

#[test]
fn unknown_families_and_bad_bodies_are_invalid_command() {
    let server = server();
    let mut connection = open(&server);
    login(&server, &mut connection);
    let snapshot = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        CommandCode::GetSnapshotFile,
        &[1, 1, 100],
    );
    assert_eq!(
        status(&snapshot),
        Refusal::Unavailable(Unavailable::Feature).code().as_u32()
    );
    let bad = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        CommandCode::GetClient,
        &[1],
    );
    assert_eq!(status(&bad), Refusal::Malformed.code().as_u32());
    let frame = header(Operation::NonReplicated, CommandCode::Ping, &[], Some(1));
    let mut unknown = frame;
    unknown[196..200].copy_from_slice(&9999u32.to_le_bytes());
    let outcome = block_on(server.handle(&mut connection, &unknown, &[]));
    assert_eq!(status(&outcome), Refusal::Malformed.code().as_u32());
}

#[test]
fn partition_route_names_the_incarnation_and_commit() {
    use proto::codec::decode_exact;
    use proto::commands::messages::{GetPartitionRoute, PartitionRoute};
    use proto::primitives::{Identifier, OptionsBlock};

    use crate::metadata::{Partition, Topic, TopicSettings};

    let server = server();
    let mut connection = open(&server);
    login(&server, &mut connection);
    let partition = Partition {
        id: 0,
        created_at: 0,
        incarnation: 7,
    };
    let topic = Topic {
        id: 0,
        name: "events".into(),
        created_at: 0,
        options: OptionsBlock::default(),
        settings: TopicSettings::default(),
        partitions: [(0, partition)].into(),
        groups: std::collections::BTreeMap::new(),
        next_group_id: 0,
    };
    insert_orders(&server, 3, topic);
    let mut route = |partition_id| {
        let request = GetPartitionRoute {
            stream_id: Identifier::Name(WireName::new("orders").unwrap()),
            topic_id: Identifier::Numeric(0),
            partition_id,
        };
        let body = encode_to_vec(&request, Dialect::V0_12_2);
        let code = CommandCode::GetPartitionRoute;
        send(
            &server,
            &mut connection,
            Operation::NonReplicated,
            code,
            &body,
        )
    };
    let Outcome::Reply(reply) = route(0) else {
        panic!()
    };
    let decoded: PartitionRoute =
        decode_exact(&reply.encode_body(Dialect::V0_12_2), Dialect::V0_12_2).unwrap();
    assert_eq!(reply.encode_body(Dialect::V0_12_2).len(), 25);
    assert_eq!(decoded.incarnation, 7);
    assert_eq!(decoded.metadata_op, server.commit_number());
    assert_eq!(decoded.partitions_count, 1);
    assert_eq!(
        status(&route(1)),
        Refusal::Missing(Missing::Partition).code().as_u32()
    );
}

#[test]
fn get_me_and_get_clients_report_connections() {
    use proto::codec::decode_exact;
    use proto::commands::system::{ClientDetails, Clients};

    let server = server();
    let mut connection = open(&server);
    let _anonymous = open(&server);
    login(&server, &mut connection);
    let code = CommandCode::GetMe;
    let Outcome::Reply(me) = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        code,
        &[],
    ) else {
        panic!()
    };
    let me: ClientDetails =
        decode_exact(&me.encode_body(Dialect::V0_12_2), Dialect::V0_12_2).unwrap();
    assert_eq!((me.client_id, me.user_id), (connection.client_number, 0));
    assert_eq!(me.address, "127.0.0.1:5000");
    let code = CommandCode::GetClients;
    let Outcome::Reply(all) = send(
        &server,
        &mut connection,
        Operation::NonReplicated,
        code,
        &[],
    ) else {
        panic!()
    };
    let all: Clients = decode_exact(&all.encode_body(Dialect::V0_12_2), Dialect::V0_12_2).unwrap();
    let users: Vec<u32> = all.0.iter().map(|client| client.user_id).collect();
    assert_eq!(users, [0, u32::MAX]);
}

#[test]
fn a_request_naming_another_session_is_evicted() {
    let server = server();
    let mut connection = open(&server);
    let session = login(&server, &mut connection).session;
    let ping = |sent: u64, connection: &mut Connection| {
        let frame = header(Operation::NonReplicated, CommandCode::Ping, &[], Some(sent));
        block_on(server.handle(connection, &frame, &[]))
    };
    assert_eq!(status(&ping(session, &mut connection)), 0);
    // Unbound requests carry 0; the first session of this server is 1, so "older" is
    // checked on the rule itself.
    assert_eq!(
        crate::handler::pipeline::session_mismatch(session + 4, session + 5),
        Some(EvictionReason::SessionTooLow)
    );
    assert_eq!(crate::handler::pipeline::session_mismatch(0, session), None);
    assert_eq!(
        ping(session + 1, &mut connection),
        Outcome::Evict(EvictionReason::NoSession)
    );
}

/// Stream 0 with topic 0 (no partitions) and consumer group 0, known to the data plane.
fn add_group(server: &Server) -> GroupKey {
    use proto::primitives::OptionsBlock;

    use crate::metadata::{ConsumerGroup, Topic, TopicSettings};

    let group = ConsumerGroup {
        id: 0,
        name: "readers".into(),
        created_at: 0,
    };
    let topic = Topic {
        id: 0,
        name: "events".into(),
        created_at: 0,
        options: OptionsBlock::default(),
        settings: TopicSettings::default(),
        partitions: std::collections::BTreeMap::new(),
        groups: [(0, group)].into(),
        next_group_id: 1,
    };
    insert_orders(server, 0, topic);
    let metadata = server.metadata.borrow().clone();
    block_on(server.data.open_all(&metadata)).unwrap();
    GroupKey {
        stream_id: 0,
        topic_id: 0,
        group_id: 0,
    }
}

fn join(server: &Server, connection: &mut Connection) {
    use proto::commands::groups::JoinConsumerGroup;
    use proto::primitives::Identifier;

    let join = JoinConsumerGroup {
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::Numeric(0),
        group_id: Identifier::Numeric(0),
    };
    let body = encode_to_vec(&join, Dialect::V0_12_2);
    let code = CommandCode::JoinConsumerGroup;
    let outcome = send(server, connection, code.operation(), code, &body);
    assert_eq!(status(&outcome), 0);
}

#[test]
fn idle_group_members_are_evicted_as_stale_clients() {
    const MEMBER: u128 = CLIENT + 1;
    const BYSTANDER: u128 = CLIENT + 2;
    let server = server();
    let group = add_group(&server);
    let mut idle = open(&server);
    let idle_session = login_as(&server, &mut idle, CLIENT).session;
    let mut busy = open(&server);
    let busy_session = login_as(&server, &mut busy, MEMBER).session;
    let mut bystander = open(&server);
    let bystander_session = login_as(&server, &mut bystander, BYSTANDER).session;
    join(&server, &mut idle);
    join(&server, &mut busy);
    let now = now_us();
    let idle_max_us = server.info.groups.idle_max_us().unwrap();
    idle.liveness.stamp(now - idle_max_us - 1);
    bystander.liveness.stamp(0);
    // A request now keeps `busy` alive.
    let ping = send(
        &server,
        &mut busy,
        Operation::NonReplicated,
        CommandCode::Ping,
        &[],
    );
    assert_eq!(status(&ping), 0);

    server.tick(now);

    let live = |client, session| server.sessions.borrow().is_live(client, session);
    let member = |client| {
        server
            .data
            .with_group(group, |group| group.is_member(client))
    };
    assert_eq!(
        idle.liveness.eviction().reason(),
        Some(EvictionReason::StaleClient)
    );
    assert_eq!(member(CLIENT), Some(false));
    assert!(!live(CLIENT, idle_session));
    assert_eq!(busy.liveness.eviction().reason(), None);
    assert_eq!(member(MEMBER), Some(true));
    assert!(live(MEMBER, busy_session));
    // Idle without memberships: nothing to release, so it stays.
    assert_eq!(bystander.liveness.eviction().reason(), None);
    assert!(live(BYSTANDER, bystander_session));
    // The registry record carries the same signal the connection's shard waits on.
    let record = server.clients().remove(&idle.client_number).unwrap();
    assert_eq!(
        record.liveness.eviction().reason(),
        Some(EvictionReason::StaleClient)
    );
    let after = send(
        &server,
        &mut idle,
        Operation::NonReplicated,
        CommandCode::Ping,
        &[],
    );
    assert!(matches!(after, Outcome::Evict(EvictionReason::NoSession)));
}

/// Puts stream `id`, named `orders`, holding `topic` as topic 0, into the metadata.
fn insert_orders(server: &Server, id: u32, topic: crate::metadata::Topic) {
    let stream = crate::metadata::Stream {
        id,
        name: "orders".into(),
        created_at: 0,
        options: proto::primitives::OptionsBlock::default(),
        topics: [(0, topic)].into(),
    };
    std::rc::Rc::make_mut(&mut server.metadata.borrow_mut())
        .streams
        .insert(id, stream);
}

#[test]
fn a_bound_connection_speaks_only_for_its_own_client_id() {
    let server = server();
    let mut connection = open(&server);
    let login = login(&server, &mut connection);
    // A request under another client id on the bound link: evicted.
    let frame = header_of(
        CLIENT + 1,
        Operation::NonReplicated,
        CommandCode::Ping,
        &[],
        Some(login.session),
    );
    let outcome = block_on(server.handle(&mut connection.clone(), &frame, &[]));
    assert_eq!(outcome, Outcome::Evict(EvictionReason::SessionError));
    // A Register of a new client id while bound: evicted too (a new id only after LOGOUT).
    let body = login_body("secret", Dialect::V0_12_2);
    let frame = header_of(
        CLIENT + 1,
        Operation::Register,
        CommandCode::LoginRegister,
        &body,
        None,
    );
    let outcome = block_on(server.handle(&mut connection.clone(), &frame, &body));
    assert_eq!(outcome, Outcome::Evict(EvictionReason::SessionError));
    // The link's own client id still works, and so does a repeated Register of it.
    assert_eq!(
        status(&send(
            &server,
            &mut connection,
            Operation::NonReplicated,
            CommandCode::Ping,
            &[]
        )),
        0
    );
    assert_eq!(
        login_as(&server, &mut connection, CLIENT).session,
        login.session
    );
}

/// A commit whose request is dropped mid-way (its connection evicted) still commits, whole
/// and in order: the sequencer runs it, not the request.
#[test]
fn a_dropped_request_does_not_cut_its_commit_short() {
    let server = server();
    let stream = |id, name: &str| crate::metadata::MetadataOp::CreateStream {
        id,
        name: name.into(),
        created_at: 1,
        options: proto::primitives::OptionsBlock::default(),
    };
    block_on(async {
        let before = server.commit_number();
        let mut first = Box::pin(server.commit(stream(1, "first")));
        let polled = futures_util::poll!(first.as_mut());
        assert!(polled.is_pending(), "the commit waits for the sequencer");
        drop(first);
        let second = server.commit(stream(2, "second")).await;
        assert_eq!(second, Ok(before + 2), "the dropped commit went first");
        let metadata = server.metadata.borrow();
        assert_eq!(metadata.streams[&1].name, "first");
        assert_eq!(metadata.streams[&2].name, "second");
    });
}

/// Ending many sessions at once (a password change, a revoked token shared by thousands of
/// connections) evicts exactly their connections, in one pass over the connections: the
/// kept session's and an anonymous connection's are left alone.
#[test]
fn ending_many_sessions_evicts_exactly_their_connections() {
    let server = server();
    let mut connections: Vec<Connection> = (0..40).map(|_| open(&server)).collect();
    for (index, connection) in connections.iter_mut().enumerate() {
        login_as(&server, connection, CLIENT + index as u128);
    }
    let anonymous = open(&server);
    let root = connections[0].user_id().expect("logged in");
    server.end_sessions_of(root, Some(CLIENT));
    assert_eq!(connections[0].liveness.eviction().reason(), None, "kept");
    for connection in &connections[1..] {
        assert_eq!(
            connection.liveness.eviction().reason(),
            Some(EvictionReason::NoSession)
        );
    }
    assert_eq!(anonymous.liveness.eviction().reason(), None);
}

/// Requests are timed under their command and transport, failed logins counted, and with
/// recording off neither moves.
#[test]
fn metrics_record_requests_and_failed_logins_only_while_on() {
    let server = server();
    let failed_login = |server: &Server| {
        let mut connection = open(server);
        let body = login_body("wrong", Dialect::V0_12_2);
        let frame = header(Operation::Register, CommandCode::LoginRegister, &body, None);
        block_on(server.handle(&mut connection, &frame, &body))
    };
    assert!(matches!(failed_login(&server), Outcome::Evict(_)));
    let text = block_on(server.scrape_metrics());
    let login_count =
        "iggy_request_duration_seconds_count{command=\"login_register\",transport=\"tcp\"} 1\n";
    assert!(text.contains("iggy_logins_failed_total 1\n"), "{text}");
    assert!(text.contains(login_count), "{text}");
    assert!(text.contains("iggy_streams 0\n"), "{text}");

    server.node.metrics.set_enabled(false);
    failed_login(&server);
    let text = block_on(server.scrape_metrics());
    assert!(text.contains("iggy_logins_failed_total 1\n"), "{text}");
    assert!(text.contains(login_count), "{text}");
}

/// Every series the Grafana dashboard (`grafana/iggy.json`) queries is a family a scrape
/// exports, so the dashboard cannot drift from the names.
#[test]
fn the_dashboard_queries_only_exported_families() {
    let dashboard = include_str!("../../../../grafana/iggy.json");
    let text = block_on(server().scrape_metrics());
    let exported: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split(' ').next())
        .collect();
    let mut queried = 0;
    for (start, _) in dashboard
        .match_indices("iggy_")
        .chain(dashboard.match_indices("process_"))
    {
        let name: String = dashboard[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let family = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(&name);
        assert!(exported.contains(family), "{name} is not exported");
        queried += 1;
    }
    assert!(queried > 10, "the dashboard queries the metrics");
}

/// A 0.11.0 client of a multi-node roster routes its group polls and offset writes through
/// a data connection attached to its coordinator's session (§12.2): the route names that
/// session and the node that serves partitions, and the attached connection then acts as
/// the coordinator's client in consumer groups while the session is live.
#[test]
fn a_data_connection_attached_to_a_session_acts_as_its_client() {
    use proto::commands::legacy::{AttachConsumerSession, ConsumerRouting, GetPollRouting};
    use proto::commands::poll_selector::PollSelector;
    use proto::primitives::PollingStrategy;
    use proto::primitives::{Consumer, ConsumerKind, Identifier, OptionalPartition};

    const NR: Operation = Operation::NonReplicated;
    let server = server();
    let mut coordinator = open(&server);
    let legacy = Dialect::V0_11_0;
    let session = login_in(&server, &mut coordinator, CLIENT, legacy).session;
    let selector = PollSelector {
        consumer: Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: Identifier::Numeric(0),
        },
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::Numeric(0),
        partition: OptionalPartition(None),
        strategy: PollingStrategy::offset(0),
        count: 1,
        auto_commit: true,
    };
    let asked = encode_to_vec(&GetPollRouting { selector }, legacy);
    let routed = send(
        &server,
        &mut coordinator,
        NR,
        CommandCode::GetPollRouting,
        &asked,
    );
    let Outcome::Reply(reply) = routed else {
        panic!("no route: {routed:?}");
    };
    assert_eq!(reply.status_code(), 0, "routed");
    let body = reply.encode_body(Dialect::V0_12_2);
    let routing: ConsumerRouting = proto::codec::decode_exact(&body, Dialect::V0_12_2).unwrap();
    assert_eq!((routing.client, routing.session), (CLIENT, session));
    assert_eq!(
        routing.primary.tcp_port, 8090,
        "this node serves the partitions"
    );

    let mut data = open(&server);
    login_in(&server, &mut data, CLIENT + 1, legacy);
    let attach = |session| {
        let attach = AttachConsumerSession {
            client: CLIENT,
            session,
            metadata_watermark: routing.metadata_watermark,
        };
        encode_to_vec(&attach, legacy)
    };
    let code = CommandCode::AttachConsumerSession;
    // A session that is not live: the client asks for a route again (58).
    let stale = send(&server, &mut data, NR, code, &attach(session + 7));
    assert_eq!(status(&stale), Refusal::NotAccepted.code().as_u32());
    let own = RequestHeader::new(CLIENT + 1, NR, 0);
    let group = Consumer {
        kind: ConsumerKind::ConsumerGroup,
        id: Identifier::Numeric(0),
    };
    let acting = |data: &Connection, consumer: &Consumer| {
        crate::handler::routing::consumer_client(&server, data, &own, Some(consumer))
    };
    assert_eq!(acting(&data, &group), Ok(CLIENT + 1));
    assert_eq!(
        status(&send(&server, &mut data, NR, code, &attach(session))),
        0
    );
    assert_eq!(acting(&data, &group), Ok(CLIENT));
    // A plain consumer's requests are the connection's own.
    let single = Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(1),
    };
    assert_eq!(acting(&data, &single), Ok(CLIENT + 1));
    // The coordinator logs out: the attachment no longer holds.
    let logout = send(
        &server,
        &mut coordinator,
        Operation::Logout,
        CommandCode::LogoutUser,
        &[],
    );
    assert_eq!(status(&logout), 0);
    assert_eq!(acting(&data, &group), Err(Refusal::NotAccepted));
    assert_eq!(acting(&data, &single), Ok(CLIENT + 1));
    // A new login on the data connection drops the attachment.
    login_in(&server, &mut data, CLIENT + 1, legacy);
    assert_eq!(data.consumer_session, None);
}
