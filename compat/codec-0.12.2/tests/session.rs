//! Session codecs: the logins and `BIND_SESSION` the SDK encodes decode with
//! `proto::commands::session`, and our login reply decodes with the SDK behind the result
//! section a `Register` reply carries (and bare behind a `BIND_SESSION` reply).

mod common;

use common::{DIALECT, name, ours, sdk_name, sdk_reply};
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::system::{BindSessionRequest, SessionIdentity};
use iggy_binary_protocol::requests::users::login_register::BindSecret as SdkBindSecret;
use iggy_binary_protocol::requests::users::{LoginRegisterRequest, LoginRegisterWithPatRequest};
use iggy_binary_protocol::responses::users::login_register::LoginRegisterResponse;
use iggy_binary_protocol::{ClientVersionInfo, IGGY_PROTOCOL_VERSION, WireEncode};
use proto::commands::session::{
    BindSecret, BindSession, LoginRegister, LoginRegisterWithPat, LoginReply, Secret,
};
use proto::dialect::{ProtocolVersion, VersionPrefix};
use proto::header::Operation;
use secrecy::SecretString;

const SECRET: [u8; 32] = [0x5c; 32];

fn version() -> ClientVersionInfo {
    ClientVersionInfo {
        protocol_version: IGGY_PROTOCOL_VERSION,
        sdk_name: sdk_name("rust-sdk"),
        sdk_version: sdk_name("0.11.1-edge.9"),
    }
}

fn sdk_secret() -> SdkBindSecret {
    let mut bytes = SECRET;
    bytes[31] = 0xa1;
    SdkBindSecret::new(Box::new(bytes))
}

fn our_secret() -> BindSecret {
    let mut bytes = SECRET;
    bytes[31] = 0xa1;
    BindSecret(bytes)
}

#[test]
fn sdk_login_register_decodes_with_ours() {
    for (username, password) in [("iggy", "iggy"), ("zażółć", "p".repeat(100).as_str())] {
        for context in [None, Some("python-bridge".to_owned())] {
            let sdk = LoginRegisterRequest {
                version_info: version(),
                bind_secret: sdk_secret(),
                username: sdk_name(username),
                password: SecretString::from(password.to_owned()),
                client_context: context.clone(),
            };
            let decoded: LoginRegister = ours(&sdk.to_bytes());
            assert_eq!(decoded.version, VersionPrefix::rust_sdk(DIALECT));
            assert_eq!(decoded.bind_secret, our_secret());
            assert_eq!(decoded.username, name(username));
            assert_eq!(decoded.password, Secret::new(password).unwrap());
            assert_eq!(decoded.context, context.unwrap_or_default());
        }
    }
}

#[test]
fn sdk_login_register_with_pat_decodes_with_ours() {
    let token = "t".repeat(50);
    let sdk = LoginRegisterWithPatRequest {
        version_info: version(),
        bind_secret: sdk_secret(),
        token: SecretString::from(token.clone()),
        client_context: None,
    };
    let decoded: LoginRegisterWithPat = ours(&sdk.to_bytes());
    assert_eq!(decoded.version, VersionPrefix::rust_sdk(DIALECT));
    assert_eq!(decoded.bind_secret, our_secret());
    assert_eq!(decoded.token, Secret::new(token).unwrap());
    assert!(decoded.context.is_empty());
}

#[test]
fn sdk_bind_session_decodes_with_ours() {
    for session in [0, 1, 77] {
        let sdk = BindSessionRequest {
            version_info: version(),
            identity: SessionIdentity {
                client_id: u128::MAX - 5,
                session,
                metadata_watermark: 1234,
            },
            bind_secret: sdk_secret(),
        };
        let decoded: BindSession = ours(&sdk.to_bytes());
        assert_eq!(decoded.version, VersionPrefix::rust_sdk(DIALECT));
        assert_eq!(decoded.client_id, u128::MAX - 5);
        assert_eq!(decoded.session, session);
        assert_eq!(decoded.metadata_watermark, 1234);
        assert_eq!(decoded.bind_secret, our_secret());
    }
}

fn reply() -> LoginReply {
    LoginReply {
        user_id: 0,
        session: 42,
        server_protocol_version: ProtocolVersion::V0_12_2,
        server_version: name("0.9.0"),
    }
}

#[test]
fn our_login_reply_decodes_with_the_sdk() {
    for (ours_op, sdk_op) in [
        (Operation::Register, SdkOperation::Register),
        (Operation::NonReplicated, SdkOperation::NonReplicated),
    ] {
        let sdk: LoginRegisterResponse = sdk_reply(&reply(), ours_op, sdk_op);
        assert_eq!(sdk.user_id, 0);
        assert_eq!(sdk.session, 42);
        assert_eq!(sdk.server_protocol_version, IGGY_PROTOCOL_VERSION);
        assert_eq!(sdk.server_version, sdk_name("0.9.0"));
    }
}
