//! The safety checks, after every step: every replica commits the same entry at each op (so
//! nothing committed is lost or replaced), no request is executed twice, and every reply a
//! client received names the op its request committed at.

use std::collections::BTreeMap;

use vsr::{Checksum, Entry, Op};

#[derive(Debug, Default)]
pub struct Checker {
    /// The entry committed at each op (index op - 1), as the first replica to commit it saw it.
    committed: Vec<(Checksum, u128, u64)>,
    /// The op each (client, request) committed at.
    executed: BTreeMap<(u128, u64), Op>,
    /// Per replica: the last op its state machine applied since its last start.
    applied: Vec<Op>,
    /// Every reply clients accepted: (client, request, op).
    pub replies: Vec<(u128, u64, Op)>,
}

impl Checker {
    pub fn new(replicas: usize) -> Self {
        Self {
            applied: vec![0; replicas],
            ..Self::default()
        }
    }

    /// Replica `replica` restarted: its state machine starts empty.
    pub fn restarted(&mut self, replica: usize) {
        self.applied[replica] = 0;
    }

    pub fn commit(&mut self, replica: usize, entry: &Entry) -> Result<(), String> {
        if entry.op != self.applied[replica] + 1 {
            return Err(format!(
                "replica {replica} applied op {} after {}",
                entry.op, self.applied[replica]
            ));
        }
        self.applied[replica] = entry.op;
        let index = usize::try_from(entry.op - 1).unwrap();
        let identity = (entry.checksum, entry.client, entry.request);
        match self.committed.get(index) {
            Some(first) if *first != identity => {
                return Err(format!(
                    "op {} committed as {first:?} and, on replica {replica}, as {identity:?}",
                    entry.op
                ));
            }
            Some(_) => {}
            None => {
                assert_eq!(index, self.committed.len(), "ops commit in order");
                self.committed.push(identity);
                let key = (entry.client, entry.request);
                if let Some(earlier) = self.executed.insert(key, entry.op) {
                    return Err(format!(
                        "request {key:?} executed at op {earlier} and {}",
                        entry.op
                    ));
                }
            }
        }
        Ok(())
    }

    /// A client accepted a reply: its request must be the one committed at `op`.
    pub fn reply(&mut self, client: u128, request: u64, op: Op) -> Result<(), String> {
        let index = usize::try_from(op.saturating_sub(1)).unwrap();
        match self.committed.get(index) {
            Some((_, c, r)) if (*c, *r) == (client, request) => {
                self.replies.push((client, request, op));
                Ok(())
            }
            other => Err(format!(
                "reply to {client}/{request} at op {op}, which holds {other:?}"
            )),
        }
    }

    /// The longest commit any replica reached.
    pub fn committed(&self) -> Op {
        Op::try_from(self.committed.len()).unwrap()
    }

    /// Whether `log` (a replica's) agrees with every committed op it covers up to `up_to`.
    pub fn agrees(&self, log: &[Entry], up_to: Op) -> Result<(), String> {
        for entry in log.iter().take(usize::try_from(up_to).unwrap()) {
            let index = usize::try_from(entry.op - 1).unwrap();
            if let Some(committed) = self.committed.get(index)
                && committed.0 != entry.checksum
            {
                return Err(format!(
                    "a log holds another entry at committed op {}",
                    entry.op
                ));
            }
        }
        Ok(())
    }
}
