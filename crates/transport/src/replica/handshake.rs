//! The replica handshake: the acceptor sends a fresh challenge, the dialer answers with its
//! replica id and a BLAKE3 keyed MAC of the challenge under the cluster's shared secret.
//! Pure functions over fixed-size byte arrays; the sockets are in [`super`].
//!
//! Only the dialer proves itself: replica traffic flows from dialer to acceptor alone, so the
//! acceptor authenticates everything it will receive (confidentiality and the acceptor's own
//! identity are what `[cluster.tls]` would add).
//!
//! | message | bytes |
//! | --- | --- |
//! | hello (acceptor → dialer) | `IGRH`, version u32 (2), cluster u128, acceptor u8, |
//! | | challenge 32, at-rest 32 |
//! | answer (dialer → acceptor) | `IGRA`, version u32 (2), cluster u128, dialer u8, MAC 32, |
//! | | at-rest 32 |
//!
//! The MAC covers the context string, the cluster, the challenge and both replica ids, so an
//! answer cannot be replayed to another challenge, cluster or acceptor. Without
//! `[cluster.auth]` the MAC is 32 zero bytes and is not checked.
//!
//! `at-rest` is each side's encryption-at-rest key fingerprint (a keyed hash of a constant,
//! which reveals nothing of the key; zeros without encryption). Replicas exchange sealed
//! records, so nodes under different keys (or one without a key) refuse each other here,
//! rather than serve records a node cannot open.

/// Bytes of a hello and of an answer.
pub const MESSAGE_SIZE: usize = 4 + 4 + 16 + 1 + 32 + 32;

const HELLO_MAGIC: [u8; 4] = *b"IGRH";
const ANSWER_MAGIC: [u8; 4] = *b"IGRA";
const VERSION: u32 = 2;
const KEY_CONTEXT: &str = "iggy replica handshake v1 key";

/// The shared secrets of `[cluster.auth]`: the one this node proves, and a retiring one it
/// still accepts from peers during a rotation.
#[derive(Clone)]
pub struct Secrets {
    current: [u8; 32],
    previous: Option<[u8; 32]>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Secrets(redacted)")
    }
}

impl Secrets {
    /// Keys derived from the configured secrets (any length; the config asks for 32 bytes).
    pub fn new(current: &[u8], previous: Option<&[u8]>) -> Self {
        Self {
            current: blake3::derive_key(KEY_CONTEXT, current),
            previous: previous.map(|secret| blake3::derive_key(KEY_CONTEXT, secret)),
        }
    }
}

/// Why a handshake message is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    #[error("not a replica handshake (magic or version)")]
    NotReplica,
    #[error("the peer belongs to another cluster")]
    OtherCluster,
    #[error("replica {0} is not a peer of this node")]
    UnknownReplica(u8),
    #[error("the peer does not know the cluster's shared secret")]
    BadProof,
    #[error(
        "the peer's encryption-at-rest key differs from this node's (every node needs the \
         same system.encryption.key, or none)"
    )]
    OtherAtRestKey,
}

/// What the acceptor says first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub cluster: u128,
    pub acceptor: u8,
    pub challenge: [u8; 32],
    /// The acceptor's at-rest key fingerprint.
    pub at_rest: [u8; 32],
}

/// What the dialer answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub cluster: u128,
    pub dialer: u8,
    pub mac: [u8; 32],
    /// The dialer's at-rest key fingerprint.
    pub at_rest: [u8; 32],
}

/// The fields every message has: cluster, replica, a 32-byte proof or challenge, the
/// at-rest key fingerprint.
type Fields = (u128, u8, [u8; 32], [u8; 32]);

fn encode(magic: [u8; 4], (cluster, replica, tail, at_rest): Fields) -> [u8; MESSAGE_SIZE] {
    let mut bytes = [0u8; MESSAGE_SIZE];
    bytes[0..4].copy_from_slice(&magic);
    bytes[4..8].copy_from_slice(&VERSION.to_le_bytes());
    bytes[8..24].copy_from_slice(&cluster.to_le_bytes());
    bytes[24] = replica;
    bytes[25..57].copy_from_slice(&tail);
    bytes[57..].copy_from_slice(&at_rest);
    bytes
}

fn decode(magic: [u8; 4], bytes: &[u8; MESSAGE_SIZE]) -> Result<Fields, HandshakeError> {
    let mut version = [0u8; 4];
    version.copy_from_slice(&bytes[4..8]);
    if bytes[0..4] != magic || u32::from_le_bytes(version) != VERSION {
        return Err(HandshakeError::NotReplica);
    }
    let mut cluster = [0u8; 16];
    cluster.copy_from_slice(&bytes[8..24]);
    let (mut tail, mut at_rest) = ([0u8; 32], [0u8; 32]);
    tail.copy_from_slice(&bytes[25..57]);
    at_rest.copy_from_slice(&bytes[57..]);
    Ok((u128::from_le_bytes(cluster), bytes[24], tail, at_rest))
}

impl Hello {
    pub fn encode(&self) -> [u8; MESSAGE_SIZE] {
        let fields = (self.cluster, self.acceptor, self.challenge, self.at_rest);
        encode(HELLO_MAGIC, fields)
    }

    pub fn decode(bytes: &[u8; MESSAGE_SIZE]) -> Result<Self, HandshakeError> {
        let (cluster, acceptor, challenge, at_rest) = decode(HELLO_MAGIC, bytes)?;
        Ok(Self {
            cluster,
            acceptor,
            challenge,
            at_rest,
        })
    }

    /// The dialer's answer to this hello; `at_rest` is the dialer's key fingerprint.
    pub fn answer(&self, dialer: u8, secrets: Option<&Secrets>, at_rest: [u8; 32]) -> Answer {
        let mac = secrets.map_or([0; 32], |secrets| self.mac(&secrets.current, dialer));
        Answer {
            cluster: self.cluster,
            dialer,
            mac,
            at_rest,
        }
    }

    /// Checks `answer` on the acceptor: the same cluster, a dialer among `peers`, and (with
    /// secrets) a MAC under the current or the previous secret, compared in constant time.
    pub fn verify(
        &self,
        answer: &Answer,
        peers: &[u8],
        secrets: Option<&Secrets>,
    ) -> Result<u8, HandshakeError> {
        if answer.cluster != self.cluster {
            return Err(HandshakeError::OtherCluster);
        }
        if !peers.contains(&answer.dialer) || answer.dialer == self.acceptor {
            return Err(HandshakeError::UnknownReplica(answer.dialer));
        }
        if answer.at_rest != self.at_rest {
            return Err(HandshakeError::OtherAtRestKey);
        }
        let Some(secrets) = secrets else {
            return Ok(answer.dialer);
        };
        let given = blake3::Hash::from_bytes(answer.mac);
        let keys = std::iter::once(&secrets.current).chain(secrets.previous.as_ref());
        // `blake3::Hash` compares in constant time.
        let proven = keys
            .map(|key| blake3::Hash::from_bytes(self.mac(key, answer.dialer)) == given)
            .fold(false, |any, matched| any | matched);
        if proven {
            Ok(answer.dialer)
        } else {
            Err(HandshakeError::BadProof)
        }
    }

    fn mac(&self, key: &[u8; 32], dialer: u8) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new_keyed(key);
        hasher.update(b"iggy replica handshake v1");
        hasher.update(&self.cluster.to_le_bytes());
        hasher.update(&self.challenge);
        hasher.update(&[self.acceptor, dialer]);
        *hasher.finalize().as_bytes()
    }
}

impl Answer {
    pub fn encode(&self) -> [u8; MESSAGE_SIZE] {
        encode(
            ANSWER_MAGIC,
            (self.cluster, self.dialer, self.mac, self.at_rest),
        )
    }

    pub fn decode(bytes: &[u8; MESSAGE_SIZE]) -> Result<Self, HandshakeError> {
        let (cluster, dialer, mac, at_rest) = decode(ANSWER_MAGIC, bytes)?;
        Ok(Self {
            cluster,
            dialer,
            mac,
            at_rest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Answer, HandshakeError, Hello, MESSAGE_SIZE, Secrets};

    /// Both sides' at-rest key fingerprint.
    const AT_REST: [u8; 32] = [5; 32];

    fn hello() -> Hello {
        Hello {
            cluster: 0xC1,
            acceptor: 0,
            challenge: [7; 32],
            at_rest: AT_REST,
        }
    }

    #[test]
    fn a_peer_with_the_secret_is_admitted() {
        let secrets = Secrets::new(&[1; 32], None);
        let answer = hello().answer(2, Some(&secrets), AT_REST);
        let decoded = Answer::decode(&answer.encode()).unwrap();
        assert_eq!(hello().verify(&decoded, &[1, 2], Some(&secrets)), Ok(2));
        assert_eq!(Hello::decode(&hello().encode()), Ok(hello()));
    }

    #[test]
    fn wrong_secrets_clusters_ids_and_replays_are_refused() {
        let secrets = Secrets::new(&[1; 32], None);
        let stranger = Secrets::new(&[2; 32], None);
        let peers = [1, 2];
        let forged = hello().answer(2, Some(&stranger), AT_REST);
        assert_eq!(
            hello().verify(&forged, &peers, Some(&secrets)),
            Err(HandshakeError::BadProof)
        );
        let unauthenticated = hello().answer(2, None, AT_REST);
        assert_eq!(
            hello().verify(&unauthenticated, &peers, Some(&secrets)),
            Err(HandshakeError::BadProof)
        );
        let other_challenge = Hello {
            challenge: [8; 32],
            ..hello()
        };
        let replayed = other_challenge.answer(2, Some(&secrets), AT_REST);
        assert_eq!(
            hello().verify(&replayed, &peers, Some(&secrets)),
            Err(HandshakeError::BadProof)
        );
        let mut as_other = hello().answer(2, Some(&secrets), AT_REST);
        as_other.dialer = 1;
        assert_eq!(
            hello().verify(&as_other, &peers, Some(&secrets)),
            Err(HandshakeError::BadProof)
        );
        let other_cluster = Hello {
            cluster: 0xC2,
            ..hello()
        }
        .answer(2, Some(&secrets), AT_REST);
        assert_eq!(
            hello().verify(&other_cluster, &peers, Some(&secrets)),
            Err(HandshakeError::OtherCluster)
        );
        let outsider = hello().answer(5, Some(&secrets), AT_REST);
        assert_eq!(
            hello().verify(&outsider, &peers, Some(&secrets)),
            Err(HandshakeError::UnknownReplica(5))
        );
        let itself = hello().answer(0, Some(&secrets), AT_REST);
        assert_eq!(
            hello().verify(&itself, &[0, 1, 2], Some(&secrets)),
            Err(HandshakeError::UnknownReplica(0))
        );
    }

    #[test]
    fn the_previous_secret_is_accepted_during_a_rotation() {
        let old = [1; 32];
        let new = [9; 32];
        let acceptor = Secrets::new(&old, Some(&new));
        let rotated_peer = Secrets::new(&new, Some(&old));
        let answer = hello().answer(1, Some(&rotated_peer), AT_REST);
        assert_eq!(hello().verify(&answer, &[1], Some(&acceptor)), Ok(1));
    }

    #[test]
    fn garbage_is_not_a_handshake() {
        let mut bytes = [0u8; MESSAGE_SIZE];
        assert_eq!(Hello::decode(&bytes), Err(HandshakeError::NotReplica));
        bytes = hello().encode();
        assert_eq!(Answer::decode(&bytes), Err(HandshakeError::NotReplica));
        bytes[4] = 1;
        assert_eq!(Hello::decode(&bytes), Err(HandshakeError::NotReplica));
    }

    #[test]
    fn a_peer_under_another_at_rest_key_is_refused() {
        let secrets = Secrets::new(&[1; 32], None);
        for other in [[0; 32], [6; 32]] {
            let answer = hello().answer(2, Some(&secrets), other);
            let decoded = Answer::decode(&answer.encode()).unwrap();
            assert_eq!(
                hello().verify(&decoded, &[1, 2], Some(&secrets)),
                Err(HandshakeError::OtherAtRestKey)
            );
        }
    }
}
