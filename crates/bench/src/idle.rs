//! Idle connections held open through a run (`--idle-connections N`): each logs in and then
//! says nothing, as the many quiet clients of a production server do, while the actors
//! measure what those connections cost everyone else. One thread per connection would not
//! reach 10,000, so a few opener threads log them in one after another and the sockets are
//! then only held. They log in with a personal access token (created for the run, deleted
//! after it): the server checks a token with one SHA-256, a password with a deliberately
//! slow hash that would make opening thousands take minutes.

use std::thread;
use std::time::Instant;

use crate::actors;
use crate::client::{Client, ClientError};
use crate::options::Options;

/// Threads logging the idle connections in.
const OPENERS: u32 = 8;

/// Client ids of idle connections start here (actors use lower ones).
const CLIENT_BASE: u32 = 2_000_000;

/// The idle connections of a run; dropping it closes them.
pub struct Idle {
    clients: Vec<Client>,
    token_name: String,
    /// Seconds opening them took.
    pub seconds: f64,
}

impl Idle {
    /// Opens `count` idle connections in the dialect `admin` speaks.
    pub fn open(options: &Options, admin: &mut Client, count: u32) -> Result<Self, ClientError> {
        let token_name = format!("bench-idle-{}", std::process::id());
        let token = admin.create_token(&token_name)?;
        let dialect = admin.dialect();
        let started = Instant::now();
        let opened: Result<Vec<Vec<Client>>, ClientError> = thread::scope(|scope| {
            let openers: Vec<_> = (0..OPENERS.min(count))
                .map(|opener| {
                    let token = &token;
                    scope.spawn(move || {
                        (opener..count)
                            .step_by(OPENERS as usize)
                            .map(|index| {
                                let id = actors::client_id(CLIENT_BASE + index);
                                Client::connect_with_token(options.address, token, dialect, id)
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                })
                .collect();
            openers
                .into_iter()
                .map(|opener| opener.join().expect("an opener thread does not panic"))
                .collect()
        });
        let seconds = started.elapsed().as_secs_f64();
        match opened {
            Ok(groups) => Ok(Self {
                clients: groups.into_iter().flatten().collect(),
                token_name,
                seconds,
            }),
            Err(error) => {
                let _ = admin.delete_token(&token_name);
                Err(error)
            }
        }
    }

    /// Connections held open.
    pub fn count(&self) -> usize {
        self.clients.len()
    }

    /// Closes the connections and deletes the run's token.
    pub fn close(self, admin: &mut Client) {
        drop(self.clients);
        if let Err(error) = admin.delete_token(&self.token_name) {
            eprintln!("warning: token {} not removed: {error}", self.token_name);
        }
    }
}
