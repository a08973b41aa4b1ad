//! View changes: `StartViewChange`, `DoViewChange`, `StartView` (VRR §4.2), with the view made
//! durable before the messages that promise it.

use crate::replica::Vote;
use crate::{Break, Message, Op, Outbox, REPLICAS_MAX, ReplicaId, Status, Suffix, View};

impl crate::Replica {
    pub(crate) fn on_view_message(&mut self, message: &Message, out: &mut Outbox) {
        match message {
            Message::StartViewChange { view, replica } => {
                self.on_start_view_change(*view, *replica, out);
            }
            Message::DoViewChange {
                view,
                replica,
                log_view,
                log,
            } => {
                self.on_do_view_change(*view, *replica, *log_view, log, out);
            }
            Message::StartView { view, replica, log } => {
                self.on_start_view(*view, *replica, log, out);
            }
            Message::RequestStartView { view, replica } => {
                self.on_request_start_view(*view, *replica, out);
            }
            Message::Recovery { replica, nonce } => self.on_recovery(*replica, *nonce, out),
            Message::RecoveryResponse {
                view,
                replica,
                nonce,
                primary_state,
            } => {
                self.on_recovery_response(*view, *replica, *nonce, primary_state.as_ref(), out);
            }
            Message::Request { .. }
            | Message::Prepare { .. }
            | Message::PrepareOk { .. }
            | Message::Commit { .. }
            | Message::RequestPrepares { .. } => unreachable!("handled in replica.rs"),
        }
    }

    /// Leaves the current view for `view`: persists it, then asks everyone to follow.
    pub(crate) fn start_view_change(&mut self, view: View, out: &mut Outbox) {
        assert!(view > self.view || (view == self.view && self.status != Status::Normal));
        assert_ne!(
            self.status,
            Status::Recovering,
            "a recovering replica does not vote"
        );
        self.view = view;
        self.status = Status::ViewChange;
        self.view_change_started_at = self.now;
        self.retransmitted_at = self.now;
        self.svc_from = Self::bit(self.id);
        self.dvc_sent = false;
        self.votes.clear();
        self.catch_up = None;
        self.start_view_target = None;
        self.queue.clear();
        self.persist(out);
        let message = Message::StartViewChange {
            view,
            replica: self.id,
        };
        self.broadcast(&message, out);
        self.maybe_do_view_change(out);
    }

    pub(crate) fn tick_view_change(&mut self, out: &mut Outbox) {
        if self.now.saturating_sub(self.view_change_started_at) >= self.config.view_change_timeout {
            self.start_view_change(self.view.saturating_add(1), out);
            return;
        }
        if self.now.saturating_sub(self.retransmitted_at) >= self.config.retransmit_interval {
            self.retransmitted_at = self.now;
            let message = Message::StartViewChange {
                view: self.view,
                replica: self.id,
            };
            self.broadcast(&message, out);
            self.retransmit_fetch(out);
            if self.dvc_sent && !self.is_primary() {
                out.send(
                    self.config.primary(self.view),
                    self.do_view_change_message(),
                );
            }
        }
    }

    fn on_start_view_change(&mut self, view: View, replica: ReplicaId, out: &mut Outbox) {
        if self.status == Status::Recovering || view < self.view {
            return;
        }
        if view > self.view {
            self.start_view_change(view, out);
        }
        match self.status {
            Status::ViewChange => {
                self.svc_from |= Self::bit(replica);
                self.maybe_do_view_change(out);
            }
            // The sender missed this view's StartView.
            Status::Normal if self.is_primary() => out.send(replica, self.start_view_message()),
            Status::Normal | Status::Recovering => {}
        }
    }

    /// With a quorum of `StartViewChange`, sends this replica's log to the new primary (the
    /// new primary records its own).
    fn maybe_do_view_change(&mut self, out: &mut Outbox) {
        let votes = usize::try_from(self.svc_from.count_ones()).unwrap_or(REPLICAS_MAX);
        if self.status != Status::ViewChange || self.dvc_sent || votes < self.config.quorum() {
            return;
        }
        self.dvc_sent = true;
        if self.is_primary() {
            let own = Vote {
                replica: self.id,
                log_view: self.log_view,
                log: self.suffix(),
            };
            self.record_vote(own, out);
        } else {
            out.send(
                self.config.primary(self.view),
                self.do_view_change_message(),
            );
        }
    }

    /// This replica's `DoViewChange`: its log after its committed prefix. That prefix is
    /// capped at its log: a lagging backup may have heard of commits beyond the ops it holds,
    /// and it vouches only for those it holds.
    fn do_view_change_message(&self) -> Message {
        Message::DoViewChange {
            view: self.view,
            replica: self.id,
            log_view: self.log_view,
            log: self.suffix(),
        }
    }

    fn start_view_message(&self) -> Message {
        Message::StartView {
            view: self.view,
            replica: self.id,
            log: self.suffix(),
        }
    }

    fn on_do_view_change(
        &mut self,
        view: View,
        replica: ReplicaId,
        log_view: View,
        log: &Suffix,
        out: &mut Outbox,
    ) {
        if self.status == Status::Recovering
            || view < self.view
            || self.config.primary(view) != self.id
        {
            return;
        }
        if log_view >= view || !log.is_chain() {
            self.invalid = self.invalid.saturating_add(1);
            return;
        }
        if view > self.view {
            self.start_view_change(view, out);
        }
        match self.status {
            Status::ViewChange => {
                // A DoViewChange implies its sender's StartViewChange.
                self.svc_from |= Self::bit(replica);
                // The log is copied only for a vote this view change keeps.
                let vote = Vote {
                    replica,
                    log_view,
                    log: log.clone(),
                };
                self.record_vote(vote, out);
                self.maybe_do_view_change(out);
            }
            Status::Normal => out.send(replica, self.start_view_message()),
            Status::Recovering => {}
        }
    }

    fn record_vote(&mut self, vote: Vote, out: &mut Outbox) {
        self.votes.retain(|each| each.replica != vote.replica);
        self.votes.push(vote);
        let own_voted = self.votes.iter().any(|each| each.replica == self.id);
        if own_voted && self.votes.len() >= self.config.quorum() {
            self.start_view(out);
        }
    }

    /// As the new primary with a quorum of `DoViewChange`: the log of the most recent view, the
    /// longest among those, becomes this view's; everyone hears it in a `StartView`. If this
    /// replica's log does not reach that log's suffix, it first fetches the committed ops it
    /// lacks from the suffix's sender (and comes back here when it has them).
    pub(crate) fn start_view(&mut self, out: &mut Outbox) {
        let best = if self.config.is_broken(Break::ViewChangeKeepsOwnLog) {
            self.votes.iter().find(|vote| vote.replica == self.id)
        } else {
            self.votes
                .iter()
                .max_by_key(|vote| (vote.log_view, vote.log.op()))
        };
        let Some(best) = best else { return };
        let commit = self
            .votes
            .iter()
            .map(|vote| vote.log.commit)
            .max()
            .unwrap_or(0);
        let (source, target) = (best.replica, best.log.commit);
        // A suffix's entries share their bodies: the clone copies at most a pipeline of
        // headers.
        let Ok((from, entries)) = self.assemble(best.log.clone()) else {
            if !self.fetch(source, target, out) {
                // The chosen log contradicts ops this replica knows committed.
                self.invalid = self.invalid.saturating_add(1);
            }
            return;
        };
        let length = from
            .saturating_sub(1)
            .saturating_add(Op::try_from(entries.len()).unwrap_or(Op::MAX));
        let commit = if self.config.is_broken(Break::ViewChangeKeepsOwnLog) {
            commit.min(length)
        } else {
            commit
        };
        assert!(commit <= length, "the chosen log holds every committed op");
        self.votes.clear();
        self.catch_up = None;
        self.replace_log(from, entries, out);
        self.status = Status::Normal;
        self.acked = [0; REPLICAS_MAX];
        if self.log_view_durable == self.view {
            self.acked[usize::from(self.id)] = self.durable;
        }
        self.commit = self.commit.max(commit);
        self.commit_sent_at = self.now;
        self.retransmitted_at = self.now;
        let message = self.start_view_message();
        self.broadcast(&message, out);
        self.apply_commits(out);
        self.try_commit(out);
    }

    /// A backup takes the new view's log: whole, never a prefix of it, since a replica labelled
    /// with a view vouches in later view changes for every op that view started with. If its
    /// own log does not reach the `StartView`'s suffix, it first fetches the committed ops it
    /// lacks from the primary, between views (so a vote it casts meanwhile is its old log's).
    fn on_start_view(&mut self, view: View, from: ReplicaId, log: &Suffix, out: &mut Outbox) {
        if self.status == Status::Recovering || view < self.view {
            return;
        }
        if view == self.view && self.status == Status::Normal {
            return;
        }
        if self.config.primary(view) != from || !log.is_chain() {
            self.invalid = self.invalid.saturating_add(1);
            return;
        }
        self.take_start_view(view, log.clone(), out);
    }

    /// Takes `view`'s log if this replica holds every op before its suffix; else leaves its
    /// view for `view` (without a vote: the view has started) and fetches them.
    pub(crate) fn take_start_view(&mut self, view: View, log: Suffix, out: &mut Outbox) {
        let commit = log.commit;
        match self.assemble(log) {
            Ok((from, entries)) => {
                self.view = view;
                self.catch_up = None;
                self.start_view_target = None;
                self.replace_log(from, entries, out);
                self.status = Status::Normal;
                self.queue.clear();
                self.votes.clear();
                self.heard_primary_at = self.now;
                self.learn_commit(commit, out);
                // Acknowledged now if nothing needed writing, else when the write completes.
                self.acknowledge(out);
            }
            Err(log) => {
                if view > self.view || self.status == Status::Normal {
                    self.view = view;
                    self.status = Status::ViewChange;
                    self.view_change_started_at = self.now;
                    self.retransmitted_at = self.now;
                    self.svc_from = Self::bit(self.id);
                    // No vote for a view that has started; its retransmission (to the view's
                    // primary, which answers with the `StartView` again) is the retry.
                    self.dvc_sent = true;
                    self.votes.clear();
                    self.queue.clear();
                    self.persist(out);
                }
                let primary = self.config.primary(view);
                self.start_view_target = Some(log);
                if !self.fetch(primary, commit, out) {
                    // The view's log contradicts ops this replica knows committed.
                    self.invalid = self.invalid.saturating_add(1);
                    self.start_view_target = None;
                }
            }
        }
    }

    fn on_request_start_view(&mut self, view: View, replica: ReplicaId, out: &mut Outbox) {
        if self.status == Status::Normal && self.is_primary() && view <= self.view {
            out.send(replica, self.start_view_message());
        }
    }
}
