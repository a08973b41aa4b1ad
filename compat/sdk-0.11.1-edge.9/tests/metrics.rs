//! `GET /metrics` during a produce/consume run by the SDK: the counts, offsets, consumer lag
//! (in messages and in seconds) and request histograms agree with what the test did; a
//! consumer that stops shows growing lag while a caught-up one shows zero; the endpoint
//! needs a credential (a JWT or a personal access token) and follows `[http.metrics]`.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "metered";
const TOPIC: &str = "events";
/// A consumer that keeps up, and one that stops early.
const CAUGHT_UP: u32 = 7;
const STOPPED: u32 = 8;

/// One scrape, as `name{labels}` → value.
struct Scrape {
    samples: BTreeMap<String, f64>,
    text: String,
}

impl Scrape {
    fn parse(text: String) -> Self {
        let samples = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').expect("`series value`");
                let value = value.parse().unwrap_or_else(|_| panic!("number in {line}"));
                (series.to_owned(), value)
            })
            .collect();
        Self { samples, text }
    }

    fn value(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in\n{}", self.text))
    }

    fn consumer(&self, family: &str, consumer: u32) -> f64 {
        self.value(&format!(
            "{family}{{stream=\"{STREAM}\",topic=\"{TOPIC}\",partition=\"0\",\
             kind=\"consumer\",consumer=\"{consumer}\"}}"
        ))
    }

    fn partition(&self, family: &str) -> f64 {
        self.value(&format!(
            "{family}{{stream=\"{STREAM}\",topic=\"{TOPIC}\",partition=\"0\"}}"
        ))
    }

    fn requests(&self, command: &str) -> f64 {
        self.value(&format!(
            "iggy_request_duration_seconds_count{{command=\"{command}\",transport=\"tcp\"}}"
        ))
    }

    /// Every histogram's cumulative buckets never fall, and `+Inf` is its `_count`.
    fn assert_histograms_whole(&self) {
        let mut histograms: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
        for (series, value) in &self.samples {
            let Some((name, labels)) = series.split_once("_bucket{") else {
                continue;
            };
            let (others, le) = labels.rsplit_once("le=\"").expect("an le label");
            let le = le.trim_end_matches("\"}");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("a bound")
            };
            let key = (name.to_owned(), others.trim_end_matches(',').to_owned());
            histograms.entry(key).or_default().push((le, *value));
        }
        assert!(histograms.len() > 3, "histograms exported");
        for ((name, labels), mut buckets) in histograms {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(
                buckets.windows(2).all(|pair| pair[0].1 <= pair[1].1),
                "{name}{{{labels}}}"
            );
            let count = if labels.is_empty() {
                format!("{name}_count")
            } else {
                format!("{name}_count{{{labels}}}")
            };
            assert_eq!(
                buckets.last().map(|last| last.1),
                Some(self.value(&count)),
                "{count}"
            );
        }
    }
}

/// One raw HTTP/1.1 exchange: the status and the body.
fn exchange(address: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let authorization = token.map_or(String::new(), |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{authorization}\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
    if status == 200 {
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4"),
            "{head}"
        );
    }
    (status, body.to_owned())
}

fn login_token(address: &str) -> String {
    let body = format!(r#"{{"username":"{ROOT_USERNAME}","password":"{ROOT_PASSWORD}"}}"#);
    let request = format!(
        "POST /users/login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let body = response.split_once("\r\n\r\n").expect("a body").1;
    let value: serde_json::Value = serde_json::from_str(body).expect("JSON");
    value["access_token"]["token"]
        .as_str()
        .expect("a token")
        .to_owned()
}

fn scrape(address: &str, token: &str) -> Scrape {
    let (status, body) = exchange(address, "/metrics", Some(token));
    assert_eq!(status, 200, "{body}");
    Scrape::parse(body)
}

async fn poll_to_end(client: &IggyClient, consumer: u32, expected: u32) {
    let consumer = Consumer::new(num(consumer));
    let mut polled_total = 0;
    while polled_total < expected {
        let polled = client
            .poll_messages(
                &id(STREAM),
                &id(TOPIC),
                0,
                &consumer,
                &PollingStrategy::next(),
                PollOptions {
                    count: 100,
                    commit: CommitPolicy::OnRead,
                    ..PollOptions::default()
                },
            )
            .await
            .expect("poll");
        assert!(!polled.messages.is_empty(), "messages to poll");
        polled_total += polled.messages.len() as u32;
    }
}

#[test]
fn metrics_follow_a_produce_and_consume_run() {
    let server = Server::start();
    let address = server.http_address();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 1).await;
        send_range(&client, STREAM, TOPIC, 0, 0..100, 10).await;
        poll_to_end(&client, CAUGHT_UP, 100).await;
        let stopped = Consumer::new(num(STOPPED));
        client
            .store_consumer_offset(&stopped, &id(STREAM), &id(TOPIC), Some(0), 9)
            .await
            .expect("store the stopped consumer's offset");

        let token = login_token(&address);
        let first = scrape(&address, &token);
        assert_eq!(first.partition("iggy_partition_messages"), 100.0);
        assert_eq!(first.partition("iggy_partition_current_offset"), 99.0);
        assert_eq!(first.partition("iggy_partition_first_offset"), 0.0);
        assert_eq!(first.value("iggy_streams"), 1.0);
        assert_eq!(first.consumer("iggy_consumer_offset", CAUGHT_UP), 99.0);
        assert_eq!(first.consumer("iggy_consumer_lag_messages", CAUGHT_UP), 0.0);
        assert_eq!(first.consumer("iggy_consumer_lag_seconds", CAUGHT_UP), 0.0);
        assert_eq!(first.consumer("iggy_consumer_lag_messages", STOPPED), 90.0);
        assert!(first.consumer("iggy_consumer_lag_seconds", STOPPED) > 0.0);
        assert_eq!(first.requests("send_messages"), 10.0, "one per batch sent");
        assert!(
            first.requests("poll_messages_deferred") >= 1.0,
            "the SDK polls with 106"
        );
        assert_eq!(
            first.requests("create_stream"),
            1.0,
            "a forwarded request counts once"
        );
        assert!(first.value("iggy_append_duration_seconds_count") >= 10.0);
        first.assert_histograms_whole();
        let stats = client.get_stats().await.expect("stats");
        // What GET_STATS and the metrics both report, they report alike.
        for (family, stat) in [
            ("iggy_messages", stats.messages_count),
            ("iggy_segments", u64::from(stats.segments_count)),
            ("iggy_streams", u64::from(stats.streams_count)),
            ("iggy_topics", u64::from(stats.topics_count)),
            ("iggy_partitions", u64::from(stats.partitions_count)),
            (
                "iggy_consumer_groups",
                u64::from(stats.consumer_groups_count),
            ),
            ("iggy_clients", u64::from(stats.clients_count)),
        ] {
            assert_eq!(first.value(family), stat as f64, "{family}");
        }
        assert_eq!(
            first.value("iggy_messages_bytes"),
            stats.messages_size_bytes.as_bytes_u64() as f64
        );

        // More messages a second later: the stopped consumer falls further behind, in
        // messages and in age; the one that keeps polling is caught up again.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        send_range(&client, STREAM, TOPIC, 0, 100..150, 10).await;
        poll_to_end(&client, CAUGHT_UP, 50).await;
        let second = scrape(&address, &token);
        assert_eq!(
            second.consumer("iggy_consumer_lag_messages", STOPPED),
            140.0
        );
        let age = second.consumer("iggy_consumer_lag_seconds", STOPPED);
        assert!(
            age >= first.consumer("iggy_consumer_lag_seconds", STOPPED) + 1.0,
            "the first unconsumed message is older: {age}"
        );
        assert_eq!(
            second.consumer("iggy_consumer_lag_messages", CAUGHT_UP),
            0.0
        );
        assert_eq!(second.consumer("iggy_consumer_lag_seconds", CAUGHT_UP), 0.0);
        assert_eq!(second.requests("send_messages"), 15.0);
        assert_eq!(second.partition("iggy_partition_messages"), 150.0);
        let topic = format!("{{stream=\"{STREAM}\",topic=\"{TOPIC}\"}}");
        assert_eq!(second.value(&format!("iggy_topic_messages{topic}")), 150.0);
        assert_eq!(
            second.value(&format!("iggy_stream_segments{{stream=\"{STREAM}\"}}")),
            second.partition("iggy_partition_segments")
        );

        // A personal access token works as the bearer; no credential gets 401.
        let pat = client
            .create_personal_access_token("scraper", PersonalAccessTokenExpiry::NeverExpire)
            .await
            .expect("a token");
        let (status, _) = exchange(&address, "/metrics", Some(&pat.token));
        assert_eq!(status, 200);
        let (status, _) = exchange(&address, "/metrics", None);
        assert_eq!(status, 401);
        let (status, _) = exchange(&address, "/metrics", Some("forged"));
        assert_eq!(status, 401);
    });
}

#[test]
fn metrics_can_be_moved_or_turned_off() {
    let moved = Server::start_with_env(&[("IGGY_HTTP_METRICS_ENDPOINT", "/prometheus")]);
    let address = moved.http_address();
    let token = login_token(&address);
    assert_eq!(exchange(&address, "/prometheus", Some(&token)).0, 200);
    assert_eq!(exchange(&address, "/metrics", Some(&token)).0, 404);

    let off = Server::start_with_env(&[("IGGY_HTTP_METRICS_ENABLED", "false")]);
    let address = off.http_address();
    let token = login_token(&address);
    assert_eq!(exchange(&address, "/metrics", Some(&token)).0, 404);
}
