//! A replica whose disk was lost (VRR §4.3): it has forgotten what it acknowledged and the
//! view changes it voted in, so it neither acknowledges nor votes until a quorum of other
//! replicas has answered its nonce, one of them the primary of the latest view they name,
//! whose log it then takes.

use alloc::vec::Vec;

use crate::entry::is_chain;
use crate::{Break, Config, Durable, Entry, Message, Op, Outbox, ReplicaId, Status, View};

impl crate::Replica {
    /// A replica restarting without its disk (or with a disk marked `recovering`). `nonce`
    /// must differ from every earlier recovery of this replica (the caller draws it at random
    /// or counts restarts).
    pub fn recover(config: Config, id: ReplicaId, now: u64, nonce: u64, out: &mut Outbox) -> Self {
        if config.is_broken(Break::RecoveringReplicaVotes) {
            return Self::open(config, id, Durable::default(), now, out);
        }
        let mut replica = Self::blank(config, id, now);
        replica.nonce = nonce;
        replica.recovering_disk = true;
        // Marked first, so that a crash during recovery recovers again.
        replica.persist(out);
        replica.broadcast(&Message::Recovery { replica: id, nonce }, out);
        replica.invariants();
        replica
    }

    pub(crate) fn tick_recovering(&mut self, out: &mut Outbox) {
        if self.now.saturating_sub(self.retransmitted_at) >= self.config.retransmit_interval {
            self.retransmitted_at = self.now;
            self.broadcast(
                &Message::Recovery {
                    replica: self.id,
                    nonce: self.nonce,
                },
                out,
            );
        }
    }

    pub(crate) fn on_recovery(&mut self, replica: ReplicaId, nonce: u64, out: &mut Outbox) {
        if self.status != Status::Normal {
            return;
        }
        let primary_state = self.is_primary().then(|| (self.commit, self.log.clone()));
        let message = Message::RecoveryResponse {
            view: self.view,
            replica: self.id,
            nonce,
            primary_state,
        };
        out.send(replica, message);
    }

    pub(crate) fn on_recovery_response(
        &mut self,
        view: View,
        replica: ReplicaId,
        nonce: u64,
        primary_state: Option<&(Op, Vec<Entry>)>,
        out: &mut Outbox,
    ) {
        if self.status != Status::Recovering || nonce != self.nonce {
            return;
        }
        if let Some((commit, log)) = primary_state {
            let length = Op::try_from(log.len()).unwrap_or(Op::MAX);
            if self.config.primary(view) != replica || *commit > length || !is_chain(log) {
                self.invalid = self.invalid.saturating_add(1);
                return;
            }
        }
        self.recovery_answers
            .retain(|(each, _, _)| *each != replica);
        self.recovery_answers
            .push((replica, view, primary_state.cloned()));
        if self.recovery_answers.len() < self.config.quorum() {
            return;
        }
        let latest = self
            .recovery_answers
            .iter()
            .map(|(_, view, _)| *view)
            .max()
            .unwrap_or(0);
        let primary = self.config.primary(latest);
        let state = self
            .recovery_answers
            .iter()
            .find_map(|(each, view, state)| {
                (*each == primary && *view == latest)
                    .then_some(state.as_ref())
                    .flatten()
            });
        let Some((commit, log)) = state.cloned() else {
            return;
        };
        self.recovery_answers.clear();
        self.view = latest;
        self.status = Status::Normal;
        self.replace_log(log, out);
        self.heard_primary_at = self.now;
        self.learn_commit(commit, out);
        self.acknowledge(out);
    }
}
