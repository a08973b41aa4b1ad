//! Credentials sealed at rest, end to end through the handlers on a real journal: with a
//! key, no password hash or token digest reaches any file of the data directory, logins
//! work before and after a restart with the key, and nothing matches without it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proto::Dialect;
use proto::codes::CommandCode;
use proto::commands::session::Secret;
use proto::commands::tokens::{CreatePersonalAccessToken, RawPersonalAccessToken};
use proto::commands::users::{ChangePassword, CreateUser, UserStatus};
use proto::primitives::OptionsBlock;

use super::metadata_tests::{call, connection, decode, id, info, name, root_user};
use crate::at_rest::credentials::CredentialSeal;
use crate::metadata::auth::token_hash;
use crate::node::Node;
use crate::refusal::{Login, Refusal};
use crate::server::Server;

async fn open(root: &Path, key: Option<u8>) -> std::rc::Rc<Server> {
    let (node, _inboxes) = Node::new(1);
    if let Some(byte) = key {
        node.encrypt_with(Arc::new(seal::MasterKey::new([byte; 32])));
    }
    Server::open(info(), root.to_path_buf(), node)
        .await
        .unwrap()
}

/// Every byte of every file under `root`.
fn every_file(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Sets up root, alice (password changed once) and a token of alice's; returns the token.
async fn credentials(server: &Server) -> String {
    root_user(server).await;
    let dialect = Dialect::V0_12_2;
    let mut root = connection(server, 0, dialect);
    let create = CreateUser {
        username: name("alice"),
        password: Secret::new("wonderland").unwrap(),
        status: UserStatus::Active,
        permissions: None,
        options: OptionsBlock::default(),
    };
    let created = call(server, &mut root, CommandCode::CreateUser, &create).await;
    assert!(created.is_ok());
    let mut alice = connection(server, 1, dialect);
    let change = ChangePassword {
        user_id: id("alice"),
        current_password: Secret::new("wonderland").unwrap(),
        new_password: Secret::new("looking-glass").unwrap(),
    };
    let changed = call(server, &mut alice, CommandCode::ChangePassword, &change).await;
    assert_eq!(changed, Ok(None));
    let token = CreatePersonalAccessToken {
        name: name("ci-token"),
        expiry: CreatePersonalAccessToken::EXPIRY_NEVER,
    };
    let minted = call(
        server,
        &mut alice,
        CommandCode::CreatePersonalAccessToken,
        &token,
    );
    let minted: RawPersonalAccessToken = decode(&minted.await.unwrap().unwrap(), dialect);
    minted.token.expose().to_owned()
}

fn logins(server: &Server, token: &str, seal: &CredentialSeal) -> [Result<u32, Refusal>; 3] {
    let metadata = server.metadata();
    [
        metadata.authenticate("iggy", "secret", seal),
        metadata.authenticate("alice", "looking-glass", seal),
        metadata.authenticate_token(token, 0, seal),
    ]
}

#[test]
fn credentials_are_sealed_in_every_file_and_open_only_with_the_key() {
    let root = std::env::temp_dir().join(format!("shard-credential-seal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    compio::runtime::Runtime::new().unwrap().block_on(async {
        let server = open(&root, Some(9)).await;
        let token = credentials(&server).await;
        assert_eq!(
            logins(&server, &token, &server.credentials),
            [Ok(0), Ok(1), Ok(1)]
        );
        let stored = &server.metadata().users[&1];
        assert!(stored.password_hash.starts_with(seal::SEALED_SECRET_PREFIX));
        server.close().await.unwrap();
        drop(server);

        let digest = token_hash(&token);
        for (path, bytes) in every_file(&root) {
            for secret in ["$argon2", &digest, &token, "looking-glass", "wonderland"] {
                assert!(!holds(&bytes, secret), "{} holds {secret}", path.display());
            }
        }

        let server = open(&root, Some(9)).await;
        assert_eq!(
            logins(&server, &token, &server.credentials),
            [Ok(0), Ok(1), Ok(1)]
        );
        // Another key (or none) opens nothing: every login is refused, never mis-checked.
        let refused = Err(Refusal::Login(Login::Credentials));
        let token_refused = Err(Refusal::Login(Login::Token));
        for seal in [CredentialSeal::default(), open_seal(10)] {
            assert_eq!(
                logins(&server, &token, &seal),
                [refused, refused, token_refused]
            );
        }
        server.close().await.unwrap();
    });
    let _ = std::fs::remove_dir_all(&root);
}

fn open_seal(byte: u8) -> CredentialSeal {
    CredentialSeal::new(Some(Arc::new(seal::MasterKey::new([byte; 32]))))
}
