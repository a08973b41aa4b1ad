//! Metadata changes raced by other clients' changes: each is validated before it waits for
//! the sequencer, so one that a change committed ahead of it made stale is validated again
//! and answered with the typed refusal (or commits with the next free id), never `1 Error`.

use proto::codes::CommandCode;
use proto::commands::groups::CreateConsumerGroup;
use proto::commands::legacy::PurgeTopic;
use proto::commands::partitions::DeletePartitions;
use proto::commands::streams::{CreateStream, StreamDetails};
use proto::primitives::OptionsBlock;
use proto::{Codec, Dialect};

use super::metadata_tests::root_user;
use super::metadata_tests::{call, code, connection, create_topic, decode, fixture, id, name};
use crate::refusal::{Refusal, Taken};
use crate::server::Server;

fn stream(text: &str) -> CreateStream {
    CreateStream {
        name: name(text),
        options: OptionsBlock::default(),
    }
}

/// The answers of two root clients sending `code` with `bodies` at once: both are
/// validated before either commits.
async fn at_once<T: for<'a> Codec<'a>>(
    server: &Server,
    dialect: Dialect,
    code: CommandCode,
    bodies: (&T, &T),
) -> (Answer, Answer) {
    let (mut one, mut two) = (
        connection(server, 0, dialect),
        connection(server, 0, dialect),
    );
    futures_util::join!(
        call(server, &mut one, code, bodies.0),
        call(server, &mut two, code, bodies.1),
    )
}

/// What [`call`] answers: the payload, or the refusal's code.
type Answer = Result<Option<Vec<u8>>, u32>;

fn group(text: &str) -> CreateConsumerGroup {
    CreateConsumerGroup {
        stream_id: id("orders"),
        topic_id: id("events"),
        name: name(text),
    }
}

/// Streams of different names created at once both commit, with different ids: both were
/// validated when id 0 was free.
#[test]
fn creates_raced_for_the_next_id_both_commit() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        root_user(server).await;
        let dialect = Dialect::V0_12_2;
        let (a, b) = (stream("first"), stream("second"));
        let command = CommandCode::CreateStream;
        let (first, second) = at_once(server, dialect, command, (&a, &b)).await;
        let first: StreamDetails = decode(&first.unwrap().unwrap(), dialect);
        let second: StreamDetails = decode(&second.unwrap().unwrap(), dialect);
        assert_eq!((first.stream.id, second.stream.id), (0, 1));
        assert_eq!(server.metadata.borrow().streams.len(), 2);
    });
}

/// The same name created at once by two clients: one commits, the other is told the name
/// is taken (`1012`, `2013`, `5004`), as it would be had it come a moment later.
#[test]
fn creates_raced_for_one_name_answer_the_name_taken() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        root_user(server).await;
        let dialect = Dialect::V0_12_2;
        let orders = stream("orders");
        let command = CommandCode::CreateStream;
        let (first, second) = at_once(server, dialect, command, (&orders, &orders)).await;
        assert!(first.is_ok(), "{first:?}");
        assert_eq!(second, Err(code(Refusal::Taken(Taken::StreamName))));

        let topic = create_topic("orders", "events", 1);
        let command = CommandCode::CreateTopic;
        let (first, second) = at_once(server, dialect, command, (&topic, &topic)).await;
        assert!(first.is_ok(), "{first:?}");
        assert_eq!(second, Err(code(Refusal::Taken(Taken::TopicName))));

        let g = group("g");
        let command = CommandCode::CreateConsumerGroup;
        let (first, second) = at_once(server, dialect, command, (&g, &g)).await;
        assert!(first.is_ok(), "{first:?}");
        assert_eq!(second, Err(code(Refusal::Taken(Taken::GroupName))));
        // Groups of different names at once: both commit (each took the next group id).
        let (a, b) = (group("a"), group("b"));
        let (first, second) = at_once(server, dialect, command, (&a, &b)).await;
        assert!(first.is_ok() && second.is_ok(), "{first:?} {second:?}");
        let metadata = server.metadata.borrow();
        let topic = metadata.topic(&id("orders"), &id("events")).unwrap().1;
        assert_eq!(topic.groups.len(), 3);
    });
}

/// A purge of a topic whose partitions are deleted while it runs purges what is left: a
/// deleted partition has nothing to purge.
#[test]
fn a_purge_raced_by_a_partition_delete_succeeds() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        root_user(server).await;
        let dialect = Dialect::V0_11_0;
        let (mut one, mut two) = (
            connection(server, 0, dialect),
            connection(server, 0, dialect),
        );
        let created = call(
            server,
            &mut one,
            CommandCode::CreateStream,
            &stream("orders"),
        )
        .await;
        assert!(created.is_ok());
        let topic = create_topic("orders", "events", 8);
        assert!(
            call(server, &mut one, CommandCode::CreateTopic, &topic)
                .await
                .is_ok()
        );
        let purge = PurgeTopic {
            stream_id: id("orders"),
            topic_id: id("events"),
        };
        let shrink = DeletePartitions {
            stream_id: id("orders"),
            topic_id: id("events"),
            partitions_count: 7,
        };
        let (purge_reply, delete_reply) = futures_util::join!(
            call(server, &mut one, CommandCode::PurgeTopic, &purge),
            call(server, &mut two, CommandCode::DeletePartitions, &shrink),
        );
        assert_eq!(delete_reply, Ok(None));
        assert_eq!(purge_reply, Ok(None));
    });
}

/// Many clients creating streams of different names at once all commit: each commit that
/// goes first makes the rest validate again, for as many rounds as there are clients.
#[test]
fn a_crowd_of_creates_all_commit() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        root_user(server).await;
        let dialect = Dialect::V0_12_2;
        let started = std::time::Instant::now();
        let creates = (0..CROWD).map(|index| async move {
            let mut own = connection(server, 0, dialect);
            let create = stream(&format!("stream-{index}"));
            call(server, &mut own, CommandCode::CreateStream, &create).await
        });
        let replies = futures_util::future::join_all(creates).await;
        eprintln!("{CROWD} creates in {:?}", started.elapsed());
        assert!(replies.iter().all(Result::is_ok), "{replies:?}");
        assert_eq!(server.metadata.borrow().streams.len(), CROWD);
    });
}

/// Clients in [`a_crowd_of_creates_all_commit`].
const CROWD: usize = 200;
