//! The cluster simulator (VOPR pattern): replicas of `vsr` on simulated time, a network
//! that loses, duplicates, reorders and partitions, disks that lose their writes in flight
//! (tearing the first) or are wiped, crashes and restarts; the checker after every step;
//! then a liveness phase that heals everything and requires every request to complete.

pub mod checker;
pub mod disk;
pub mod network;
pub mod rng;

use std::sync::Arc;

use vsr::{Break, Completion, Config, Effect, Entry, Message, Outbox, Replica, Restore, Status};

use checker::Checker;
use disk::Disk;
use network::{Faults, Network, Packet};
use rng::Rng;

/// How often a client resends a request that has no reply yet.
const CLIENT_RETRY_TICKS: u64 = 40;

/// One run's shape, drawn from the seed (swarm testing: each seed its own mix of faults).
#[derive(Debug, Clone)]
pub struct Options {
    pub replicas: u8,
    pub clients: usize,
    pub requests_per_client: u64,
    pub network: Faults,
    /// Per mille per tick: a replica crashes (while fewer than a minority are down).
    pub crash: u64,
    pub down_max: u64,
    /// Per mille per restart: the replica comes back with an empty disk.
    pub wipe: u64,
    /// Per mille per tick: one replica is cut off from everyone.
    pub partition: u64,
    pub partition_max: u64,
    pub torn: bool,
    /// Per mille: a replica that has just entered a new view crashes on the next tick, while
    /// the log that view installed may still be being written.
    pub crash_on_new_view: u64,
    pub write_latency_max: u64,
    /// Per mille: how often each replica's clock ticks per simulated tick (clock drift: a
    /// replica whose clock runs slow times out later than its peers).
    pub tick_rates: Vec<u64>,
    pub ticks_faulty: u64,
    pub ticks_liveness: u64,
    pub broken: Option<Break>,
}

impl Options {
    pub fn swarm(seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x5157_4152_4d00);
        let clients = usize::try_from(rng.between(2, 8)).unwrap();
        let replicas = std::env::var("VSR_REPLICAS")
            .ok()
            .and_then(|value| value.parse().ok());
        Self {
            replicas: replicas.unwrap_or(3),
            clients,
            // At least 1,000 requests in all.
            requests_per_client: 1000u64.div_ceil(clients as u64),
            network: Faults {
                loss: rng.between(0, 100),
                duplicate: rng.between(0, 50),
                delay_max: rng.between(1, 10),
            },
            crash: rng.between(1, 15),
            down_max: rng.between(20, 600),
            wipe: rng.between(0, 300),
            partition: rng.between(0, 4),
            partition_max: rng.between(50, 500),
            torn: rng.chance(700),
            crash_on_new_view: rng.between(0, 300),
            write_latency_max: rng.between(1, 40),
            tick_rates: (0..replicas.unwrap_or(3))
                .map(|_| rng.between(700, 1000))
                .collect(),
            ticks_faulty: 3000,
            ticks_liveness: 20_000,
            broken: None,
        }
    }
}

#[derive(Debug)]
struct Node {
    replica: Option<Replica>,
    disk: Disk,
    down_until: u64,
    starts: u64,
}

#[derive(Debug)]
struct Client {
    id: u128,
    /// The request number of the request in flight (or the next one).
    request: u64,
    in_flight: bool,
    sent_at: u64,
    done: u64,
}

/// What a run did, for the figures in the closing notes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub requests: u64,
    pub committed: u64,
    pub crashes: u64,
    pub wipes: u64,
    pub partitions: u64,
    pub views: u32,
    /// Prepares read back from a disk (ops dropped from memory).
    pub disk_reads: u64,
    /// Prepares sent by a replica other than their view's primary: answers to a fetch.
    pub fetched: u64,
    /// Ops dropped from memory at the end, summed over replicas.
    pub evicted: u64,
    pub ticks: u64,
    pub trace: u64,
}

pub struct World {
    options: Options,
    config: Config,
    rng: Rng,
    now: u64,
    nodes: Vec<Node>,
    clients: Vec<Client>,
    network: Network,
    checker: Checker,
    summary: Summary,
    /// In the faulty phase: a replica to crash on the next tick (`crash_on_new_view`).
    crash_next: Option<usize>,
    faulty: bool,
    /// Each replica's own clock, in its ticks.
    clocks: Vec<u64>,
}

impl World {
    pub fn new(seed: u64, options: Options) -> Self {
        let mut config = Config::new(options.replicas);
        config.broken = options.broken;
        let nodes = (0..options.replicas)
            .map(|id| Node {
                replica: Some(Replica::format(config.clone(), id)),
                disk: Disk::default(),
                down_until: 0,
                starts: 1,
            })
            .collect();
        let clients = (0..options.clients)
            .map(|index| Client {
                id: 1000 + index as u128,
                request: 1,
                in_flight: false,
                sent_at: 0,
                done: 0,
            })
            .collect();
        let replica_count = usize::from(options.replicas);
        Self {
            network: Network::new(options.network),
            checker: Checker::new(usize::from(options.replicas)),
            options,
            config,
            rng: Rng::new(seed),
            now: 0,
            nodes,
            clients,
            summary: Summary::default(),
            crash_next: None,
            faulty: true,
            clocks: vec![0; replica_count],
        }
    }

    /// Runs the faulty phase, then the liveness phase; `Err` names the broken invariant.
    pub fn run(&mut self) -> Result<Summary, String> {
        for _ in 0..self.options.ticks_faulty {
            self.step(true)?;
        }
        self.faulty = false;
        self.heal();
        for _ in 0..self.options.ticks_liveness {
            self.step(false)?;
            if self.converged() {
                return self.finish();
            }
        }
        Err(format!(
            "liveness: no convergence {} ticks after healing: {}",
            self.options.ticks_liveness,
            self.state()
        ))
    }

    fn state(&self) -> String {
        let replicas: Vec<String> = self
            .nodes
            .iter()
            .map(|node| match &node.replica {
                Some(r) => format!(
                    "{}:{:?} v{} lv{} op{} c{} a{}",
                    r.id(),
                    r.status(),
                    r.view(),
                    r.log_view(),
                    r.op(),
                    r.commit(),
                    r.applied()
                ),
                None => "down".into(),
            })
            .collect();
        let done: u64 = self.clients.iter().map(|c| c.done).sum();
        format!(
            "{replicas:?}, {done} requests done, {} committed",
            self.checker.committed()
        )
    }

    fn heal(&mut self) {
        self.network.faults.loss = 0;
        self.network.faults.duplicate = 0;
        self.network.isolated = 0;
        for node in &mut self.nodes {
            node.down_until = node.down_until.min(self.now);
        }
    }

    fn converged(&self) -> bool {
        let done = self
            .clients
            .iter()
            .all(|c| c.done == self.options.requests_per_client);
        let committed = self.checker.committed();
        done && self.nodes.iter().all(|node| {
            node.replica
                .as_ref()
                .is_some_and(|r| r.status() == Status::Normal && r.applied() == committed)
        })
    }

    /// A replica's whole log: the ops it dropped from memory, from its disk, then the rest.
    fn whole_log(node: &Node) -> Result<Vec<Entry>, String> {
        let replica = node
            .replica
            .as_ref()
            .ok_or("every replica is up after healing")?;
        let base = usize::try_from(replica.log_base()).unwrap();
        let mut log = node
            .disk
            .durable
            .log
            .get(..base)
            .ok_or(format!("replica {} lost ops below {base}", replica.id()))?
            .to_vec();
        log.extend_from_slice(replica.log());
        Ok(log)
    }

    fn finish(&mut self) -> Result<Summary, String> {
        let mut logs = Vec::new();
        for node in &self.nodes {
            let log = Self::whole_log(node)?;
            let commit = node.replica.as_ref().map_or(0, Replica::commit);
            self.checker.agrees(&log, commit)?;
            self.summary.evicted += node.replica.as_ref().map_or(0, Replica::log_base);
            logs.push(log);
        }
        for (client, request, op) in self.checker.replies.clone() {
            // Every acknowledged request is still in every replica's log at its op.
            for log in &logs {
                let entry = log.get(usize::try_from(op - 1).unwrap());
                if !entry.is_some_and(|e| e.client == client && e.request == request) {
                    return Err(format!("acknowledged {client}/{request} at op {op} lost"));
                }
            }
        }
        self.summary.committed = self.checker.committed();
        self.summary.requests = self.clients.iter().map(|c| c.done).sum();
        self.summary.ticks = self.now;
        self.summary.views = self
            .nodes
            .iter()
            .filter_map(|n| n.replica.as_ref())
            .map(Replica::view)
            .max()
            .unwrap_or(0);
        Ok(self.summary.clone())
    }

    fn step(&mut self, faulty: bool) -> Result<(), String> {
        self.now += 1;
        if faulty {
            self.inject_faults();
        }
        if self.network.isolated != 0 && self.now >= self.network.healed_at {
            self.network.isolated = 0;
        }
        self.restart_due(faulty)?;
        while let Some(packet) = self.network.next_due(self.now) {
            self.deliver(packet)?;
        }
        for index in 0..self.nodes.len() {
            while let Some(id) = self.nodes[index].disk.complete(self.now) {
                let completion = Completion::Written { id };
                self.with_replica(index, |replica, now, out| {
                    replica.on_io_done(now, completion, out);
                })?;
            }
        }
        for index in 0..self.nodes.len() {
            // Each replica counts its own ticks: the clocks drift apart.
            if self.rng.chance(self.options.tick_rates[index]) {
                self.clocks[index] += 1;
                self.with_replica(index, Replica::tick)?;
            }
        }
        self.drive_clients();
        Ok(())
    }

    fn inject_faults(&mut self) {
        let down = self.nodes.iter().filter(|n| n.replica.is_none()).count();
        let minority = usize::from(self.options.replicas - 1) / 2;
        // Every seed has at least one crash: the first half of the phase ends with one.
        if self.now == self.options.ticks_faulty / 2 && self.summary.crashes == 0 {
            self.crash_next =
                Some(usize::try_from(self.rng.below(self.nodes.len() as u64)).unwrap());
        }
        let targeted = self.crash_next.take();
        if down < minority && (targeted.is_some() || self.rng.chance(self.options.crash)) {
            let random = usize::try_from(self.rng.below(self.nodes.len() as u64)).unwrap();
            let index = targeted.unwrap_or(random);
            let node = &mut self.nodes[index];
            if node.replica.is_some() {
                if std::env::var_os("VSR_DEBUG").is_some() {
                    println!("{} r{index}: crash", self.now);
                }
                node.replica = None;
                node.disk.crash(&mut self.rng, self.options.torn);
                node.down_until = self.now + self.rng.between(1, self.options.down_max);
                self.summary.crashes += 1;
            }
        }
        if self.network.isolated == 0 && self.rng.chance(self.options.partition) {
            let replica = self.rng.below(u64::from(self.options.replicas));
            self.network.isolated = 1 << replica;
            self.network.healed_at = self.now + self.rng.between(1, self.options.partition_max);
            self.summary.partitions += 1;
        }
    }

    fn restart_due(&mut self, faulty: bool) -> Result<(), String> {
        for index in 0..self.nodes.len() {
            let node = &mut self.nodes[index];
            if node.replica.is_some() || self.now < node.down_until {
                continue;
            }
            // A lost disk makes its replica faulty until it has recovered: at most one at a
            // time, so that a quorum of others can always answer it.
            let recovering = self.nodes.iter().any(|n| {
                n.disk.durable.recovering
                    || n.replica
                        .as_ref()
                        .is_some_and(|r| r.status() == Status::Recovering)
            });
            let node = &mut self.nodes[index];
            node.starts += 1;
            let id = u8::try_from(index).unwrap();
            let mut out = Outbox::new();
            let wipe = faulty && !recovering && self.rng.chance(self.options.wipe);
            if wipe {
                node.disk.wipe();
                self.summary.wipes += 1;
            }
            let clock = self.clocks[index];
            self.checker.restarted(index);
            let replica = if wipe || node.disk.durable.recovering {
                let nonce = node.starts;
                Replica::recover(self.config.clone(), id, clock, nonce, &mut out)
            } else {
                // As the server does: the log read back through a `Restore`, which hands
                // back the ops it proves committed to be applied before the replica opens.
                let disk = &node.disk.durable;
                let mut restore = Restore::default();
                for entry in &disk.log {
                    if let Some(committed) = restore.push(entry.clone()) {
                        self.checker.commit(index, &committed)?;
                    }
                }
                let durable = restore.finish(disk.view, disk.log_view);
                Replica::open(self.config.clone(), id, durable, clock, &mut out)
            };
            let node = &mut self.nodes[index];
            if std::env::var_os("VSR_DEBUG").is_some() {
                println!(
                    "{} r{index}: start {} log {}",
                    self.now,
                    describe(&replica),
                    node.disk.durable.log.len()
                );
            }
            node.replica = Some(replica);
            self.execute(index, &mut out)?;
        }
        Ok(())
    }

    fn deliver(&mut self, packet: Packet) -> Result<(), String> {
        match packet {
            Packet::ToReplica { to, message } => {
                self.trace(u64::from(to) << 8 | message.command() as u64);
                self.with_replica(usize::from(to), |replica, now, out| {
                    replica.on_message(now, &message, out);
                })
            }
            Packet::ToClient {
                client,
                request,
                op,
            } => {
                let client_id = self.clients[client].id;
                self.checker.reply(client_id, request, op)?;
                let each = &mut self.clients[client];
                if each.in_flight && each.request == request {
                    each.in_flight = false;
                    each.done += 1;
                    each.request += 1;
                }
                Ok(())
            }
        }
    }

    fn with_replica(
        &mut self,
        index: usize,
        step: impl FnOnce(&mut Replica, u64, &mut Outbox),
    ) -> Result<(), String> {
        // A replica sees only its own clock.
        let now = self.clocks[index];
        let Some(replica) = self.nodes[index].replica.as_mut() else {
            return Ok(());
        };
        let before = describe(replica);
        let log_view_before = replica.log_view();
        let mut out = Outbox::new();
        step(replica, now, &mut out);
        let after = describe(replica);
        if before != after && std::env::var_os("VSR_DEBUG").is_some() {
            println!("{now} r{index}: {before} -> {after}");
        }
        let new_view = replica.status() == Status::Normal && replica.log_view() > log_view_before;
        if self.faulty && new_view && self.rng.chance(self.options.crash_on_new_view) {
            self.crash_next = Some(index);
        }
        self.execute(index, &mut out)
    }

    fn execute(&mut self, index: usize, out: &mut Outbox) -> Result<(), String> {
        let from = u8::try_from(index).unwrap();
        for effect in out.drain() {
            match effect {
                Effect::Send { to, message } => {
                    if let Message::Prepare { view, .. } = &message
                        && self.config.primary(*view) != from
                    {
                        self.summary.fetched += 1;
                    }
                    self.network.send(
                        &mut self.rng,
                        self.now,
                        Some(from),
                        &Packet::ToReplica { to, message },
                    );
                }
                Effect::Persist {
                    view,
                    log_view,
                    recovering,
                } => {
                    let durable = &mut self.nodes[index].disk.durable;
                    durable.view = view;
                    durable.log_view = log_view;
                    durable.recovering = recovering;
                }
                Effect::Write {
                    id,
                    op_min,
                    entries,
                } => {
                    let latency = self.rng.between(1, self.options.write_latency_max);
                    self.nodes[index]
                        .disk
                        .write(self.now, latency, id, op_min, entries);
                }
                Effect::SendPrepares {
                    to,
                    view,
                    commit,
                    op_min,
                    op_max,
                } => {
                    // Ops the replica dropped from memory are applied and written: on disk.
                    self.summary.disk_reads += op_max - op_min + 1;
                    for op in op_min..=op_max {
                        let disk = &self.nodes[index].disk.durable.log;
                        let Some(entry) = disk.get(usize::try_from(op - 1).unwrap()) else {
                            return Err(format!("replica {index} has no op {op} on disk"));
                        };
                        let message = Message::Prepare {
                            view,
                            replica: from,
                            commit,
                            entry: entry.clone(),
                        };
                        self.network.send(
                            &mut self.rng,
                            self.now,
                            Some(from),
                            &Packet::ToReplica { to, message },
                        );
                    }
                }
                Effect::Commit { entry } => self.checker.commit(index, &entry)?,
                Effect::Reply {
                    client,
                    request,
                    op,
                } => {
                    let client = usize::try_from(client - 1000).unwrap();
                    self.network.send(
                        &mut self.rng,
                        self.now,
                        Some(from),
                        &Packet::ToClient {
                            client,
                            request,
                            op,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    fn drive_clients(&mut self) {
        for index in 0..self.clients.len() {
            let client = &self.clients[index];
            if client.done == self.options.requests_per_client {
                continue;
            }
            if client.in_flight && self.now - client.sent_at < CLIENT_RETRY_TICKS {
                continue;
            }
            let (id, request) = (client.id, client.request);
            let body: Arc<[u8]> = format!("{id}-{request}").into_bytes().into();
            for to in 0..self.options.replicas {
                let message = Message::Request {
                    client: id,
                    request,
                    body: body.clone(),
                };
                self.network.send(
                    &mut self.rng,
                    self.now,
                    None,
                    &Packet::ToReplica { to, message },
                );
            }
            let client = &mut self.clients[index];
            client.in_flight = true;
            client.sent_at = self.now;
        }
    }

    fn trace(&mut self, value: u64) {
        self.summary.trace = (self.summary.trace ^ value ^ self.now).wrapping_mul(0x0100_0000_01b3);
    }
}

/// A replica's position, for `VSR_DEBUG` traces.
fn describe(r: &Replica) -> String {
    format!(
        "{:?} v{} lv{} op{} c{} a{}",
        r.status(),
        r.view(),
        r.log_view(),
        r.op(),
        r.commit(),
        r.applied()
    )
}
