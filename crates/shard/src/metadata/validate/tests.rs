//! Validation scenarios per PROTOCOL.md, and the property that every op validation
//! produces applies cleanly.

use proptest::prelude::*;
use proto::codec::WireName;
use proto::commands::groups::{CreateConsumerGroup, DeleteConsumerGroup};
use proto::commands::partitions::{CreatePartitions, DeletePartitions};
use proto::commands::session::Secret;
use proto::commands::streams::{CreateStream, DeleteStream};
use proto::commands::system::{ResetKeys, ResourceTarget, UpdateResource};
use proto::commands::tokens::CreatePersonalAccessToken;
use proto::commands::topics::CreateTopic;
use proto::commands::users::{CreateUser, DeleteUser, UpdatePermissions, UserStatus};
use proto::primitives::{Identifier, OptionsBlock, Permissions, TlvEntry};

use super::*;
use crate::metadata::options::topic_derived_options;
use crate::metadata::{Metadata, MetadataOp, TopicSettings, User};
use crate::refusal::{
    Invalid, Limit, Missing, Protected, Refusal, Taken, TopicOption, Unavailable,
};

fn name(text: &str) -> WireName {
    WireName::new(text).unwrap()
}

fn id(text: &str) -> Identifier {
    Identifier::name(text).unwrap()
}

/// Applies a validated op; a macro so the validation can borrow `metadata` first.
macro_rules! commit {
    ($metadata:ident, $op:expr $(,)?) => {{
        let op: Result<MetadataOp, Refusal> = $op;
        $metadata.apply(&op.unwrap()).unwrap();
    }};
}

/// A server with the root user, stream `s` and topic `t` (2 partitions).
fn server() -> (Metadata, User) {
    let mut metadata = Metadata::default();
    metadata
        .apply(&root_user("iggy", String::from("hash"), 1))
        .unwrap();
    let root = metadata.users[&0].clone();
    let stream = CreateStream {
        name: name("s"),
        options: OptionsBlock::default(),
    };
    commit!(metadata, create_stream(&metadata, &root, &stream, 2));
    let topic = create_topic_request("t", 2, OptionsBlock::default());
    let defaults = TopicSettings::default();
    commit!(
        metadata,
        create_topic(&metadata, &root, &topic, 3, &defaults),
    );
    (metadata, root)
}

fn create_topic_request(topic: &str, partitions_count: u32, options: OptionsBlock) -> CreateTopic {
    CreateTopic {
        stream_id: id("s"),
        partitions_count,
        name: name(topic),
        options,
    }
}

fn topic_error(metadata: &Metadata, root: &User, options: OptionsBlock) -> Refusal {
    let request = create_topic_request("new", 1, options);
    create_topic(metadata, root, &request, 9, &TopicSettings::default()).unwrap_err()
}

fn block(entries: &[(&str, TlvEntry)]) -> OptionsBlock {
    let mut block = OptionsBlock::default();
    for (key, value) in entries {
        block.set(key, value.clone());
    }
    block
}

#[test]
fn stream_ids_reuse_the_lowest_free_and_names_are_unique() {
    let (mut metadata, root) = server();
    let second = CreateStream {
        name: name("second"),
        options: OptionsBlock::default(),
    };
    commit!(metadata, create_stream(&metadata, &root, &second, 4));
    commit!(
        metadata,
        delete_stream(
            &metadata,
            &root,
            &DeleteStream {
                stream_id: 0.into(),
            },
        ),
    );
    let op = create_stream(
        &metadata,
        &root,
        &CreateStream {
            name: name("third"),
            ..second.clone()
        },
        5,
    );
    assert!(matches!(op, Ok(MetadataOp::CreateStream { id: 0, .. })));
    assert_eq!(
        create_stream(&metadata, &root, &second, 5),
        Err(Refusal::Taken(Taken::StreamName))
    );
    let nobody = User {
        id: 7,
        permissions: None,
        ..root.clone()
    };
    assert_eq!(
        create_stream(&metadata, &nobody, &second, 5),
        Err(Refusal::Forbidden)
    );
    let missing = DeleteStream {
        stream_id: 9.into(),
    };
    assert_eq!(
        delete_stream(&metadata, &root, &missing),
        Err(Refusal::Missing(Missing::Stream))
    );
}

#[test]
fn topic_options_resolve_per_the_catalog() {
    let (metadata, root) = server();
    let replicated = TlvEntry::string("replicated").unwrap();
    let sdk_default = block(&[
        ("durability", replicated.clone()),
        ("consumer_offset_durability", replicated),
        ("message_expiry", TlvEntry::uint64(5_000_000)),
    ]);
    let request = create_topic_request("sdk", 3, sdk_default.clone());
    let op = create_topic(&metadata, &root, &request, 9, &TopicSettings::default()).unwrap();
    let MetadataOp::CreateTopic {
        settings,
        options,
        id,
        ..
    } = op
    else {
        panic!("{op:?}")
    };
    assert_eq!(id, 1);
    assert_eq!(settings.message_expiry_us, Some(5_000_000));
    let derived = topic_derived_options(&options, &settings);
    assert!(derived.get("durability").is_none() && derived.get("message_expiry").is_none());
    assert_eq!(
        derived.get("segment_size"),
        Some(&TlvEntry::uint64(1 << 30))
    );
    assert_eq!(
        derived.get("max_topic_size"),
        Some(&TlvEntry::uint64(u64::MAX))
    );
    assert_eq!(derived.0.len(), 8);

    let unknown = block(&[("colour", TlvEntry::uint64(1))]);
    assert_eq!(
        topic_error(&metadata, &root, unknown),
        Refusal::TopicOption(TopicOption::UnsupportedKey)
    );
    let odd_segment = block(&[("segment_size", TlvEntry::uint64((1 << 20) + 1))]);
    assert_eq!(
        topic_error(&metadata, &root, odd_segment),
        Refusal::TopicOption(TopicOption::InvalidValue)
    );
    let wrong_kind = block(&[("segment_size", TlvEntry::uint32(1 << 20))]);
    assert_eq!(
        topic_error(&metadata, &root, wrong_kind),
        Refusal::TopicOption(TopicOption::InvalidValue)
    );
    let small = block(&[("max_topic_size", TlvEntry::uint64(1 << 20))]);
    assert_eq!(
        topic_error(&metadata, &root, small),
        Refusal::Invalid(Invalid::TopicSize)
    );
    let factor = block(&[("replication_factor", TlvEntry::uint32(2))]);
    assert_eq!(
        topic_error(&metadata, &root, factor),
        Refusal::TopicOption(TopicOption::InvalidValue)
    );
    let named = block(&[("name", TlvEntry::string("x").unwrap())]);
    assert_eq!(
        topic_error(&metadata, &root, named),
        Refusal::TopicOption(TopicOption::UnsupportedKey)
    );
    let request = create_topic_request("t", 1, OptionsBlock::default());
    let defaults = TopicSettings::default();
    let taken = create_topic(&metadata, &root, &request, 9, &defaults);
    assert_eq!(taken, Err(Refusal::Taken(Taken::TopicName)));
    let request = create_topic_request("big", 1001, OptionsBlock::default());
    let too_many = create_topic(&metadata, &root, &request, 9, &defaults);
    assert_eq!(too_many, Err(Refusal::Limit(Limit::Partitions)));
}

/// In a cluster the defaults carry the number of nodes as the replication factor
/// (`Server::topic_defaults`): a create may ask for 1 up to that many copies, and one that
/// asks for none gets that many.
#[test]
fn a_cluster_accepts_replication_factors_up_to_its_size() {
    let (metadata, root) = server();
    let three_nodes = TopicSettings {
        replication_factor: 3,
        ..TopicSettings::default()
    };
    for factor in 1..=3 {
        let options = block(&[("replication_factor", TlvEntry::uint32(factor))]);
        let request = create_topic_request("replicated", 1, options);
        let op = create_topic(&metadata, &root, &request, 9, &three_nodes).unwrap();
        let MetadataOp::CreateTopic { settings, .. } = op else {
            panic!("{op:?}")
        };
        assert_eq!(settings.replication_factor, factor);
    }
    for factor in [0, 4] {
        let options = block(&[("replication_factor", TlvEntry::uint32(factor))]);
        let request = create_topic_request("replicated", 1, options);
        assert_eq!(
            create_topic(&metadata, &root, &request, 9, &three_nodes),
            Err(Refusal::TopicOption(TopicOption::InvalidValue)),
            "factor {factor}"
        );
    }
    let request = create_topic_request("replicated", 1, OptionsBlock::default());
    let op = create_topic(&metadata, &root, &request, 9, &three_nodes).unwrap();
    let MetadataOp::CreateTopic { settings, .. } = op else {
        panic!("{op:?}")
    };
    assert_eq!(settings.replication_factor, 3);
}

fn patch(target: ResourceTarget, set: OptionsBlock, reset: &[&str]) -> UpdateResource {
    UpdateResource {
        target,
        reset: ResetKeys::new(reset.iter().map(|key| name(key)).collect()).unwrap(),
        options: set,
    }
}

fn topic_target() -> ResourceTarget {
    ResourceTarget::Topic {
        stream_id: id("s"),
        topic_id: id("t"),
    }
}

#[test]
fn update_resource_patches_resets_and_refuses() {
    let (mut metadata, root) = server();
    let defaults = TopicSettings::default();
    let set = block(&[
        ("message_expiry", TlvEntry::uint64(7)),
        ("name", TlvEntry::string("u").unwrap()),
    ]);
    commit!(
        metadata,
        update_resource(
            &metadata,
            &root,
            &patch(topic_target(), set, &[]),
            &defaults,
        ),
    );
    let topic = &metadata.streams[&0].topics[&0];
    assert_eq!(
        (topic.name.as_str(), topic.settings.message_expiry_us),
        ("u", Some(7))
    );
    assert_eq!(
        topic.options.get("message_expiry"),
        Some(&TlvEntry::uint64(7))
    );
    let target = ResourceTarget::Topic {
        stream_id: 0.into(),
        topic_id: 0.into(),
    };
    let reset = patch(target.clone(), OptionsBlock::default(), &["message_expiry"]);
    commit!(
        metadata,
        update_resource(&metadata, &root, &reset, &defaults),
    );
    let topic = &metadata.streams[&0].topics[&0];
    assert_eq!(topic.settings.message_expiry_us, None);
    assert!(topic.options.is_empty());

    let refuse = |set: OptionsBlock, reset: &[&str]| {
        update_resource(
            &metadata,
            &root,
            &patch(target.clone(), set, reset),
            &defaults,
        )
    };
    let segment = block(&[("segment_size", TlvEntry::uint64(1 << 20))]);
    assert_eq!(
        refuse(segment, &[]),
        Err(Refusal::TopicOption(TopicOption::NotUpdatable))
    );
    assert_eq!(
        refuse(OptionsBlock::default(), &["name"]),
        Err(Refusal::TopicOption(TopicOption::NotResettable))
    );
    assert_eq!(
        refuse(OptionsBlock::default(), &["colour"]),
        Err(Refusal::TopicOption(TopicOption::UnsupportedKey))
    );
    let small = block(&[("max_topic_size", TlvEntry::uint64(5))]);
    assert_eq!(
        refuse(small, &[]),
        Err(Refusal::Invalid(Invalid::TopicSize))
    );

    let root_target = ResourceTarget::User { user_id: 0.into() };
    let rename = block(&[("username", TlvEntry::string("admin").unwrap())]);
    let root_patch = patch(root_target, rename, &[]);
    let refused = update_resource(&metadata, &root, &root_patch, &defaults);
    assert_eq!(refused, Err(Refusal::Protected(Protected::RootUser)));
}

#[test]
fn partition_changes_follow_the_limits() {
    let (mut metadata, root) = server();
    let create = |count| CreatePartitions {
        stream_id: id("s"),
        topic_id: id("t"),
        partitions_count: count,
    };
    let delete = |count| DeletePartitions {
        stream_id: id("s"),
        topic_id: id("t"),
        partitions_count: count,
    };
    assert_eq!(
        create_partitions(&metadata, &root, &create(0), 5),
        Err(Refusal::Limit(Limit::Partitions))
    );
    assert_eq!(
        delete_partitions(&metadata, &root, &delete(3)),
        Err(Refusal::Invalid(Invalid::PartitionsCount))
    );
    commit!(metadata, create_partitions(&metadata, &root, &create(2), 5),);
    commit!(metadata, delete_partitions(&metadata, &root, &delete(4)),);
    assert!(metadata.streams[&0].topics[&0].partitions.is_empty());
    let fixed = block(&[(
        "partition_resize_policy",
        TlvEntry::string("fixed").unwrap(),
    )]);
    let request = create_topic_request("fixed", 1, fixed);
    commit!(
        metadata,
        create_topic(&metadata, &root, &request, 6, &TopicSettings::default()),
    );
    let grow = CreatePartitions {
        topic_id: id("fixed"),
        ..create(1)
    };
    assert_eq!(
        create_partitions(&metadata, &root, &grow, 7),
        Err(Refusal::Unavailable(Unavailable::PartitionResize))
    );
}

#[test]
fn group_ids_are_never_reused() {
    let (mut metadata, root) = server();
    let create = |group: &str| CreateConsumerGroup {
        stream_id: id("s"),
        topic_id: id("t"),
        name: name(group),
    };
    commit!(
        metadata,
        create_consumer_group(&metadata, &root, &create("a"), 4),
    );
    let taken = create_consumer_group(&metadata, &root, &create("a"), 4);
    assert_eq!(taken, Err(Refusal::Taken(Taken::GroupName)));
    let delete = DeleteConsumerGroup {
        stream_id: id("s"),
        topic_id: id("t"),
        group_id: 0.into(),
    };
    commit!(metadata, delete_consumer_group(&metadata, &root, &delete),);
    let op = create_consumer_group(&metadata, &root, &create("a"), 5).unwrap();
    assert!(matches!(op, MetadataOp::CreateConsumerGroup { id: 1, .. }));
    assert_eq!(
        delete_consumer_group(&metadata, &root, &delete),
        Err(Refusal::Missing(Missing::Group))
    );
}

#[test]
fn users_follow_the_root_and_naming_rules() {
    let (mut metadata, root) = server();
    let hash = |password: &str| Ok(format!("hashed {password}"));
    let request = |username: &str, password: &str| CreateUser {
        username: name(username),
        password: Secret::new(password).unwrap(),
        status: UserStatus::Active,
        permissions: None,
        options: OptionsBlock::default(),
    };
    assert_eq!(
        create_user(&metadata, &root, &request("ab", "secret"), 1, hash),
        Err(Refusal::Invalid(Invalid::Username))
    );
    assert_eq!(
        create_user(&metadata, &root, &request("abc", "no"), 1, hash),
        Err(Refusal::Invalid(Invalid::Password))
    );
    assert_eq!(
        create_user(&metadata, &root, &request("iggy", "secret"), 1, hash),
        Err(Refusal::Taken(Taken::User))
    );
    commit!(
        metadata,
        create_user(&metadata, &root, &request("alice", "secret"), 1, hash),
    );
    assert_eq!(metadata.users[&1].password_hash, "hashed secret");
    let delete_root = DeleteUser { user_id: 0.into() };
    assert_eq!(
        delete_user(&metadata, &root, &delete_root),
        Err(Refusal::Protected(Protected::DeleteUser))
    );
    let perms = UpdatePermissions {
        user_id: 0.into(),
        permissions: Some(Permissions::default()),
    };
    assert_eq!(
        update_permissions(&metadata, &root, &perms),
        Err(Refusal::Protected(Protected::ChangePermissions))
    );
    let alice = metadata.users[&1].clone();
    let by_alice = create_user(&metadata, &alice, &request("bob", "secret"), 1, hash);
    assert_eq!(by_alice, Err(Refusal::Forbidden));
    let missing = DeleteUser {
        user_id: id("nobody"),
    };
    assert_eq!(
        delete_user(&metadata, &root, &missing),
        Err(Refusal::Missing(Missing::Resource))
    );
}

#[test]
fn tokens_follow_the_name_limit_and_expiry_rules() {
    let (mut metadata, root) = server();
    let request = |token: &str, expiry| CreatePersonalAccessToken {
        name: name(token),
        expiry,
    };
    assert_eq!(
        create_token(&root, &request("ab", 0), 10, String::from("h")),
        Err(Refusal::Invalid(Invalid::TokenName))
    );
    let op = create_token(&root, &request("main", 5), 10, String::from("h")).unwrap();
    assert!(matches!(
        op,
        MetadataOp::CreatePersonalAccessToken {
            expiry_at: Some(15),
            ..
        }
    ));
    commit!(metadata, Ok(op));
    let root = metadata.users[&0].clone();
    assert_eq!(
        create_token(&root, &request("main", 0), 10, String::from("h")),
        Err(Refusal::Taken(Taken::TokenName))
    );
    assert_eq!(token_expiry_at(0, 10), Ok(None));
    assert_eq!(token_expiry_at(u64::MAX, 10), Ok(None));
    assert_eq!(
        token_expiry_at(u64::MAX - 1, 10),
        Err(Refusal::Invalid(Invalid::TokenExpiry))
    );
    let mut full = root.clone();
    for index in 0..TOKENS_PER_USER_MAX {
        let token = crate::metadata::PersonalAccessToken {
            name: format!("token{index}"),
            token_hash: String::new(),
            expiry_at: None,
        };
        full.tokens.insert(token.name.clone(), token);
    }
    assert_eq!(
        create_token(&full, &request("one more", 0), 10, String::from("h")),
        Err(Refusal::Limit(Limit::Tokens))
    );
}

fn identifier() -> impl Strategy<Value = Identifier> {
    prop_oneof![
        (0_u32..3).prop_map(Identifier::Numeric),
        "[stu]".prop_map(|text| Identifier::name(text).unwrap()),
    ]
}

fn any_options() -> impl Strategy<Value = OptionsBlock> {
    let key = prop_oneof![
        Just("message_expiry"),
        Just("max_topic_size"),
        Just("segment_size"),
        Just("name"),
        Just("preallocate_segments"),
        Just("status"),
        Just("username"),
    ];
    let value = prop_oneof![
        any::<u64>().prop_map(TlvEntry::uint64),
        Just(TlvEntry::uint64(1 << 20)),
        any::<bool>().prop_map(TlvEntry::boolean),
        "[a-z]{1,4}".prop_map(|text| TlvEntry::string(&text).unwrap()),
    ];
    proptest::collection::vec((key, value), 0..3).prop_map(|entries| {
        let mut block = OptionsBlock::default();
        for (key, value) in entries {
            block.set(key, value);
        }
        block
    })
}

#[derive(Debug, Clone)]
enum Step {
    Topic(Identifier, Identifier, u32),
    Partitions(Identifier, Identifier, u32, bool),
    Update(Identifier, Identifier, OptionsBlock, bool),
    Stream(String, bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (identifier(), identifier(), 0_u32..3).prop_map(|(s, t, n)| Step::Topic(s, t, n)),
        (identifier(), identifier(), 0_u32..4, any::<bool>())
            .prop_map(|(s, t, n, create)| Step::Partitions(s, t, n, create)),
        (identifier(), identifier(), any_options(), any::<bool>())
            .prop_map(|(s, t, o, reset)| Step::Update(s, t, o, reset)),
        ("[stu]", any::<bool>()).prop_map(|(name, delete)| Step::Stream(name, delete)),
    ]
}

fn validate_step(metadata: &Metadata, root: &User, step: &Step) -> Result<MetadataOp, Refusal> {
    let defaults = TopicSettings::default();
    match step {
        Step::Topic(stream_id, topic_id, count) => {
            let name = WireName::new(topic_id.to_string()).unwrap();
            let request = CreateTopic {
                stream_id: stream_id.clone(),
                partitions_count: *count,
                name,
                options: OptionsBlock::default(),
            };
            create_topic(metadata, root, &request, 1, &defaults)
        }
        Step::Partitions(stream_id, topic_id, count, true) => {
            let request = CreatePartitions {
                stream_id: stream_id.clone(),
                topic_id: topic_id.clone(),
                partitions_count: *count,
            };
            create_partitions(metadata, root, &request, 1)
        }
        Step::Partitions(stream_id, topic_id, count, false) => {
            let request = DeletePartitions {
                stream_id: stream_id.clone(),
                topic_id: topic_id.clone(),
                partitions_count: *count,
            };
            delete_partitions(metadata, root, &request)
        }
        Step::Update(stream_id, topic_id, options, reset) => {
            let target = ResourceTarget::Topic {
                stream_id: stream_id.clone(),
                topic_id: topic_id.clone(),
            };
            let reset: &[&str] = if *reset { &["max_topic_size"] } else { &[] };
            update_resource(
                metadata,
                root,
                &patch(target, options.clone(), reset),
                &defaults,
            )
        }
        Step::Stream(name, false) => {
            let request = CreateStream {
                name: WireName::new(name.as_str()).unwrap(),
                options: OptionsBlock::default(),
            };
            create_stream(metadata, root, &request, 1)
        }
        Step::Stream(name, true) => {
            let request = DeleteStream {
                stream_id: Identifier::name(name.as_str()).unwrap(),
            };
            delete_stream(metadata, root, &request)
        }
    }
}

proptest! {
    #[test]
    fn every_validated_op_applies(steps in proptest::collection::vec(step(), 0..30)) {
        let (mut metadata, root) = server();
        for step in &steps {
            if let Ok(op) = validate_step(&metadata, &root, step) {
                prop_assert_eq!(metadata.apply(&op), Ok(()), "{:?} -> {:?}", step, op);
            }
        }
    }
}
