//! Sessions and the system commands: login with a password and with a personal access token,
//! logout, ping before and after login, get me, clients, stats and the one-node roster.

mod common;

use common::*;
use iggy::prelude::*;

#[test]
fn ping_works_before_login_and_nothing_else_does() {
    let server = Server::start();
    run(async {
        let client = anonymous_client(&server).await;
        client.ping().await.expect("ping before login");
        let error = client
            .get_streams()
            .await
            .expect_err("get streams before login");
        assert_eq!(
            error.as_code(),
            IggyError::Unauthenticated.as_code(),
            "{error}"
        );
    });
}

#[test]
fn login_with_password_get_me_and_logout() {
    let server = Server::start();
    run(async {
        let client = anonymous_client(&server).await;
        let identity = client
            .login_user(ROOT_USERNAME, ROOT_PASSWORD)
            .await
            .expect("login");
        assert_eq!(identity.user_id, 0, "root is user 0");
        client.ping().await.expect("ping after login");
        let me = client.get_me().await.expect("get me");
        assert_eq!(me.user_id, Some(0));
        assert_eq!(me.transport.to_lowercase(), "tcp");
        client.logout_user().await.expect("logout");
        assert!(client.get_me().await.is_err(), "get me after logout");
    });
}

#[test]
fn login_with_wrong_password_is_refused() {
    let server = Server::start();
    run(async {
        let client = anonymous_client(&server).await;
        let error = client
            .login_user(ROOT_USERNAME, "wrong-password")
            .await
            .expect_err("login");
        assert_eq!(
            error.as_code(),
            IggyError::InvalidCredentials.as_code(),
            "{error}"
        );
        // The server still serves a correct login on a new connection.
        let client = root_client(&server).await;
        client.ping().await.expect("ping");
    });
}

#[test]
fn login_with_personal_access_token() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        let raw = root
            .create_personal_access_token("compat-token", PersonalAccessTokenExpiry::NeverExpire)
            .await
            .expect("create token");
        assert!(!raw.token.is_empty());

        let client = anonymous_client(&server).await;
        let identity = client
            .login_with_personal_access_token(&raw.token)
            .await
            .expect("PAT login");
        assert_eq!(identity.user_id, 0);
        client
            .get_streams()
            .await
            .expect("get streams with a PAT session");

        let connection = format!("iggy://{}@{}", raw.token, server.tcp_address());
        let client = IggyClient::from_connection_string(&connection).expect("connection string");
        client.connect().await.expect("connect with a PAT");
        assert_eq!(client.get_me().await.expect("get me").user_id, Some(0));

        let client = anonymous_client(&server).await;
        let error = client
            .login_with_personal_access_token("not-a-token")
            .await
            .expect_err("login with a bad token");
        assert_eq!(
            error.as_code(),
            IggyError::InvalidPersonalAccessToken.as_code(),
            "{error}"
        );
    });
}

#[test]
fn clients_list_every_connected_session() {
    let server = Server::start();
    run(async {
        let first = root_client(&server).await;
        let second = root_client(&server).await;
        let me = first.get_me().await.expect("get me");
        let other = second.get_me().await.expect("get me");
        assert_ne!(me.client_id, other.client_id);
        let clients = first.get_clients().await.expect("get clients");
        for client_id in [me.client_id, other.client_id] {
            assert!(
                clients.iter().any(|client| client.client_id == client_id),
                "client {client_id} missing from {clients:?}"
            );
        }
        let details = first
            .get_client(other.client_id)
            .await
            .expect("get client")
            .expect("the other client exists");
        assert_eq!(details.user_id, Some(0));
    });
}

#[test]
fn stats_count_what_exists() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, "stats-stream", "stats-topic", 3).await;
        send_range(&client, "stats-stream", "stats-topic", 1, 0..10, 10).await;
        let stats = client.get_stats().await.expect("get stats");
        assert_eq!(stats.streams_count, 1);
        assert_eq!(stats.topics_count, 1);
        assert_eq!(stats.partitions_count, 3);
        assert_eq!(stats.messages_count, 10);
        assert!(stats.clients_count >= 1);
        assert!(stats.process_id > 0);
    });
}

#[test]
fn cluster_metadata_names_one_leader() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        let metadata = client
            .get_cluster_metadata()
            .await
            .expect("cluster metadata");
        assert_eq!(metadata.nodes.len(), 1, "{metadata:?}");
        let node = &metadata.nodes[0];
        assert_eq!(node.role, ClusterNodeRole::Leader, "{metadata:?}");
    });
}

#[test]
fn describe_options_lists_the_topic_catalog() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        let options = client
            .describe_options(OptionsScope::Topic)
            .await
            .expect("describe");
        assert!(!options.is_empty(), "the topic catalog is not empty");
    });
}
