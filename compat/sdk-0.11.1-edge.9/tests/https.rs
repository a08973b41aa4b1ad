//! HTTPS with the SDK's own validation: the server reads a certificate for `localhost`
//! from PEM files made here, and the SDK trusts exactly that certificate (its HTTP client
//! has no CA option; `SSL_CERT_FILE` replaces the platform's roots). Login, send and poll
//! over HTTPS; a plaintext client gets nowhere. Alone in its test binary because it sets
//! the environment.

mod common;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "over-https";
const TOPIC: &str = "events";

#[test]
fn https_is_validated_by_the_sdk() {
    let directory = std::env::temp_dir().join(format!("iggy-https-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("a directory for the certificate");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("certificate");
    let (cert_file, key_file) = (directory.join("cert.pem"), directory.join("key.pem"));
    std::fs::write(&cert_file, made.cert.pem()).expect("write the certificate");
    std::fs::write(&key_file, made.signing_key.serialize_pem()).expect("write the key");
    let server = Server::start_with_env(&[
        ("IGGY_HTTP_TLS_ENABLED", "true"),
        ("IGGY_HTTP_TLS_SELF_SIGNED", "false"),
        ("IGGY_HTTP_TLS_CERT_FILE", cert_file.to_str().unwrap()),
        ("IGGY_HTTP_TLS_KEY_FILE", key_file.to_str().unwrap()),
    ]);
    // SAFETY: this is the binary's only test and no other thread runs yet; the variable is
    // set before any client reads it.
    unsafe { std::env::set_var("SSL_CERT_FILE", &cert_file) };
    let port = server.http_address().rsplit(':').next().unwrap().to_owned();
    run(async {
        let client = IggyClient::builder()
            .with_http()
            .with_api_url(format!("https://localhost:{port}"))
            .build()
            .expect("an HTTPS client");
        client
            .login_user(ROOT_USERNAME, ROOT_PASSWORD)
            .await
            .expect("login over HTTPS");
        create_stream_topic(&client, STREAM, TOPIC, 1).await;
        send_range(&client, STREAM, TOPIC, 0, 0..40, 20).await;
        let polled = poll_all(&client, STREAM, TOPIC, 0, 40).await;
        assert_message(&polled[39], 39);

        let plain = IggyClient::builder()
            .with_http()
            .with_api_url(format!("http://localhost:{port}"))
            .build()
            .expect("a plaintext client");
        assert!(
            plain
                .login_user(ROOT_USERNAME, ROOT_PASSWORD)
                .await
                .is_err()
        );
    });
    let _ = std::fs::remove_dir_all(&directory);
}
