//! A replica whose disk was lost (VRR §4.3): it has forgotten what it acknowledged and the
//! view changes it voted in, so it neither acknowledges nor votes until a quorum of other
//! replicas has answered its nonce, one of them the primary of the latest view they name,
//! whose log it then takes: that primary sends its log after its commit, and the replica
//! fetches the committed ops before it from the primary, writing and applying each batch as
//! it comes (`catch_up.rs`), then takes the rest.

use crate::{Break, Config, Durable, Message, Outbox, ReplicaId, Status, Suffix, View};

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
        if self.recovery_target.is_some() {
            let stalled = self.catch_up.as_ref().is_none_or(|catch_up| {
                self.now.saturating_sub(catch_up.progressed_at) >= self.config.view_change_timeout
            });
            if !stalled {
                self.retransmit_fetch(out);
                return;
            }
            // The primary stopped answering: ask everyone again (what was fetched is
            // committed, and kept), and give the next answer a whole timeout.
            if let Some(catch_up) = &mut self.catch_up {
                catch_up.progressed_at = self.now;
            }
            self.recovery_target = None;
            self.recovery_answers.clear();
            self.retransmitted_at = 0;
        }
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
        let primary_state = self.is_primary().then(|| self.suffix());
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
        primary_state: Option<&Suffix>,
        out: &mut Outbox,
    ) {
        if self.status != Status::Recovering
            || nonce != self.nonce
            || self.recovery_target.is_some()
        {
            return;
        }
        if let Some(log) = primary_state
            && (self.config.primary(view) != replica || !log.is_chain())
        {
            self.invalid = self.invalid.saturating_add(1);
            return;
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
        let Some(log) = state.cloned() else {
            return;
        };
        self.recovery_answers.clear();
        self.recovery_target = Some((latest, log));
        self.finish_recovery(out);
    }

    /// Takes the chosen primary's log once this replica holds every committed op before its
    /// suffix; until then fetches them from that primary.
    pub(crate) fn finish_recovery(&mut self, out: &mut Outbox) {
        let Some((view, log)) = self.recovery_target.take() else {
            return;
        };
        let commit = log.commit;
        match self.assemble(log) {
            Ok((from, entries)) => {
                self.catch_up = None;
                self.view = view;
                self.status = Status::Normal;
                self.replace_log(from, entries, out);
                self.heard_primary_at = self.now;
                self.learn_commit(commit, out);
                self.acknowledge(out);
            }
            Err(log) => {
                let primary = self.config.primary(view);
                self.recovery_target = Some((view, log));
                if !self.fetch(primary, commit, out) {
                    self.invalid = self.invalid.saturating_add(1);
                    self.recovery_target = None;
                }
            }
        }
    }
}
