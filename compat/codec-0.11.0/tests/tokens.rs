//! Personal access tokens: create/delete requests SDK → proto, the raw-token reply (behind
//! the result section of operation 146) and the token list (a plain read) proto → SDK.

mod common;

use common::{name, ours, sample_names, sdk_encode, sdk_name, sdk_reply};
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::personal_access_tokens::{
    CreatePersonalAccessTokenRequest, DeletePersonalAccessTokenRequest,
};
use iggy_binary_protocol::responses::personal_access_tokens::{
    GetPersonalAccessTokensResponse, RawPersonalAccessTokenResponse,
};
use proto::commands::session::Secret;
use proto::commands::tokens::{
    CreatePersonalAccessToken, DeletePersonalAccessToken, PersonalAccessTokenInfo,
    PersonalAccessTokens, RawPersonalAccessToken,
};
use proto::header::Operation;

#[test]
fn sdk_token_requests_decode_with_ours() {
    for text in sample_names() {
        for expiry in [0, 3_600_000_000, u64::MAX] {
            let sdk = CreatePersonalAccessTokenRequest {
                name: sdk_name(&text),
                expiry,
            };
            let expected = CreatePersonalAccessToken {
                name: name(&text),
                expiry,
            };
            assert_eq!(
                ours::<CreatePersonalAccessToken>(&sdk_encode(&sdk)),
                expected
            );
        }
        let sdk = DeletePersonalAccessTokenRequest {
            name: sdk_name(&text),
        };
        let expected = DeletePersonalAccessToken { name: name(&text) };
        assert_eq!(
            ours::<DeletePersonalAccessToken>(&sdk_encode(&sdk)),
            expected
        );
    }
}

#[test]
fn our_raw_token_reply_decodes_with_the_sdk() {
    let token = "A".repeat(50);
    let reply = RawPersonalAccessToken {
        token: Secret::new(token.clone()).unwrap(),
    };
    let sdk: RawPersonalAccessTokenResponse = sdk_reply(
        &reply,
        Operation::CreatePersonalAccessToken,
        SdkOperation::CreatePersonalAccessToken,
    );
    assert_eq!(sdk.token.as_str(), token);
}

#[test]
fn our_token_lists_decode_with_the_sdk() {
    for count in [0, 1, 3] {
        let tokens: Vec<_> = sample_names()
            .into_iter()
            .take(count)
            .enumerate()
            .map(|(index, text)| PersonalAccessTokenInfo {
                name: name(&text),
                expiry_at: index as u64 * 1_000_000,
            })
            .collect();
        let reply = PersonalAccessTokens(tokens.clone());
        let sdk: GetPersonalAccessTokensResponse = sdk_reply(
            &reply,
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.tokens.len(), count);
        for (sdk, ours) in sdk.tokens.iter().zip(&tokens) {
            assert_eq!(sdk.name.as_str(), ours.name.as_str());
            assert_eq!(sdk.expiry_at, ours.expiry_at);
        }
    }
}
