//! Password hashing off the shard event loops: a few OS threads run argon2 (about 30 ms of CPU
//! per hash or check), fed through a bounded queue, so a burst of logins delays other logins
//! but never the requests a shard serves meanwhile.
//!
//! A full queue makes the caller wait (asynchronously): the queue bounds the work taken on,
//! and the login rate limiter ([`crate::login_limit`]) keeps one source from filling it.

use crossfire::mpmc::{self, Array};
use crossfire::{MAsyncTx, MRx};

use crate::metadata::auth::{CredentialError, hash_password, verify_password};

/// Jobs that may wait for a hashing thread.
const QUEUE_MAX: usize = 256;

type Job = Box<dyn FnOnce() + Send>;

/// The hashing threads and their queue. Dropping the pool ends the threads once the queue
/// is empty.
#[derive(Debug)]
pub struct HashPool {
    /// `None`: hash on the calling thread ([`Self::inline`]).
    jobs: Option<MAsyncTx<Array<Job>>>,
}

/// The pool's threads are gone (only at shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the password hashing threads stopped")]
pub struct HashPoolGone;

impl HashPool {
    /// A pool of `threads` (at least 1) threads named `hash-<i>`.
    pub fn new(threads: usize) -> Self {
        let (jobs, queue) = mpmc::bounded_async_blocking::<Job>(QUEUE_MAX);
        for index in 0..threads.max(1) {
            let queue: MRx<Array<Job>> = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("hash-{index}"))
                .spawn(move || {
                    while let Ok(job) = queue.recv() {
                        job();
                    }
                });
            if let Err(error) = spawned {
                log::error!("password hashing thread {index} failed to start: {error}");
            }
        }
        Self { jobs: Some(jobs) }
    }

    /// A pool without threads: every job runs on the caller's thread when it is awaited.
    /// For the deterministic simulator, where a thread would make the order of completions
    /// depend on the operating system.
    pub fn inline() -> Self {
        Self { jobs: None }
    }

    /// Runs `work` on a hashing thread and returns its result.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, HashPoolGone> {
        let Some(jobs) = &self.jobs else {
            return Ok(work());
        };
        let (reply, result) = crossfire::oneshot::oneshot();
        let job: Job = Box::new(move || reply.send(work()));
        jobs.send(job).await.map_err(|_closed| HashPoolGone)?;
        result.await.map_err(|_dropped| HashPoolGone)
    }

    /// Whether `password` matches the PHC string `password_hash`.
    pub async fn verify(&self, password: String, password_hash: String) -> bool {
        let verified = self
            .run(move || verify_password(&password, &password_hash))
            .await;
        verified.unwrap_or(false)
    }

    /// A fresh argon2id hash of `password`.
    pub async fn hash(&self, password: String) -> Result<String, HashError> {
        match self.run(move || hash_password(&password)).await {
            Ok(hashed) => hashed.map_err(HashError::Credential),
            Err(gone) => Err(HashError::Gone(gone)),
        }
    }
}

/// Hashing a password failed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error(transparent)]
    Credential(CredentialError),
    #[error(transparent)]
    Gone(HashPoolGone),
}

#[cfg(test)]
mod tests {
    use super::HashPool;
    use crate::metadata::auth::verify_password;

    #[test]
    fn hashes_and_checks_on_its_threads() {
        let pool = HashPool::new(2);
        compio::runtime::Runtime::new().unwrap().block_on(async {
            let hashed = pool.hash(String::from("secret")).await.unwrap();
            assert!(verify_password("secret", &hashed));
            assert!(pool.verify(String::from("secret"), hashed.clone()).await);
            assert!(!pool.verify(String::from("other"), hashed).await);
            assert!(
                !pool
                    .verify(String::from("x"), String::from("not a hash"))
                    .await
            );
        });
    }
}
