//! The embedded web UI (`http.web_ui = true`) end to end in headless Chromium, driven over
//! WebDriver (Debian's `chromium` and `chromedriver`, which `cargo xtask ci` installs):
//! log in, create a stream and a topic, send a message and browse it, watch a consumer
//! group's lag fall as a real SDK consumer reads, and check that a payload holding a script
//! tag is shown as text and never runs. A screenshot of each page is written to
//! `compat/web-ui/screenshots/` (committed beside that directory's README).

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::StreamExt;
use iggy::prelude::*;

const STREAM: &str = "web-stream";
const TOPIC: &str = "web-topic";
const GROUP: &str = "web-group";
/// A payload that would run script if the page ever rendered payloads as markup.
const HOSTILE: &str =
    "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
const KEY: &str = "q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=";
/// How long a page may take to show what the test waits for.
const WAIT: Duration = Duration::from_secs(20);

/// chromedriver on a free port, killed on drop.
struct Driver {
    child: Child,
    url: String,
    profile: tempfile_dir::Dir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary directory for the browser profile (the harness's crate has `tempfile`, this
/// project does not: a directory under the system's temporary directory, removed on drop).
mod tempfile_dir {
    pub struct Dir(pub std::path::PathBuf);

    impl Dir {
        pub fn new(name: &str) -> Self {
            let path = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("create the browser profile directory");
            Self(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn program(variable: &str, default: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| default.to_owned())
}

fn start_driver() -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let chromedriver = program("CHROMEDRIVER", "/usr/bin/chromedriver");
    let child = Command::new(&chromedriver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| {
            panic!(
                "start {chromedriver} (Debian's chromium-driver, from `cargo xtask ci`): {error}"
            )
        });
    let deadline = Instant::now() + WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
        profile: tempfile_dir::Dir::new("iggy-web-ui-profile"),
    }
}

async fn browser(driver: &Driver) -> Client {
    let chromium = program("CHROMIUM", "/usr/bin/chromium");
    let profile = driver.profile.0.display().to_string();
    let options = serde_json::json!({
        "binary": chromium,
        "args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--window-size=1280,900",
            format!("--user-data-dir={profile}"),
        ],
    });
    // The WebDriver connection is plain HTTP, but the client is built with rustls, which needs
    // one crypto provider chosen when the dependency graph enables two.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("goog:chromeOptions".into(), options);
    ClientBuilder::rustls()
        .expect("a TLS client for the WebDriver connection")
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a Chromium session")
}

fn screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../web-ui/screenshots")
}

/// A screenshot of the page as it is, notices cleared, scrolled to `focus` when given.
async fn snap_at(client: &Client, name: &str, focus: Option<&str>) {
    let script = "document.getElementById('toast').replaceChildren(); \
                  const focus = arguments[0] && document.querySelector(arguments[0]); \
                  if (focus) focus.scrollIntoView({block: 'end'}); else window.scrollTo(0, 0);";
    let focus = serde_json::json!(focus);
    client.execute(script, vec![focus]).await.unwrap();
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::create_dir_all(screenshots()).unwrap();
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
}

async fn snap(client: &Client, name: &str) {
    snap_at(client, name, None).await;
}

/// The text of the first element `css` finds once it contains `needle`.
async fn wait_text(client: &Client, css: &str, needle: &str) -> String {
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(element) = client.find(Locator::Css(css)).await {
            last = element.text().await.unwrap_or_default();
            if last.contains(needle) {
                return last;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{css} never showed {needle:?}; it showed {last:?}");
}

async fn type_into(client: &Client, css: &str, text: &str) {
    let input = client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|error| panic!("{css}: {error}"));
    input.clear().await.unwrap();
    input.send_keys(text).await.unwrap();
}

/// Clicks the element `css` finds. A page that re-renders between the find and the click
/// leaves a stale element; the click then goes to its replacement.
async fn click(client: &Client, css: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let element = client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("{css}: {error}"));
        match element.click().await {
            Ok(()) => return,
            Err(error) if error.to_string().contains("stale") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("click {css}: {error}"),
        }
    }
}

/// Removes the notices shown so far, so that waiting for one waits for the next.
async fn clear_toasts(client: &Client) {
    let script = "document.getElementById('toast').replaceChildren();";
    client.execute(script, vec![]).await.unwrap();
}

async fn open(client: &Client, base: &str, page: &str) {
    client.goto(&format!("{base}{page}")).await.unwrap();
}

#[test]
fn the_web_ui_manages_streams_browses_messages_and_shows_group_lag() {
    let server = Server::start_with_env(&[
        ("IGGY_HTTP_WEB_UI", "true"),
        ("IGGY_SYSTEM_ENCRYPTION_ENABLED", "true"),
        ("IGGY_SYSTEM_ENCRYPTION_KEY", KEY),
    ]);
    let driver = start_driver();
    let base = format!("http://{}/ui", server.http_address());
    run(async {
        let client = browser(&driver).await;
        log_in(&client, &base).await;
        create_stream_and_topic(&client, &base).await;
        send_and_browse(&client, &base).await;
        group_lag_follows_a_consumer(&client, &base, &server).await;
        users_tokens_clients_logs_config(&client, &base).await;
        overview_under_load(&client, &base, &server).await;
        rename_and_purge(&client, &base).await;
        client.close().await.expect("close the browser");
    });
}

async fn log_in(client: &Client, base: &str) {
    open(client, base, "").await;
    wait_text(client, "h1", "Log in").await;
    snap(client, "login").await;
    type_into(client, "input[name=username]", ROOT_USERNAME).await;
    type_into(client, "input[name=password]", ROOT_PASSWORD).await;
    click(client, "#login-form button[type=submit]").await;
    wait_text(client, "h1", "Overview").await;
}

async fn create_stream_and_topic(client: &Client, base: &str) {
    open(client, base, "#/streams").await;
    for name in [STREAM, "scratch"] {
        type_into(client, "input[name=stream-name]", name).await;
        click(client, "#create-stream button[type=submit]").await;
        wait_text(client, "table", name).await;
    }
    // Delete the scratch stream through its confirmation dialog.
    let rows = client.find_all(Locator::Css("tbody tr")).await.unwrap();
    for row in rows {
        if row.text().await.unwrap().contains("scratch") {
            let delete = row.find(Locator::Css("button.danger")).await.unwrap();
            delete.click().await.unwrap();
            break;
        }
    }
    client.accept_alert().await.expect("the delete asks first");
    let deadline = Instant::now() + WAIT;
    loop {
        let table = client.find(Locator::Css("table")).await;
        let text = match table {
            Ok(table) => table.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if text.contains(STREAM) && !text.contains("scratch") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the scratch stream was not deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    snap(client, "streams").await;
    open(client, base, &format!("#/streams/{STREAM}")).await;
    wait_text(client, "h1", STREAM).await;
    type_into(client, "input[name=topic-name]", TOPIC).await;
    type_into(client, "input[name=topic-partitions]", "1").await;
    click(client, "#create-topic button[type=submit]").await;
    wait_text(client, "table", TOPIC).await;
    snap(client, "stream").await;
}

async fn send_and_browse(client: &Client, base: &str) {
    open(client, base, &format!("#/streams/{STREAM}/topics/{TOPIC}")).await;
    wait_text(client, "h1", TOPIC).await;
    for (payload, headers) in [
        (r#"{"hello": "web", "n": 1}"#, "trace: abc-123"),
        (HOSTILE, ""),
    ] {
        clear_toasts(client).await;
        type_into(client, "textarea[name=send-payload]", payload).await;
        type_into(client, "textarea[name=send-headers]", headers).await;
        click(client, "#send-form button[type=submit]").await;
        wait_text(client, "#toast", "Message sent").await;
    }
    click(client, "#browse-form button[type=submit]").await;
    let shown = wait_text(client, "#messages", "hello").await;
    assert!(shown.contains("\"hello\": \"web\""), "pretty JSON: {shown}");
    assert!(
        shown.contains("trace (string) = abc-123"),
        "headers: {shown}"
    );
    assert!(
        shown.contains(HOSTILE),
        "the hostile payload as text: {shown}"
    );
    // Nothing of it became markup, and nothing ran.
    let verdict = client
        .execute(
            "return [typeof window.__pwned, \
             document.querySelectorAll('#messages script, #messages img').length];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(verdict, serde_json::json!(["undefined", 0]));
    snap_at(client, "topic", Some("#messages")).await;
}

async fn group_lag_follows_a_consumer(client: &Client, base: &str, server: &Server) {
    let sdk = root_client(server).await;
    let messages: Vec<IggyMessage> = (0..10)
        .map(|index| IggyMessage::from(format!("more-{index}")))
        .collect();
    let mut messages = messages;
    sdk.send_messages(
        &Identifier::named(STREAM).unwrap(),
        &Identifier::named(TOPIC).unwrap(),
        &Partitioning::partition_id(0),
        &mut messages,
    )
    .await
    .expect("send with the SDK");
    open(client, base, &format!("#/streams/{STREAM}/topics/{TOPIC}")).await;
    type_into(client, "input[name=group-name]", GROUP).await;
    click(client, "#create-group button[type=submit]").await;
    wait_text(client, "#groups", GROUP).await;
    open(
        client,
        base,
        &format!("#/streams/{STREAM}/topics/{TOPIC}/groups/{GROUP}"),
    )
    .await;
    // Nothing read yet: all 12 messages are the group's lag.
    wait_text(client, "#group-lag", "12").await;
    snap(client, "group-before").await;

    let mut consumer = sdk
        .consumer_group(GROUP, STREAM, TOPIC)
        .unwrap()
        .polling_strategy(PollingStrategy::next())
        .poll_options(PollOptions {
            count: 1,
            ..auto_commit_on_delivery()
        })
        .build();
    consumer.init().await.expect("the consumer joins the group");
    for _ in 0..5 {
        let next = tokio::time::timeout(WAIT, consumer.next()).await;
        assert!(matches!(next, Ok(Some(Ok(_)))), "a message: {next:?}");
    }
    // Five read and committed: the page (refreshed every 2 s) shows seven left, and the
    // consumer as the group's member.
    wait_text(client, "#group-lag", "7").await;
    let page = wait_text(client, "#group", "Partitions").await;
    assert!(
        !page.contains("No members"),
        "the consumer is a member: {page}"
    );
    snap(client, "group-after").await;
    consumer.shutdown().await.ok();
}

async fn users_tokens_clients_logs_config(client: &Client, base: &str) {
    open(client, base, "#/users").await;
    type_into(client, "input[name=new-username]", "web-user").await;
    type_into(client, "input[name=new-password]", "web-password").await;
    click(client, "input[name=perm-read_streams]").await;
    click(client, "#create-user button[type=submit]").await;
    wait_text(client, "table", "web-user").await;
    snap(client, "users").await;
    open(client, base, "#/users/web-user").await;
    wait_text(client, "h1", "web-user").await;
    let checked = client
        .execute(
            "return document.querySelector('input[name=perm-read_streams]').checked",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        checked,
        serde_json::json!(true),
        "the permission was stored"
    );
    snap(client, "user").await;

    open(client, base, "#/tokens").await;
    type_into(client, "input[name=token-name]", "web-token").await;
    click(client, "#create-token button[type=submit]").await;
    wait_text(client, "#minted", "not shown again").await;
    wait_text(client, "table", "web-token").await;
    snap(client, "tokens").await;

    open(client, base, "#/clients").await;
    wait_text(client, "h1", "Connected clients").await;
    snap(client, "clients").await;

    open(client, base, "#/logs").await;
    wait_text(client, "#log", "INFO").await;
    snap(client, "logs").await;

    open(client, base, "#/config").await;
    let config = wait_text(client, "#config", "[system").await;
    assert!(!config.contains(KEY), "the encryption key reached the UI");
    assert!(config.contains("<redacted>"), "secrets show as redacted");
    snap(client, "config").await;
}

/// The overview while an SDK producer sends for a few seconds: the charts draw from the
/// metrics the server reports.
async fn overview_under_load(client: &Client, base: &str, server: &Server) {
    open(client, base, "#/").await;
    wait_text(client, "h1", "Overview").await;
    let sdk = root_client(server).await;
    let (stream, topic) = (
        Identifier::named(STREAM).unwrap(),
        Identifier::named(TOPIC).unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(9);
    let mut sent = 0_u64;
    while Instant::now() < until {
        let mut batch: Vec<IggyMessage> = (0..100)
            .map(|index| IggyMessage::from(format!("load-{sent}-{index}")))
            .collect();
        sdk.send_messages(&stream, &topic, &Partitioning::balanced(), &mut batch)
            .await
            .expect("send under load");
        sent += 100;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let charts = wait_text(client, "#charts", "messages/s").await;
    assert!(
        !charts.contains("messages/s: 0.00"),
        "the rate chart moved: {charts}"
    );
    snap(client, "overview").await;
}

/// A topic's expiry edited, then the topic renamed through its prompt and purged through
/// its confirmation: its messages go, the topic stays.
async fn rename_and_purge(client: &Client, base: &str) {
    // An hour of message expiry, saved from the topic's settings form.
    open(client, base, &format!("#/streams/{STREAM}/topics/{TOPIC}")).await;
    type_into(client, "input[name=edit-expiry]", "3600").await;
    click(client, "#edit-topic button[type=submit]").await;
    wait_text(client, "#toast", "Topic updated").await;
    wait_text(client, "main", "3600000000").await;
    open(client, base, &format!("#/streams/{STREAM}")).await;
    let row = format!("//tr[td/a[text()='{TOPIC}']]");
    let rename = client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::XPath(&format!("{row}//button[text()='Rename']")))
        .await
        .unwrap();
    rename.click().await.unwrap();
    client.send_alert_text("web-topic-2").await.unwrap();
    client.accept_alert().await.unwrap();
    wait_text(client, "table", "web-topic-2").await;
    let purge = client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::XPath(
            "//tr[td/a[text()='web-topic-2']]//button[text()='Purge']",
        ))
        .await
        .unwrap();
    purge.click().await.unwrap();
    client.accept_alert().await.unwrap();
    wait_text(client, "#toast", "Topic purged").await;
    let deadline = Instant::now() + WAIT;
    loop {
        // The row is read afresh each time: a re-render replaces it.
        let row = "//tr[td/a[text()='web-topic-2']]/td[4]";
        let count = match client.find(Locator::XPath(row)).await {
            Ok(cell) => cell.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if count == "0" {
            break;
        }
        assert!(Instant::now() < deadline, "the purge left messages");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
