//! The checks the `http` fuzz target runs (the target is a one-line call, so the seeded
//! test below runs the same code on stable): any bytes as a request target, as each JSON
//! body the API reads, as an option value, and as a bearer token give a value or an error,
//! never a panic, and what is accepted stays within the protocol's bounds.

use http::Method;
use proto::primitives::{HeaderKind, Identifier};

use crate::jwt::{Jwt, JwtSettings};
use crate::request_json::{self as body, parse};
use crate::route::{Target, route};
use crate::values::to_tlv;

/// One fuzz input through every decoder of the API.
pub fn fuzz_request(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if let Ok(target) = Target::parse(&text) {
        for method in [
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
        ] {
            let _ = route(&method, &target.segments);
        }
        let stream = Identifier::Numeric(1);
        let _ = body::poll_query(&target, stream.clone(), stream.clone());
        let _ = body::offset_query(&target, None);
    }
    let _ = parse::<body::LoginBody>(bytes);
    let _ = parse::<body::CreateTopicBody>(bytes);
    let _ = parse::<body::CreateUserBody>(bytes).map(|user| {
        user.permissions
            .map(body::PermissionsBody::into_permissions)
    });
    let _ = parse::<body::StoreOffsetBody>(bytes)
        .map(|store| body::consumer(store.consumer_kind.as_deref(), &store.consumer_id));
    if let Ok(send) = parse::<body::SendBody>(bytes) {
        let id = Identifier::Numeric(0);
        if let Ok(request) = body::send_request(&send, &id, &id, 1) {
            assert!(request.len() >= 256, "a send holds at least a batch header");
        }
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        for kind in HeaderKind::ALL {
            if let Ok(entry) = to_tlv(kind, &value) {
                let size = kind.fixed_size();
                assert!(size.is_none_or(|size| size == entry.data.as_bytes().len()));
            }
        }
    }
    let jwt = Jwt::new(JwtSettings {
        issuer: "i".into(),
        audience: "a".into(),
        valid_issuers: Vec::new(),
        valid_audiences: Vec::new(),
        lifetime_s: 60,
        clock_skew_s: 0,
        not_before_s: 0,
        encoding_secret: b"fuzz".to_vec(),
        decoding_secret: b"fuzz".to_vec(),
    });
    assert!(jwt.verify(&text, 0).is_err(), "no input forges a token");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::fuzz_request;

    #[test]
    fn seeded_inputs_run_through_every_decoder() {
        let seeds: [&[u8]; 6] = [
            b"/streams/a%20b/topics/1/messages/deferred?kind=offset&count=5&consumer_id=c",
            br#"{"partitioning":{"kind":"partition_id","value":"AAAAAA=="},
                "messages":[{"id":1,"payload":"aGk="}]}"#,
            br#"{"username":"u","password":"p","permissions":{"global":{},"streams":{"x":{}}}}"#,
            br#"{"consumer_id":4294967296,"offset":1}"#,
            b"\"7 days\"",
            b"eyJhbGciOiJub25lIn0.e30.",
        ];
        for seed in seeds {
            fuzz_request(seed);
        }
    }

    /// Every file of `fuzz/corpus/http` (crash inputs found by `cargo fuzz run http` go there).
    #[test]
    fn replay_http_corpus() {
        let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/http");
        let mut replayed = 0;
        for entry in std::fs::read_dir(corpus).expect("the corpus directory") {
            let path = entry.expect("a corpus entry").path();
            fuzz_request(&std::fs::read(&path).expect("a corpus file"));
            replayed += 1;
        }
        assert!(replayed > 0, "the corpus has inputs");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz_request(&bytes);
        }
    }
}
