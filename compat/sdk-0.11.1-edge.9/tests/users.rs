//! Users (create, get, list, update, delete, permissions, change password) and personal access
//! tokens (create, list, delete, at most 100 per user), with permissions checked on commands.

mod common;

use std::collections::BTreeMap;

use common::*;
use iggy::prelude::*;

fn reader_permissions() -> Permissions {
    Permissions {
        global: GlobalPermissions {
            read_streams: true,
            read_topics: true,
            poll_messages: true,
            ..GlobalPermissions::default()
        },
        streams: None,
    }
}

#[test]
fn users_create_get_list_update_delete() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        let user = root
            .create_user(
                "alice",
                "secret-1",
                UserStatus::Active,
                Some(reader_permissions()),
                &UserCreateOptions::default(),
            )
            .await
            .expect("create");
        assert_eq!(
            (user.id, user.username.as_str()),
            (1, "alice"),
            "root is 0, alice the next"
        );
        assert_eq!(user.permissions, Some(reader_permissions()));
        let duplicate = root
            .create_user(
                "alice",
                "secret-2",
                UserStatus::Active,
                None,
                &UserCreateOptions::default(),
            )
            .await;
        assert!(duplicate.is_err(), "a duplicate username");

        let by_name = root.get_user(&id("alice")).await.unwrap().expect("alice");
        assert_eq!(by_name.id, 1);
        assert_eq!(by_name.status, UserStatus::Active);
        let root_user = root.get_user(&num(0)).await.unwrap().expect("root");
        assert_eq!(root_user.username, ROOT_USERNAME);
        assert!(root.get_user(&id("nobody")).await.unwrap().is_none());
        let names: Vec<String> = root
            .get_users()
            .await
            .unwrap()
            .into_iter()
            .map(|user| user.username)
            .collect();
        assert_eq!(names, [ROOT_USERNAME, "alice"]);

        let rename = UserUpdateOptions {
            username: Some("alicia".into()),
            ..Default::default()
        };
        root.update_user(&id("alice"), &rename)
            .await
            .expect("rename");
        assert!(root.get_user(&id("alice")).await.unwrap().is_none());
        let deactivate = UserUpdateOptions {
            status: Some(UserStatus::Inactive),
            ..Default::default()
        };
        root.update_user(&id("alicia"), &deactivate)
            .await
            .expect("deactivate");
        let inactive = root.get_user(&num(1)).await.unwrap().expect("alicia");
        assert_eq!(
            (inactive.username.as_str(), inactive.status),
            ("alicia", UserStatus::Inactive)
        );
        let refused = IggyClient::from_connection_string(&format!(
            "iggy://alicia:secret-1@{}",
            server.tcp_address()
        ))
        .unwrap();
        assert!(
            refused.connect().await.is_err(),
            "an inactive user cannot sign in"
        );

        assert!(
            root.delete_user(&num(0)).await.is_err(),
            "root cannot be deleted"
        );
        root.delete_user(&id("alicia")).await.expect("delete");
        assert!(root.get_user(&num(1)).await.unwrap().is_none());
        assert_eq!(root.get_users().await.unwrap().len(), 1);
    });
}

#[test]
fn permissions_are_enforced_and_can_change() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, "guarded", "t", 1).await;
        send_range(&root, "guarded", "t", 0, 0..3, 3).await;
        root.create_user(
            "reader",
            "secret-1",
            UserStatus::Active,
            Some(reader_permissions()),
            &UserCreateOptions::default(),
        )
        .await
        .unwrap();
        let reader = client_with(&server, "reader", "secret-1").await;
        assert_eq!(
            poll_all(&reader, "guarded", "t", 0, 3).await.len(),
            3,
            "a reader may poll"
        );
        let error = reader
            .create_stream("forbidden", &StreamCreateOptions::default())
            .await
            .expect_err("a reader may not create streams");
        assert_eq!(
            error.as_code(),
            IggyError::Unauthorized.as_code(),
            "{error}"
        );
        let error = reader
            .send_messages(
                &id("guarded"),
                &id("t"),
                &Partitioning::partition_id(0),
                &mut [message(9)],
            )
            .await
            .expect_err("a reader may not send");
        assert_eq!(
            error.as_code(),
            IggyError::Unauthorized.as_code(),
            "{error}"
        );
        assert!(
            reader.get_users().await.is_err(),
            "a reader may not list users"
        );

        let stream_id = root.get_stream(&id("guarded")).await.unwrap().unwrap().id;
        let writer = Permissions {
            global: GlobalPermissions::default(),
            streams: Some(BTreeMap::from([(
                stream_id as usize,
                StreamPermissions {
                    manage_topics: true,
                    read_stream: true,
                    ..StreamPermissions::default()
                },
            )])),
        };
        root.update_permissions(&id("reader"), Some(writer.clone()))
            .await
            .expect("update permissions");
        let details = root.get_user(&id("reader")).await.unwrap().unwrap();
        assert_eq!(details.permissions, Some(writer));
        let fresh = client_with(&server, "reader", "secret-1").await;
        fresh
            .send_messages(
                &id("guarded"),
                &id("t"),
                &Partitioning::partition_id(0),
                &mut [message(3)],
            )
            .await
            .expect("stream manage_topics allows sending");
        assert!(
            root.update_permissions(&num(0), None).await.is_err(),
            "root permissions are fixed"
        );
    });
}

#[test]
fn change_password() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        root.create_user(
            "bob",
            "old-secret",
            UserStatus::Active,
            None,
            &UserCreateOptions::default(),
        )
        .await
        .unwrap();
        let bob = client_with(&server, "bob", "old-secret").await;
        let wrong = bob
            .change_password(&id("bob"), "not-it", "new-secret")
            .await;
        assert!(wrong.is_err(), "the current password must match");
        bob.change_password(&id("bob"), "old-secret", "new-secret")
            .await
            .expect("change own password");

        let old = IggyClient::from_connection_string(&format!(
            "iggy://bob:old-secret@{}",
            server.tcp_address()
        ))
        .unwrap();
        assert!(
            old.connect().await.is_err(),
            "the old password no longer works"
        );
        let new = client_with(&server, "bob", "new-secret").await;
        new.ping().await.unwrap();
        // Root changes another user's password with manage_users.
        root.change_password(&id("bob"), "new-secret", "root-set")
            .await
            .expect("root changes it");
        client_with(&server, "bob", "root-set")
            .await
            .ping()
            .await
            .unwrap();
    });
}

#[test]
fn personal_access_tokens_create_list_delete_and_limit() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        let never = root
            .create_personal_access_token("never", PersonalAccessTokenExpiry::NeverExpire)
            .await
            .expect("create");
        let hour = IggyExpiry::ExpireDuration(IggyDuration::from(3_600_000_000));
        root.create_personal_access_token("hourly", hour)
            .await
            .expect("create with expiry");
        let duplicate = root
            .create_personal_access_token("never", PersonalAccessTokenExpiry::NeverExpire)
            .await;
        assert_eq!(duplicate.expect_err("a duplicate name").as_code(), 51);

        let tokens = root.get_personal_access_tokens().await.expect("list");
        let names: Vec<&str> = tokens.iter().map(|token| token.name.as_str()).collect();
        assert_eq!(names, ["hourly", "never"]);
        let hourly = tokens.iter().find(|token| token.name == "hourly").unwrap();
        assert!(hourly.expiry_at.is_some(), "an expiring token reports when");
        let never_info = tokens.iter().find(|token| token.name == "never").unwrap();
        assert!(
            never_info.expiry_at.is_none(),
            "a lasting token reports no expiry"
        );

        root.delete_personal_access_token("never")
            .await
            .expect("delete");
        let client = anonymous_client(&server).await;
        assert!(
            client
                .login_with_personal_access_token(&never.token)
                .await
                .is_err(),
            "a deleted token no longer signs in"
        );
        assert!(
            root.delete_personal_access_token("never").await.is_err(),
            "delete twice"
        );

        for index in 1..100 {
            root.create_personal_access_token(
                &format!("token-{index:03}"),
                PersonalAccessTokenExpiry::NeverExpire,
            )
            .await
            .unwrap_or_else(|error| panic!("token {index}: {error}"));
        }
        assert_eq!(root.get_personal_access_tokens().await.unwrap().len(), 100);
        let error = root
            .create_personal_access_token("one-too-many", PersonalAccessTokenExpiry::NeverExpire)
            .await
            .expect_err("the 101st token");
        assert_eq!(
            error.as_code(),
            52,
            "PersonalAccessTokensLimitReached: {error}"
        );
    });
}
