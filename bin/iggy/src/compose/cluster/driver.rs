//! The replica driver: one task on the leader shard that owns the `vsr::Replica` and runs
//! its effects — frames to the bus, the superblock and log to `cluster/`, committed ops to
//! the server — and feeds it the bus's messages, the server's submissions and the ticks.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crossfire::{AsyncRx, mpsc};
use futures_util::future::{Either, select};
use shard::Server;
use shard::cluster::{ClusterStatus, LocalFault, ReplicatedOp, entry_body};
use shard::mail::Reply;
use shard::refusal::Refusal;
use shard::server::Submission;
use transport::replica::Outbound;
use vsr::journal::Superblock;
use vsr::{Completion, Effect, Entry, Message, Outbox, Replica, Status};

use super::TICK;
use super::clock::{ReplicaClock, Turn};
use super::wal::Wal;

/// How long a submission may wait for its commit before it is answered `57` (it may still
/// commit; the client resends and idempotent producers dedupe).
const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// The root user to create once this node is the primary of a cluster without users.
pub(crate) struct RootSeed {
    pub(crate) username: String,
    pub(crate) password_hash: String,
    /// The password in the clear when this start generated it: printed once this node's
    /// seed is the one committed, as every node generates its own and only one is used.
    pub(crate) generated_password: Option<String>,
    /// Whether the root user exists and [`Driver::show_root_password`] has decided.
    pub(crate) password_settled: Cell<bool>,
}

pub(crate) struct Driver {
    pub(crate) replica: Replica,
    pub(crate) wal: Wal,
    pub(crate) server: Rc<Server>,
    pub(crate) outbound: Outbound,
    pub(crate) cluster: u128,
    pub(crate) status: Arc<ClusterStatus>,
    /// This process's client id in the replica's requests (random per start).
    pub(crate) client: u128,
    pub(crate) next_request: u64,
    pub(crate) pending: HashMap<u64, Pending>,
    pub(crate) clock: ReplicaClock,
    pub(crate) root: Option<RootSeed>,
    pub(crate) root_asked: Rc<Cell<bool>>,
    /// The view and status last published, to log each change once.
    pub(crate) published: Option<(u32, Status)>,
    /// The ops applied at start, as the log was read back (the commit known then).
    pub(crate) restored: u64,
}

/// A submission waiting for its commit: its deadline (ticks), the view it was submitted or
/// forwarded in, and where its answer goes.
pub(crate) type Pending = (u64, u32, Reply<Result<shard::cluster::Applied, Refusal>>);

enum Event {
    Message(Option<Message>),
    Submission(Option<Submission>),
    Tick,
}

impl Driver {
    /// Ticks since start: the replica's clock.
    fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Runs until both channels close (the server stops).
    pub(crate) async fn run(
        mut self,
        inbound: super::Inbound,
        submissions: AsyncRx<mpsc::Array<Submission>>,
        mut out: Outbox,
    ) {
        self.run_effects(&mut out).await;
        let mut next_tick = self.now() + 1;
        loop {
            let wait = next_tick.saturating_sub(self.now());
            let delay = TICK * u32::try_from(wait).unwrap_or(1);
            let event = {
                let message = pin!(async { Event::Message(inbound.next().await) });
                let submission = pin!(async { Event::Submission(submissions.recv().await.ok()) });
                let tick = pin!(async {
                    compio::time::sleep(delay).await;
                    Event::Tick
                });
                match select(select(message, submission), tick).await {
                    Either::Left((Either::Left((event, _)) | Either::Right((event, _)), _))
                    | Either::Right((event, _)) => event,
                }
            };
            let now = self.now();
            match event {
                Event::Message(Some(message)) => {
                    log::trace!(
                        "cluster: in {:?} from {:?}",
                        message.command(),
                        message.sender()
                    );
                    self.replica.on_message(now, &message, &mut out);
                }
                Event::Submission(Some(submission)) => self.submit(now, submission, &mut out),
                Event::Message(None) | Event::Submission(None) => return,
                Event::Tick => {
                    if let Turn::PutOff(until) = self.clock.turn(now) {
                        // After a stall: what peers sent meanwhile is read first.
                        next_tick = until;
                        continue;
                    }
                    next_tick = now + 1;
                    self.replica.tick(now, &mut out);
                    self.expire(now);
                    self.publish();
                    self.seed_root();
                }
            }
            self.run_effects(&mut out).await;
        }
    }

    fn submit(&mut self, now: u64, submission: Submission, out: &mut Outbox) {
        let request = self.next_request;
        self.next_request += 1;
        let deadline = now + super::ticks(COMMIT_WAIT);
        let view = self.replica.view();
        self.pending
            .insert(request, (deadline, view, submission.reply));
        let message = Message::Request {
            client: self.client,
            request,
            body: Arc::from(submission.body),
        };
        if self.replica.is_primary() {
            self.replica.on_message(now, &message, out);
        } else {
            // A backup forwards the request to its primary; it learns the commit like any
            // other op, and answers at its own apply. A lost forward times out as `57`.
            let primary = self.replica.primary_of(self.replica.view());
            let frame = vsr::wire::encode(&message, self.cluster);
            self.outbound.send(primary, frame);
        }
    }

    /// At a new view `view`: what this node submitted or forwarded under an older one may
    /// never be answered there (a forward to a primary that died is lost with it), so its
    /// clients hear `57` now and resend, instead of at the end of [`COMMIT_WAIT`]. An op
    /// that commits after all is settled at its retry (the 57 rule). Submissions made in
    /// `view` (between the view change and this check) stay: they went to its primary.
    fn answer_older_views_as_uncommitted(&mut self, view: u32) {
        let older: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, (_, submitted_in, _))| *submitted_in < view)
            .map(|(request, _)| *request)
            .collect();
        for request in older {
            if let Some((_, _, reply)) = self.pending.remove(&request) {
                reply.send(Err(Refusal::NotCommitted));
            }
        }
    }

    /// Answers `57` to the submissions whose commit has not come in time.
    fn expire(&mut self, now: u64) {
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, (deadline, _, _))| *deadline <= now)
            .map(|(request, _)| *request)
            .collect();
        for request in late {
            if let Some((_, _, reply)) = self.pending.remove(&request) {
                reply.send(Err(Refusal::NotCommitted));
            }
        }
    }

    pub(crate) fn publish(&mut self) {
        let view = self.replica.view();
        let primary = self.replica.primary_of(view);
        let status = self.replica.status();
        if self.published != Some((view, status)) {
            if self.published.is_some_and(|(seen, _)| seen != view) {
                self.answer_older_views_as_uncommitted(view);
            }
            self.published = Some((view, status));
            let (op, commit) = (self.replica.op(), self.replica.commit());
            log::info!(
                "cluster: view {view}, {status:?}, primary {primary}; op {op}, commit {commit}"
            );
        }
        let reachable = (0..16u8)
            .filter(|peer| self.outbound.is_connected(*peer))
            .fold(0u16, |set, peer| set | (1 << peer));
        let normal = self.replica.status() == Status::Normal;
        // A restarted replica knows only the commit its own log proves until it hears the
        // primary: until then its state is not the cluster's even if it has applied all it
        // knows.
        let (applied, commit) = (self.replica.applied(), self.replica.commit());
        let heard = if self.restored > 0 {
            commit > self.restored
        } else {
            commit > 0 || self.replica.op() == 0
        };
        let caught_up = applied == commit && heard;
        self.status
            .publish(view, primary, normal, reachable, caught_up);
        let progress = shard::cluster::LogProgress {
            op: self.replica.op(),
            commit,
            applied,
        };
        self.status
            .publish_progress(progress, |replica| self.replica.acked(replica));
    }

    /// On a primary that has applied its whole log of a cluster without users: commits the
    /// root user (through the sequencer, like any metadata change), once.
    fn seed_root(&self) {
        self.show_root_password();
        let caught_up = self.replica.applied() == self.replica.op();
        if !self.replica.is_primary()
            || self.replica.status() != Status::Normal
            || !caught_up
            || self.root_asked.get()
            || !self.server.metadata().users.is_empty()
        {
            return;
        }
        let Some(root) = &self.root else {
            return;
        };
        self.root_asked.set(true);
        let (server, asked) = (Rc::clone(&self.server), Rc::clone(&self.root_asked));
        let (username, hash) = (root.username.clone(), root.password_hash.clone());
        compio::runtime::spawn(async move {
            match server.ensure_root_user(&username, hash).await {
                Ok(true) => log::info!("cluster: created the root user `{username}`"),
                Ok(false) => {}
                Err(refusal) => {
                    log::warn!("cluster: creating the root user: {refusal}; will retry");
                    asked.set(false);
                }
            }
        })
        .detach();
    }

    /// Prints the generated root password once the root user exists and holds this
    /// node's seed, whichever attempt committed it: a first attempt that timed out may still
    /// commit later with nobody waiting for it. A node whose seed lost, or that started on
    /// a cluster with users, prints nothing.
    fn show_root_password(&self) {
        let Some(root) = &self.root else {
            return;
        };
        let Some(password) = &root.generated_password else {
            return;
        };
        if root.password_settled.get() || self.server.metadata().users.is_empty() {
            return;
        }
        root.password_settled.set(true);
        if self
            .server
            .user_has_password_hash(&root.username, &root.password_hash)
        {
            println!(
                "Root user `{}` created with password: {password}",
                root.username
            );
        }
    }

    async fn run_effects(&mut self, out: &mut Outbox) {
        let mut effects: VecDeque<Effect> = out.drain().collect();
        while let Some(effect) = effects.pop_front() {
            match effect {
                Effect::Send { to, message } => {
                    self.outbound
                        .send(to, vsr::wire::encode(&message, self.cluster));
                }
                Effect::Persist {
                    view,
                    log_view,
                    recovering,
                } => {
                    let superblock = Superblock {
                        cluster: self.cluster,
                        replica: self.replica.id(),
                        view,
                        log_view,
                        recovering,
                    };
                    if let Err(error) = self.wal.persist(&superblock) {
                        fatal("persist the view", &error);
                    }
                }
                Effect::Write {
                    id,
                    op_min,
                    entries,
                } => {
                    let sync = entries.iter().any(needs_sync);
                    if let Err(error) = self.wal.write(op_min, &entries, sync).await {
                        fatal("write the log", &error);
                    }
                    let mut more = Outbox::new();
                    self.replica
                        .on_io_done(self.now(), Completion::Written { id }, &mut more);
                    effects.extend(more.drain());
                }
                Effect::SendPrepares {
                    to,
                    view,
                    commit,
                    op_min,
                    op_max,
                } => self.send_from_log(to, view, commit, op_min, op_max).await,
                Effect::Commit { entry } => self.apply(entry).await,
                // Submissions are answered at their commit (`apply`), with its outcome.
                Effect::Reply { .. } => {}
            }
        }
    }

    /// Sends a replica the ops its state machine dropped from memory, read back from the log;
    /// nothing to a peer that is not connected (it asks again once it is).
    async fn send_from_log(&self, to: u8, view: u32, commit: u64, op_min: u64, op_max: u64) {
        if !self.outbound.is_connected(to) {
            return;
        }
        match self.wal.read(op_min, op_max).await {
            Ok(entries) => {
                for entry in entries {
                    let message = Message::Prepare {
                        view,
                        replica: self.replica.id(),
                        commit,
                        entry,
                    };
                    self.outbound
                        .send(to, vsr::wire::encode(&message, self.cluster));
                }
            }
            // A log this node wrote and synced no longer reads back: it must not go on.
            Err(error) => fatal("read the log back", &error),
        }
    }

    async fn apply(&mut self, entry: Entry) {
        let outcome = match apply_committed(&self.server, &entry).await {
            Ok(outcome) => outcome,
            Err(fault) => stop_on_fault(&fault),
        };
        if entry.client == self.client
            && let Some((_, _, reply)) = self.pending.remove(&entry.request)
        {
            reply.send(outcome);
        }
    }
}

/// Applies the committed `entry` to `server`: its outcome for the request, or this node's
/// own failure to apply it ([`LocalFault`]). A body that does not decode is refused on
/// every node alike.
pub(crate) async fn apply_committed(
    server: &Server,
    entry: &Entry,
) -> Result<Result<shard::cluster::Applied, Refusal>, LocalFault> {
    let op = entry_body(&entry.body).and_then(|(_, op)| ReplicatedOp::decode(op).ok());
    if let Some(op) = op {
        server.apply_replicated(entry.op, op).await
    } else {
        log::error!("cluster: committed op {} is not a replicated op", entry.op);
        Ok(Err(Refusal::Internal))
    }
}

/// A node whose state missed a committed op (its disk failed under it) must not go on
/// voting and serving as if it held it: it stops, and its restart replays the log.
pub(crate) fn stop_on_fault(fault: &LocalFault) -> ! {
    log::error!("cluster: {fault}; stopping (a restart replays the replica log)");
    std::process::exit(70)
}

/// Whether a log write holding `entry` must be synced before it is acknowledged: a
/// `persisted` append or a metadata change (an unreadable body counts as one).
fn needs_sync(entry: &Entry) -> bool {
    entry_body(&entry.body).is_none_or(|(sync, _)| sync)
}

/// A replica that cannot make its state durable must not go on promising: it stops.
fn fatal(what: &str, error: &std::io::Error) -> ! {
    log::error!("cluster: cannot {what}: {error}; stopping");
    std::process::exit(70)
}
