//! User commands: `GET_USER`, `GET_USERS`, `CREATE_USER`, `DELETE_USER`, `UPDATE_PERMISSIONS`
//! and `CHANGE_PASSWORD` requests SDK → proto; `UserDetails` (behind no result section for
//! `GET_USER`, behind one for `CREATE_USER`), the user list and the empty write replies
//! proto → SDK. 0.11.0 user records carry one options block: our derived block, set in every
//! sample, must not reach the wire.

mod common;

use common::{
    name, our_bytes, our_options, ours, ours_request, sample_names, sample_options, sdk_encode,
    sdk_name, sdk_reply,
};
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::users::{
    ChangePasswordRequest, CreateUserRequest, DeleteUserRequest, GetUserRequest, GetUsersRequest,
    UpdatePermissionsRequest,
};
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::users::get_user::UserDetailsResponse;
use iggy_binary_protocol::responses::users::get_users::GetUsersResponse;
use iggy_binary_protocol::responses::users::user_response::UserResponse as SdkUser;
use iggy_binary_protocol::{
    WireGlobalPermissions, WireIdentifier, WirePermissions, WireStreamPermissions,
    WireTopicPermissions,
};
use proto::codes::CommandCode;
use proto::commands::session::Secret;
use proto::commands::users::{
    ChangePassword, CreateUser, DeleteUser, GetUser, UpdatePermissions, UserDetails, UserResponse,
    UserStatus, Users,
};
use proto::commands::{Empty, Request};
use proto::header::Operation;
use proto::primitives::{Identifier, Permissions};

fn ids() -> Vec<WireIdentifier> {
    vec![
        WireIdentifier::numeric(0),
        WireIdentifier::numeric(u32::MAX),
        WireIdentifier::named("zażółć").unwrap(),
    ]
}

fn id(sdk: &WireIdentifier) -> Identifier {
    ours(&sdk_encode(sdk))
}

fn topic(topic_id: u32, all: bool) -> WireTopicPermissions {
    WireTopicPermissions {
        topic_id,
        manage_topic: all,
        read_topic: true,
        poll_messages: !all,
        send_messages: all,
    }
}

/// No permissions, a global-only set, and a tree with streams and topics.
fn permission_samples() -> Vec<Option<WirePermissions>> {
    let global = |all: bool| WireGlobalPermissions {
        manage_servers: all,
        read_servers: true,
        manage_users: all,
        read_users: !all,
        manage_streams: all,
        read_streams: true,
        manage_topics: false,
        read_topics: all,
        poll_messages: true,
        send_messages: all,
    };
    let stream = WireStreamPermissions {
        stream_id: 1,
        manage_stream: true,
        read_stream: false,
        manage_topics: true,
        read_topics: false,
        poll_messages: true,
        send_messages: false,
        topics: vec![topic(1, true), topic(u32::MAX, false)],
    };
    let bare = WireStreamPermissions {
        stream_id: 9,
        topics: vec![],
        ..stream.clone()
    };
    vec![
        None,
        Some(WirePermissions {
            global: global(true),
            streams: vec![],
        }),
        Some(WirePermissions {
            global: global(false),
            streams: vec![stream, bare],
        }),
    ]
}

fn our_permissions(sdk: &Option<WirePermissions>) -> Option<Permissions> {
    sdk.as_ref().map(|sdk| ours(&sdk_encode(sdk)))
}

#[test]
fn sdk_user_lookups_and_deletes_decode_with_ours() {
    for user_id in ids() {
        let get = sdk_encode(&GetUserRequest {
            user_id: user_id.clone(),
        });
        assert_eq!(
            ours::<GetUser>(&get),
            GetUser {
                user_id: id(&user_id)
            }
        );
        let delete = sdk_encode(&DeleteUserRequest {
            user_id: user_id.clone(),
        });
        let expected = DeleteUser {
            user_id: id(&user_id),
        };
        assert_eq!(ours::<DeleteUser>(&delete), expected);
        assert_eq!(
            ours_request(CommandCode::DeleteUser, &delete),
            Request::DeleteUser(expected)
        );
    }
    let list = sdk_encode(&GetUsersRequest);
    assert_eq!(
        ours_request(CommandCode::GetUsers, &list),
        Request::GetUsers(Empty)
    );
}

#[test]
fn sdk_create_user_requests_decode_with_ours() {
    let passwords = ["abc", "secret-πάσσγουορντ", &"p".repeat(100)];
    for (username, password) in ["iggy", "user-with-50-bytes", &"u".repeat(50)]
        .into_iter()
        .zip(passwords)
    {
        for status in [1, 2] {
            for permissions in permission_samples() {
                for options in sample_options() {
                    let sdk = CreateUserRequest {
                        username: sdk_name(username),
                        password: password.to_owned(),
                        status,
                        permissions: permissions.clone(),
                        options: options.clone(),
                    };
                    let expected = CreateUser {
                        username: name(username),
                        password: Secret::new(password).unwrap(),
                        status: UserStatus::from_u8(status).unwrap(),
                        permissions: our_permissions(&permissions),
                        options: our_options(&options),
                    };
                    assert_eq!(ours::<CreateUser>(&sdk_encode(&sdk)), expected);
                }
            }
        }
    }
}

#[test]
fn sdk_update_permissions_requests_decode_with_ours() {
    for user_id in ids() {
        for permissions in permission_samples() {
            let sdk = UpdatePermissionsRequest {
                user_id: user_id.clone(),
                permissions: permissions.clone(),
            };
            let expected = UpdatePermissions {
                user_id: id(&user_id),
                permissions: our_permissions(&permissions),
            };
            assert_eq!(ours::<UpdatePermissions>(&sdk_encode(&sdk)), expected);
        }
    }
}

#[test]
fn sdk_change_password_requests_decode_with_ours() {
    for user_id in ids() {
        for (current, new) in [("abc", "abd"), ("zażółć", &*"n".repeat(100))] {
            let sdk = ChangePasswordRequest {
                user_id: user_id.clone(),
                current_password: current.to_owned(),
                new_password: new.to_owned(),
            };
            let expected = ChangePassword {
                user_id: id(&user_id),
                current_password: Secret::new(current).unwrap(),
                new_password: Secret::new(new).unwrap(),
            };
            assert_eq!(ours::<ChangePassword>(&sdk_encode(&sdk)), expected);
        }
    }
}

/// Users with every name sample, both statuses and every options sample in both blocks.
fn users() -> Vec<UserResponse> {
    let options = sample_options();
    sample_names()
        .into_iter()
        .enumerate()
        .map(|(index, text)| UserResponse {
            id: index as u32,
            created_at: 1_700_000_000_000_000 + index as u64,
            status: if index % 2 == 0 {
                UserStatus::Active
            } else {
                UserStatus::Inactive
            },
            username: name(&text),
            options: our_options(&options[index % options.len()]),
            derived_options: our_options(&options[2]),
        })
        .collect()
}

fn assert_user(sdk: &SdkUser, ours: &UserResponse) {
    assert_eq!(sdk.id, ours.id);
    assert_eq!(sdk.created_at, ours.created_at);
    assert_eq!(sdk.status, ours.status.as_u8());
    assert_eq!(sdk.username.as_str(), ours.username.as_str());
    assert_eq!(sdk.options.as_bytes(), our_bytes(&ours.options));
}

#[test]
fn our_user_details_decode_with_the_sdk() {
    for (user, permissions) in users()
        .into_iter()
        .zip(permission_samples().into_iter().cycle())
    {
        let details = UserDetails {
            user,
            permissions: our_permissions(&permissions),
        };
        let read: UserDetailsResponse = sdk_reply(
            &Some(details.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        let created: UserDetailsResponse =
            sdk_reply(&details, Operation::CreateUser, SdkOperation::CreateUser);
        for sdk in [read, created] {
            assert_user(&sdk.user, &details.user);
            assert_eq!(sdk.permissions, permissions);
        }
    }
    assert!(common::our_reply(&None::<UserDetails>, Operation::NonReplicated).is_empty());
}

#[test]
fn our_user_lists_decode_with_the_sdk() {
    let all = users();
    for count in 0..=all.len() {
        let records = all[..count].to_vec();
        let sdk: GetUsersResponse = sdk_reply(
            &Users(records.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.users.len(), count);
        for (sdk, ours) in sdk.users.iter().zip(&records) {
            assert_user(sdk, ours);
        }
    }
}

#[test]
fn our_empty_user_write_replies_decode_with_the_sdk() {
    for (ours, sdk) in [
        (Operation::DeleteUser, SdkOperation::DeleteUser),
        (
            Operation::UpdatePermissions,
            SdkOperation::UpdatePermissions,
        ),
        (Operation::ChangePassword, SdkOperation::ChangePassword),
    ] {
        let _: EmptyResponse = sdk_reply(&Empty, ours, sdk);
    }
}
