//! The SDK over the HTTP REST API: login (password and personal access token, and a token
//! as a bearer), streams and topics, send and poll with headers, consumer offsets, consumer
//! groups (create, list, delete: joining is not an HTTP operation), users and permissions;
//! what HTTP creates the TCP client sees. Then hostile requests (malformed JSON, an
//! oversized body, forged, expired and revoked tokens, a deleted user's token), each with
//! a clear status and Iggy's error body, while the SDK's client goes on working.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "over-http";
const TOPIC: &str = "events";

async fn http_client(server: &Server) -> IggyClient {
    let client = IggyClient::builder()
        .with_http()
        .with_api_url(format!("http://{}", server.http_address()))
        .build()
        .expect("an HTTP client");
    client.connect().await.expect("connect over HTTP");
    client
}

async fn http_login(server: &Server, username: &str, password: &str) -> IggyClient {
    let client = http_client(server).await;
    client
        .login_user(username, password)
        .await
        .unwrap_or_else(|error| panic!("HTTP login as {username}: {error}"));
    client
}

#[test]
fn the_sdk_works_over_http() {
    let server = Server::start();
    run(async {
        let client = http_login(&server, ROOT_USERNAME, ROOT_PASSWORD).await;
        client.ping().await.expect("ping");
        let metadata = client.get_cluster_metadata().await.expect("roster");
        let port: u16 = server
            .http_address()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            metadata.nodes[0].endpoints.http, port,
            "the roster names the bound port"
        );

        create_stream_topic(&client, STREAM, TOPIC, 2).await;
        send_range(&client, STREAM, TOPIC, 0, 0..250, 50).await;
        send_range(&client, STREAM, TOPIC, 1, 0..10, 10).await;
        let polled = poll_all(&client, STREAM, TOPIC, 0, 250).await;
        for (index, message) in polled.iter().enumerate() {
            assert_message(message, index as u64);
        }
        let topic = client
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .expect("get topic")
            .expect("the topic");
        assert_eq!(topic.messages_count, 260);
        assert!(
            client
                .get_stream(&id("no-such"))
                .await
                .expect("get")
                .is_none()
        );

        // What HTTP wrote, TCP reads.
        let tcp = root_client(&server).await;
        let over_tcp = poll_all(&tcp, STREAM, TOPIC, 1, 10).await;
        assert_message(&over_tcp[9], 9);

        offsets(&client).await;
        groups(&client).await;
        users(&server, &client).await;
        tokens(&server, &client).await;

        let stats = client.get_stats().await.expect("stats");
        assert_eq!(stats.streams_count, 1);
        assert!(stats.messages_count >= 260);
        client
            .delete_stream(&id(STREAM))
            .await
            .expect("delete stream");
        assert!(client.get_streams().await.expect("streams").is_empty());
        client.logout_user().await.expect("logout");
    });
}

async fn offsets(client: &IggyClient) {
    let consumer = Consumer::new(id("http-consumer"));
    let (stream, topic) = (id(STREAM), id(TOPIC));
    assert!(
        client
            .get_consumer_offset(&consumer, &stream, &topic, Some(0))
            .await
            .expect("get offset")
            .is_none()
    );
    client
        .store_consumer_offset(&consumer, &stream, &topic, Some(0), 99)
        .await
        .expect("store offset");
    let offset = client
        .get_consumer_offset(&consumer, &stream, &topic, Some(0))
        .await
        .expect("get offset")
        .expect("an offset");
    assert_eq!((offset.stored_offset, offset.current_offset), (99, 249));
    client
        .delete_consumer_offset(&consumer, &stream, &topic, Some(0))
        .await
        .expect("delete offset");
}

async fn groups(client: &IggyClient) {
    let (stream, topic) = (id(STREAM), id(TOPIC));
    let group = client
        .create_consumer_group(&stream, &topic, "http-group")
        .await
        .expect("create group");
    assert_eq!(group.partitions_count, 2);
    let listed = client
        .get_consumer_groups(&stream, &topic)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    let fetched = client
        .get_consumer_group(&stream, &topic, &id("http-group"))
        .await
        .expect("get group")
        .expect("the group");
    assert_eq!(fetched.members_count, 0);
    assert!(
        client
            .join_consumer_group(&stream, &topic, &num(group.id))
            .await
            .is_err(),
        "joining is not an HTTP operation"
    );
    client
        .delete_consumer_group(&stream, &topic, &num(group.id))
        .await
        .expect("delete group");
    assert!(
        client
            .get_consumer_groups(&stream, &topic)
            .await
            .expect("list")
            .is_empty()
    );
}

async fn users(server: &Server, client: &IggyClient) {
    client
        .create_user(
            "http-user",
            "secret-pass",
            UserStatus::Active,
            None,
            &UserCreateOptions::default(),
        )
        .await
        .expect("create user");
    let user = http_login(server, "http-user", "secret-pass").await;
    assert!(
        user.get_streams().await.is_err(),
        "no permissions: no streams"
    );
    let created = client
        .get_user(&id("http-user"))
        .await
        .expect("get user")
        .expect("the user");
    let mut permissions = Permissions::default();
    permissions.global.read_streams = true;
    client
        .update_permissions(&num(created.id), Some(permissions))
        .await
        .expect("update permissions");
    assert_eq!(user.get_streams().await.expect("now readable").len(), 1);
    client
        .change_password(&num(created.id), "secret-pass", "another-pass")
        .await
        .expect("change password");
    let wrong = http_client(server).await;
    assert!(
        wrong.login_user("http-user", "secret-pass").await.is_err(),
        "old password"
    );
    http_login(server, "http-user", "another-pass").await;
    client
        .delete_user(&num(created.id))
        .await
        .expect("delete user");
    assert!(
        user.get_streams().await.is_err(),
        "a deleted user's token is refused"
    );
    assert!(
        client
            .get_user(&id("http-user"))
            .await
            .expect("get user")
            .is_none()
    );
}

async fn tokens(server: &Server, client: &IggyClient) {
    let raw = client
        .create_personal_access_token("http-pat", PersonalAccessTokenExpiry::NeverExpire)
        .await
        .expect("create token");
    let listed = client
        .get_personal_access_tokens()
        .await
        .expect("list tokens");
    assert!(listed.iter().any(|token| token.name == "http-pat"));

    let by_token = http_client(server).await;
    by_token
        .login_with_personal_access_token(&raw.token)
        .await
        .expect("token login");
    assert_eq!(by_token.get_streams().await.expect("streams").len(), 1);

    // The token itself as the bearer credential.
    let bearer = IggyClient::builder()
        .with_http()
        .with_api_url(format!("http://{}", server.http_address()))
        .with_jwt(raw.token.clone())
        .build()
        .expect("a client with a bearer");
    assert_eq!(
        bearer.get_streams().await.expect("streams by bearer").len(),
        1
    );

    client
        .delete_personal_access_token("http-pat")
        .await
        .expect("delete token");
    assert!(
        bearer.get_streams().await.is_err(),
        "a deleted token is refused"
    );
}

/// One raw HTTP/1.1 exchange: the status and the body.
fn exchange(address: &str, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

fn request(method: &str, path: &str, token: Option<&str>, body: &str) -> String {
    let authorization = token.map_or(String::new(), |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{authorization}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The error id of an error body.
fn error_id(body: &str) -> u64 {
    let value: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON: {body}"));
    value["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("an id: {body}"))
}

fn login_token(address: &str, username: &str, password: &str) -> String {
    let body = format!(r#"{{"username":"{username}","password":"{password}"}}"#);
    let (status, reply) = exchange(address, &request("POST", "/users/login", None, &body));
    assert_eq!(status, 200, "{reply}");
    let value: serde_json::Value = serde_json::from_str(&reply).expect("JSON");
    value["access_token"]["token"]
        .as_str()
        .expect("a token")
        .to_owned()
}

#[test]
fn bad_http_requests_get_clear_errors_and_the_others_go_on() {
    let server = Server::start_with_env(&[
        ("IGGY_HTTP_JWT_ACCESS_TOKEN_EXPIRY", "2 s"),
        ("IGGY_HTTP_JWT_CLOCK_SKEW", "0 s"),
    ]);
    let address = server.http_address();
    run(async {
        let client = http_login(&server, ROOT_USERNAME, ROOT_PASSWORD).await;
        client
            .create_stream("kept", &StreamCreateOptions::default())
            .await
            .expect("create");

        let (status, body) = exchange(
            &address,
            &request("POST", "/users/login", None, "{\"username\":"),
        );
        assert_eq!(
            (status, error_id(&body)),
            (400, 4),
            "malformed JSON: {body}"
        );
        let (status, body) = exchange(
            &address,
            &request(
                "POST",
                "/users/login",
                None,
                r#"{"username":"iggy","password":"wrong"}"#,
            ),
        );
        assert_eq!(
            (status, error_id(&body)),
            (400, 42),
            "bad credentials: {body}"
        );

        let oversized = format!(
            "POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            3 * 1024 * 1024
        );
        let (status, _) = exchange(&address, &oversized);
        assert_eq!(status, 413, "a body over max_request_size");

        let token = login_token(&address, ROOT_USERNAME, ROOT_PASSWORD);
        let (status, _) = exchange(&address, &request("GET", "/streams", Some(&token), ""));
        assert_eq!(status, 200);
        // 20 KiB of body: refused before it is read without a credential, taken with one.
        let padded = format!(r#"{{"name":"padded"{}}}"#, " ".repeat(20 * 1024));
        let (status, _) = exchange(&address, &request("POST", "/streams", None, &padded));
        assert_eq!(status, 413, "a large body without a credential");
        let (status, body) = exchange(
            &address,
            &request("POST", "/streams", Some(&token), &padded),
        );
        assert_eq!(status, 200, "a large body with a token: {body}");
        let mut forged = token.clone();
        forged.pop();
        forged.push(if token.ends_with('A') { 'B' } else { 'A' });
        let (status, body) = exchange(&address, &request("GET", "/streams", Some(&forged), ""));
        assert_eq!(status, 401, "a forged signature: {body}");
        let (status, _) = exchange(&address, &request("GET", "/streams", Some("not.a.jwt"), ""));
        assert_eq!(status, 401, "junk");
        let (status, body) = exchange(&address, &request("GET", "/streams", None, ""));
        assert_eq!(
            (status, error_id(&body)),
            (401, 77),
            "no credential: {body}"
        );

        // Logout revokes the token.
        let (status, _) = exchange(
            &address,
            &request("DELETE", "/users/logout", Some(&token), ""),
        );
        assert_eq!(status, 204);
        let (status, _) = exchange(&address, &request("GET", "/streams", Some(&token), ""));
        assert_eq!(status, 401, "a token after its logout");

        // Expiry.
        let expiring = login_token(&address, ROOT_USERNAME, ROOT_PASSWORD);
        tokio::time::sleep(Duration::from_millis(3_100)).await;
        let (status, _) = exchange(&address, &request("GET", "/streams", Some(&expiring), ""));
        assert_eq!(status, 401, "an expired token");

        let (status, _) = exchange(
            &address,
            "GET /nowhere HTTP/1.1\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(status, 404);
        let (status, _) = exchange(&address, "garbage\r\n\r\n");
        assert_eq!(status, 400);

        // The SDK's client (its token issued before the others, still valid when logged in
        // again) goes on.
        let client = http_login(&server, ROOT_USERNAME, ROOT_PASSWORD).await;
        let streams = client
            .get_streams()
            .await
            .expect("the SDK client still works");
        assert_eq!(streams.len(), 2, "kept and padded");
    });
}

/// The console routes (README, Web UI) answer a user with `read_servers` and refuse one
/// without it; `/ui` is not served unless `http.web_ui` is on.
#[test]
fn console_routes_need_read_servers_and_the_ui_is_off_by_default() {
    let server = Server::start();
    let address = server.http_address();
    let root = login_token(&address, ROOT_USERNAME, ROOT_PASSWORD);
    let body = r#"{"username":"reader","password":"reader-password","status":"active",
        "permissions":{"global":{"read_streams":true}}}"#;
    let (status, reply) = exchange(&address, &request("POST", "/users", Some(&root), body));
    assert_eq!(status, 200, "{reply}");
    let reader = login_token(&address, "reader", "reader-password");
    for path in ["/system/logs?after=0&limit=5", "/system/config"] {
        let (status, reply) = exchange(&address, &request("GET", path, Some(&root), ""));
        assert_eq!(status, 200, "{path}: {reply}");
        let value: serde_json::Value = serde_json::from_str(&reply).expect("JSON");
        assert!(value.is_object(), "{path}: {reply}");
        let (status, reply) = exchange(&address, &request("GET", path, Some(&reader), ""));
        assert_eq!(status, 403, "{path} without read_servers: {reply}");
        let (status, _) = exchange(&address, &request("GET", path, None, ""));
        assert_eq!(status, 401, "{path} without a credential");
    }
    let (_, logs) = exchange(
        &address,
        &request("GET", "/system/logs?after=0&limit=1000", Some(&root), ""),
    );
    assert!(logs.contains("listening on"), "the start-up lines: {logs}");
    let (_, config) = exchange(&address, &request("GET", "/system/config", Some(&root), ""));
    assert!(
        config.contains("[http]") && config.contains("web_ui = false"),
        "{config}"
    );
    let (status, _) = exchange(&address, &request("GET", "/ui", None, ""));
    assert_eq!(status, 404, "the UI is off by default");
}
