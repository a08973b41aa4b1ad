//! Glue shared by the metadata families (streams, topics, partitions, users, tokens,
//! `UPDATE_RESOURCE`): the calling user, the data plane's figures for replies, and the
//! validate → commit → reply sequence.
//!
//! Refusals go through [`Outcome::rejected`]: in the result section for result-framed
//! operations, in the header `status` for reads, mapped to a code the client's dialect knows.

use proto::commands::Empty;
use proto::commands::topics::ReplicaIds;
use proto::header::{Operation, RequestHeader};

use crate::cluster::{Applied, ReplicatedOp};
use crate::connection::Connection;
use crate::data::{DataPlane, PartitionKey};
use crate::metadata::responses::{Members, PartitionFigures, PartitionStats};
use crate::metadata::{Metadata, MetadataOp, User};
use crate::outcome::{Body, Outcome, ReplyValue};
use crate::refusal::Refusal;
use crate::retries::Origin;
use crate::server::Server;

/// What a metadata handler needs of the request besides its body.
#[derive(Debug, Clone, Copy)]
pub(super) struct Call {
    pub(super) operation: Operation,
    /// The connection's user id, if it is logged in.
    pub(super) user_id: Option<u32>,
    /// The request's SDK identity, by which cluster mode knows a retry (`crate::retries`).
    pub(super) origin: Option<Origin>,
}

impl Call {
    pub(super) fn of(header: &RequestHeader, connection: &Connection) -> Self {
        Self {
            operation: super::operation_of(header),
            user_id: connection.user_id(),
            origin: Origin::of(header.client.get(), header.request.get()),
        }
    }

    /// The refusal of this call with `code`, at the current commit.
    pub(super) fn reject(&self, server: &Server, refusal: Refusal) -> Outcome {
        Outcome::rejected(self.operation, refusal, server.commit_number())
    }

    /// A successful answer carrying `payload` (behind a result section where framed).
    pub(super) fn answer(&self, server: &Server, payload: impl ReplyValue + 'static) -> Outcome {
        Outcome::value(self.operation, payload, server.commit_number())
    }

    /// The calling user as the metadata knows it now. A session whose user was deleted
    /// acts as nobody: `40 Unauthenticated`.
    pub(super) fn actor<'m>(&self, metadata: &'m Metadata) -> Result<&'m User, Refusal> {
        self.user_id
            .and_then(|id| metadata.users.get(&id))
            .ok_or(Refusal::Unauthenticated)
    }

    /// Runs `check` against the metadata as it is now, as the calling user.
    pub(super) fn validate<T>(
        &self,
        server: &Server,
        check: impl FnOnce(&Metadata, &User) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let metadata = server.metadata.borrow();
        self.actor(&metadata)
            .and_then(|actor| check(&metadata, actor))
    }

    /// Validates with `check` and commits an op whose reply carries nothing.
    pub(super) async fn commit_checked(
        &self,
        server: &Server,
        check: impl Fn(&Metadata, &User) -> Result<MetadataOp, Refusal>,
    ) -> Outcome {
        self.commit(server, check, |_, _, _| Some(Empty)).await
    }

    /// Validates with `check`, commits the op it builds and answers with what `payload`
    /// builds from the metadata after it and the op committed; a refusal of validation or
    /// commit is answered as such. A change another client's commit made stale is validated
    /// again (`Server::commit_validated`).
    ///
    /// In cluster mode a retry of a change that committed (the primary died before its
    /// answer) is answered as its first attempt would have been, from that attempt's op and
    /// commit, whatever validation says now; when the reply cannot be rebuilt (the secret of
    /// a token, or what the change made is gone since) it gets validation's refusal. A retry
    /// validated before its first attempt applied commits as a no-op (`apply_metadata`).
    pub(super) async fn commit<T: ReplyValue + 'static>(
        &self,
        server: &Server,
        check: impl Fn(&Metadata, &User) -> Result<MetadataOp, Refusal>,
        payload: impl FnOnce(&Metadata, &DataFigures<'_>, &MetadataOp) -> Option<T>,
    ) -> Outcome {
        if let Some((first, commit)) = server.committed_change(self.origin) {
            let built = {
                let metadata = server.metadata.borrow();
                payload(&metadata, &DataFigures::of(server), &first)
            };
            return match (built, self.validate(server, &check)) {
                (Some(reply), _) => {
                    committed_reply(server, self.operation, Body::Value(Box::new(reply)), commit)
                }
                (None, Err(refusal)) => self.reject(server, refusal),
                // What the first attempt made was removed since, and validation would make
                // it again: neither answer is the first attempt's, so neither is given.
                (None, Ok(_)) => {
                    log::info!("a retry of {:?}: its change is gone since", first.kind());
                    self.reject(server, Refusal::Internal)
                }
            };
        }
        let checked = |metadata: &Metadata| {
            self.actor(metadata)
                .and_then(|actor| check(metadata, actor))
        };
        let (op, commit) = match server.commit_validated(self.origin, checked).await {
            Ok(committed) => committed,
            Err(refusal) => return self.reject(server, refusal),
        };
        // A retry validated before its first attempt applied committed as a no-op: the reply
        // is the first attempt's, built from its op (a token this attempt minted was never
        // stored, so it is not answered).
        let applied = server
            .committed_change(self.origin)
            .map_or(op, |(first, _)| first);
        let built = {
            let metadata = server.metadata.borrow();
            payload(&metadata, &DataFigures::of(server), &applied)
        };
        match built {
            Some(reply) => {
                committed_reply(server, self.operation, Body::Value(Box::new(reply)), commit)
            }
            // The op applied, so what it created exists: a miss is a bug, or a retry of a
            // token create whose first attempt's secret went with the lost answer.
            None => self.reject(server, Refusal::Internal),
        }
    }
}

impl Call {
    /// A purge or `DELETE_SEGMENTS` in cluster mode: replicated as `op`, synced by a quorum
    /// before it counts (it destroys data), applied on every node in op order, and answered
    /// with the committed-result marker of its op. A retry after a lost answer (the same SDK
    /// client and request number) is answered with the first attempt's op and truncates
    /// nothing more: a second `DELETE_SEGMENTS` of a count would delete as many again.
    pub(super) async fn truncate(
        &self,
        server: &Server,
        replication: &crate::server::Replication,
        op: &ReplicatedOp,
    ) -> Outcome {
        let applied = match server.truncated_by(self.origin) {
            Some(first) => Ok(Applied::Truncated(first)),
            None => replication.submit(op, true).await,
        };
        match applied {
            Ok(Applied::Truncated(number)) => {
                let body = Body::Value(Box::new(Empty));
                committed_reply(server, self.operation, body, number)
            }
            Ok(_) => self.reject(server, Refusal::Internal),
            Err(refusal) => self.reject(server, refusal),
        }
    }
}

/// The successful reply to a metadata change committed as `commit`. In cluster mode it names
/// that commit (the change's replica-log op) and carries the committed-result marker, so a
/// client whose first attempt's answer was lost settles its retry at once instead of after
/// its whole budget (§1.5); elsewhere it reports the current commit.
pub(super) fn committed_reply(
    server: &Server,
    operation: Operation,
    body: Body,
    commit: u64,
) -> Outcome {
    if server.replication().is_some() {
        Outcome::with_body(operation, body, commit).committed(commit)
    } else {
        Outcome::with_body(operation, body, server.commit_number())
    }
}

/// The data plane's per-partition figures, as the reply builders of
/// [`crate::metadata::responses`] read them; a partition that is not open reads as empty.
#[derive(Debug, Clone)]
pub(super) struct DataFigures<'d> {
    data: &'d DataPlane,
    members: Members,
}

impl<'d> DataFigures<'d> {
    pub(super) fn of(server: &'d Server) -> Self {
        Self {
            data: &server.data,
            members: partition_members(server),
        }
    }
}

/// Every partition is on every node of a cluster (one consensus group orders all their
/// changes), so its members are the roster. In sync are the nodes known to hold every
/// committed op: this node once it is caught up, and on the primary each backup it reaches
/// that acknowledged up to the commit in this view (after a view change, a backup counts
/// again from its first acknowledgement). Outside cluster mode: this node alone.
fn partition_members(server: &Server) -> Members {
    let Some(replication) = server.replication() else {
        return Members::default();
    };
    let roster = &server.info.roster;
    let status = &replication.status;
    let me = roster.replica_id;
    let commit = status.progress().commit;
    let leads = status.is_normal() && status.primary() == me;
    let mut ids: Vec<u8> = roster.nodes.iter().map(|node| node.replica_id).collect();
    ids.sort_unstable();
    let in_sync: Vec<u8> = ids
        .iter()
        .copied()
        .filter(|&replica| {
            if replica == me {
                status.is_caught_up()
            } else {
                leads && status.reaches(replica) && status.acked(replica) >= commit
            }
        })
        .collect();
    Members {
        members: ReplicaIds::new(ids).unwrap_or_default(),
        in_sync: ReplicaIds::new(in_sync).unwrap_or_default(),
    }
}

impl PartitionStats for DataFigures<'_> {
    fn partition(&self, stream_id: u32, topic_id: u32, partition_id: u32) -> PartitionFigures {
        let key = PartitionKey {
            stream_id,
            topic_id,
            partition_id,
        };
        self.data
            .partition_stats(key)
            .map_or_else(PartitionFigures::default, |stats| PartitionFigures {
                segments_count: stats.segments_count.max(1),
                current_offset: stats.current_offset,
                size_bytes: stats.size_bytes,
                messages_count: stats.messages_count,
            })
    }

    fn encrypts(&self) -> bool {
        self.data.encrypts()
    }

    fn members(&self) -> Members {
        self.members.clone()
    }
}
