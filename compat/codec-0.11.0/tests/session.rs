//! Session codecs in the 0.11.0 dialect: the logins the SDK encodes (no bind secret) decode
//! with `proto::commands::session`, and our login reply decodes with the SDK behind the result
//! section a `Register` reply carries. `BIND_SESSION` does not exist in this dialect.

mod common;

use common::{DIALECT, name, ours, sdk_name, sdk_reply};
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::users::{LoginRegisterRequest, LoginRegisterWithPatRequest};
use iggy_binary_protocol::responses::users::login_register::LoginRegisterResponse;
use iggy_binary_protocol::{ClientVersionInfo, IGGY_PROTOCOL_VERSION, WireEncode};
use proto::commands::session::{
    BindSecret, LoginRegister, LoginRegisterWithPat, LoginReply, Secret,
};
use proto::dialect::{ProtocolVersion, VersionPrefix};
use proto::header::Operation;
use secrecy::SecretString;

fn version() -> ClientVersionInfo {
    ClientVersionInfo {
        protocol_version: IGGY_PROTOCOL_VERSION,
        sdk_name: sdk_name("rust-sdk"),
        sdk_version: sdk_name("0.11.0"),
    }
}

#[test]
fn sdk_version_is_this_dialect() {
    assert_eq!(
        ProtocolVersion(IGGY_PROTOCOL_VERSION),
        ProtocolVersion::V0_11_0
    );
    assert_eq!(
        proto::Dialect::for_version(ProtocolVersion(IGGY_PROTOCOL_VERSION)),
        Some(DIALECT)
    );
}

#[test]
fn sdk_login_register_decodes_with_ours() {
    for (username, password) in [("iggy", "iggy"), ("zażółć", "p".repeat(100).as_str())] {
        for context in [None, Some("python-bridge".to_owned())] {
            let sdk = LoginRegisterRequest {
                version_info: version(),
                username: sdk_name(username),
                password: SecretString::from(password.to_owned()),
                client_context: context.clone(),
            };
            let decoded: LoginRegister = ours(&sdk.to_bytes());
            assert_eq!(decoded.version, VersionPrefix::rust_sdk(DIALECT));
            assert_eq!(decoded.bind_secret, BindSecret::default());
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
        token: SecretString::from(token.clone()),
        client_context: None,
    };
    let decoded: LoginRegisterWithPat = ours(&sdk.to_bytes());
    assert_eq!(decoded.version, VersionPrefix::rust_sdk(DIALECT));
    assert_eq!(decoded.bind_secret, BindSecret::default());
    assert_eq!(decoded.token, Secret::new(token).unwrap());
    assert!(decoded.context.is_empty());
}

#[test]
fn our_login_reply_decodes_with_the_sdk() {
    let reply = LoginReply {
        user_id: 3,
        session: 42,
        server_protocol_version: ProtocolVersion::V0_11_0,
        server_version: name("0.9.0"),
    };
    let sdk: LoginRegisterResponse = sdk_reply(&reply, Operation::Register, SdkOperation::Register);
    assert_eq!((sdk.user_id, sdk.session), (3, 42));
    assert_eq!(sdk.server_protocol_version, IGGY_PROTOCOL_VERSION);
    assert_eq!(sdk.server_version, sdk_name("0.9.0"));
}
